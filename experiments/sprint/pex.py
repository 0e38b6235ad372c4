"""A PEX qualification sprint: minimum PASS → adjacent FAIL → binding resource → intervention →
recovered PASS → the boundary re-qualified with the intervention (the frontier shift) and the
next binding resource. Every step is a physical trial (`luma.experiments.sprint.trial`).

`plan()` checks everything a user can get wrong (contract, dimension, levels, intervention)
before any trial runs; `Sprint.run()` does the trials and hands each one to the recorder the
moment it is judged, so a killed sprint leaves its completed trials and no chain.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from luma.errors import ConfigError, ContractError, HostContended, StateError
from luma.experiments.services import for_contract
from luma.experiments.sprint import search, states
from luma.experiments.sprint.contract import Contract
from luma.experiments.sprint.search import Boundary
from luma.experiments.sprint.states import State
from luma.experiments.sprint.trial import Trial, run_trial
from luma.kb.records import judge
from luma.kb.records.pex_chain import Level

#: Dimensions only some services have (the rest of states.ENFORCED: every in-process service).
_SERVICE_DIMENSIONS = {"kv_cache": {"decoder", "openai-endpoint"}, "runtime": {"embedding", "classifier", "decoder",
                                                                             "matvec"},
                       "accelerator_count": {"openai-endpoint"}, "hbm_capacity": {"openai-endpoint"},
                       "power": {"openai-endpoint"}}


@dataclass
class Plan:
    """A validated sprint: nothing in it can fail for a reason the user could have fixed first."""

    contract: Contract
    dimension: str
    levels: list[Level]  # least to most of the resource
    base: State  # every other enforced level
    repetitions: int
    intervention: str | None
    variant: str | None
    start: int | None = None
    max_retries: int = 2
    #: The variant the boundary is searched with (fp32 for the in-process services; an endpoint
    #: contract names its own, e.g. a GGUF F16 file).
    baseline: str = "fp32"

    def state(self, index: int) -> State:
        return self.base.with_level(self.dimension, self.levels[index])

    def new_id(self) -> str:
        """A fresh sprint identifier: contract, dimension and start time."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        return f"{self.contract.name}-{self.dimension}-{stamp}"


def max_trials(levels: int, repetitions: int, others: int, intervention: bool) -> int:
    """At most how many trials a sprint runs: bisection within its budget (ceil(log2 L) +
    repetitions), one restoration per other dimension, the intervention's repetitions, the
    re-qualifying bisection and the next binding's restorations."""
    n = math.ceil(math.log2(levels)) + repetitions + others
    if intervention:
        n += repetitions + math.ceil(math.log2(levels)) + 1 + others
    return n


def plan(contract: Contract, dimension: str | None = None, levels: list | None = None, intervention: str | None = None,
         repetitions: int | None = None, start_level=None) -> Plan:
    """Resolve the sprint's settings (command line over contract defaults) and check them all."""
    spec = contract.sprint
    dimension = dimension or (spec.dimension if spec else None)
    if not dimension:
        raise ContractError("no dimension to sweep: give one, or set [sprint].dimension in the contract", field="dimension")
    if dimension not in states.ENFORCED + states.HOOKED:
        raise StateError(f"unknown or unenforceable dimension {dimension!r} (this host enforces: "
                          f"{', '.join(states.ENFORCED)}; an endpoint's hooks also set "
                          f"{', '.join(states.HOOKED)})", field="dimension")
    allowed = _SERVICE_DIMENSIONS.get(dimension)
    if allowed and contract.service not in allowed:
        raise ContractError(f"the {contract.service} service has no {dimension}", field="dimension")
    endpoint = contract.endpoint
    for dim in [dimension, *contract.state]:
        if endpoint is not None and not endpoint.sets(dim):
            why = ("it has no launch command (a running server's state cannot be changed)" if endpoint.launch is None
                   else f"no hook of its [service] table sets {dim}")
            raise StateError(f"the endpoint service cannot take a {dim} level: {why}", field="dimension")
    raw = levels if levels is not None else (spec.levels if spec else None)
    if not raw or len(raw) < 2:
        raise ContractError("a sprint needs at least two levels (give them, or set [sprint].levels in the contract)",
                          field="levels")
    parsed = [states.parse_level(dimension, x) for x in raw]
    for lv in parsed:
        states.base_value(dimension, lv)  # an impossible level fails here, before any trial
    kinds = {states.unit_kind(dimension, lv) for lv in parsed}
    if len(kinds) > 1:
        raise StateError(f"levels mix units of different kinds ({', '.join(sorted(kinds))})", field="levels")
    if dimension == "kv_cache" and contract.endpoint is None and kinds != {"byte"}:
        raise StateError(f"the {contract.service} service sizes its KV cache in bytes", field="levels")
    keys = [states.order_key(dimension, lv) for lv in parsed]  # raises on an impossible level
    if len(set(keys)) != len(keys):
        raise StateError("levels repeat a value", field="levels")
    ordered = [lv for _, lv in sorted(zip(keys, parsed), key=lambda p: p[0])]
    base = states.resolve(contract.state, skip=dimension)
    service = for_contract(contract)
    intervention = intervention or (spec.intervention if spec else None)
    variant = None
    if intervention:
        if intervention not in service.interventions:
            raise ContractError(f"the {contract.service} service has no intervention {intervention!r} "
                              f"(it has: {', '.join(sorted(service.interventions))})", field="intervention")
        variant = service.interventions[intervention]
    reps = repetitions or (spec.repetitions if spec else 3)
    if reps < 1:
        raise ContractError("repetitions must be at least 1", field="repetitions")
    start = None
    if start_level is not None:  # the level nearest the prediction
        key, ordered_keys = states.order_key(dimension, states.parse_level(dimension, start_level)), sorted(keys)
        start = min(range(len(ordered_keys)), key=lambda i: abs(ordered_keys[i] - key))
    return Plan(contract, dimension, ordered, State.of(base), reps, intervention, variant, start,
                spec.max_retries if spec else 2, getattr(service, "baseline", "fp32"))


@dataclass
class Result:
    """What a sprint found (the summary, the JSON output and the chain record are built from it)."""

    sprint_id: str
    plan: Plan
    trials: list[Trial] = field(default_factory=list)
    boundary: Boundary | None = None
    diagnosis: dict = field(default_factory=dict)
    recovery: list[Trial] = field(default_factory=list)
    requalified: Boundary | None = None
    frontier: dict = field(default_factory=dict)
    next_binding: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: The artifact each variant's trials loaded, by variant (its hash goes into the records).
    artifacts: dict = field(default_factory=dict)
    #: Why the sprint stopped for a contended host (the trial, what it saw), empty when it did not.
    contended: dict = field(default_factory=dict)
    #: The interleaved A/B of the minimum PASS and the adjacent FAIL level (when the FAIL was timing).
    ab: list[dict] = field(default_factory=list)

    @property
    def recovered(self) -> bool:
        return bool(self.recovery) and all(t.verdict == "PASS" for t in self.recovery)

    def binding(self) -> str | None:
        return self.diagnosis.get("binding")


#: Rounds of the interleaved A/B (minimum PASS level, then adjacent FAIL level) run when the
#: adjacent FAIL was a timing FAIL: a host that got slower fails the PASS level too.
AB_ROUNDS = 2


def contended_problem(trial: Trial, why: str = "") -> str:
    """The one-line reason a sprint stopped for its host (`host too contended to qualify (…)`)."""
    c = trial.telemetry.get("contention") or {}
    seen = [f"steal {c['steal_pct']:.1f} %" if isinstance(c.get("steal_pct"), (int, float)) else "",
            f"other tenants {c['cotenant_pct']:.1f} % of the trial's cores"
            if isinstance(c.get("cotenant_pct"), (int, float)) else ""]
    seen = ", ".join(x for x in seen if x) or "contention not measurable here"
    where = f"{trial.phase} trial {trial.index} at {trial.state.label()} [{trial.variant}]"
    return f"host too contended to qualify ({seen}): {why or where + f', {trial.attempts} attempt(s)'}"


class Sprint:
    """Runs a plan's trials; `record(trial)` is called after each one."""

    def __init__(self, plan: Plan, cache: Path, record: Callable[[Trial], None] | None = None,
                 progress: Callable[[str], None] | None = None, sprint_id: str | None = None):

        self.plan, self.cache = plan, Path(cache)
        self.service = for_contract(plan.contract)
        self._record = record or (lambda t: None)
        self._progress = progress or (lambda msg: None)
        self.result = Result(sprint_id or plan.new_id(), plan)
        self.service_spec: dict = {}

    def _trial(self, state: State, variant: str, phase: str) -> Trial:
        artifact = self.artifacts[variant]
        seed = int(hashlib.sha256(f"{self.result.sprint_id}/{len(self.result.trials)}".encode()).hexdigest()[:6], 16)
        self._progress(f"{phase}: {state.label()} [{variant}]")
        t = run_trial(self.plan.contract, state, artifact, variant, phase, seed=seed, max_retries=self.plan.max_retries,
                      service_spec=self.service_spec)
        t.index = len(self.result.trials)
        t.extra["artifact"] = str(artifact)  # its hash goes into an endpoint trial's provenance
        self.result.trials.append(t)
        self._record(t)
        self._progress(f"{phase}: {state.label()} [{variant}] -> {t.verdict}" + (f" ({t.cause})" if t.cause else ""))
        if t.cause == judge.CONTENDED:
            raise HostContended(t)
        return t

    def run(self) -> Result:
        """Every step of the sprint; a host that stays contended stops it (`Result.contended`)."""
        try:
            return self._run()
        except HostContended as stop:
            r = self.result
            r.contended = {"trial": stop.trial.index, "state": stop.trial.state.label(), "phase": stop.trial.phase,
                           "contention": stop.trial.telemetry.get("contention") or {}}
            r.problems.append(contended_problem(stop.trial, stop.why))
            return r

    def _run(self) -> Result:
        p, r = self.plan, self.result
        self._progress("preparing artifacts")
        self.artifacts = {p.baseline: self.service.prepare(p.baseline, self.cache)}
        if p.variant:
            self.artifacts[p.variant] = self.service.prepare(p.variant, self.cache)
        r.artifacts = dict(self.artifacts)
        self.service_spec = self.service.trial_spec(self.cache) if hasattr(self.service, "trial_spec") else {}
        r.boundary = search.find(len(p.levels), lambda i: self._trial(p.state(i), p.baseline, "boundary").verdict,
                                 p.repetitions, p.start)
        b = r.boundary
        if b.min_pass is None:
            r.problems.append("no level passes: the boundary lies above the highest level given")
            return r
        if b.adjacent_fail is None:
            r.problems.append("the lowest level passes: the boundary lies below the levels given")
            return r
        fail_verdicts = b.verdicts[b.adjacent_fail]
        if "FAIL" not in fail_verdicts:
            r.problems.append(f"the level below the minimum PASS is {fail_verdicts[-1]}, not FAIL")
        elif not self._confirm(b.min_pass, b.adjacent_fail):
            return r
        r.diagnosis = self._diagnose(b.adjacent_fail, p.baseline, "diagnosis")
        if not p.variant:
            return r
        fail_state = p.state(b.adjacent_fail)
        for _ in range(p.repetitions):
            t = self._trial(fail_state, p.variant, "intervention")
            r.recovery.append(t)
            if t.verdict != "PASS":
                break  # one non-PASS already means no reproducible recovery
        if not r.recovered:
            r.problems.append("the intervention did not recover PASS at the FAIL level")
            return r
        # Re-qualify with the intervention in place: its PASS at the FAIL level is known.
        upto = b.adjacent_fail + 1
        r.requalified = search.find(upto, lambda i: self._trial(p.state(i), p.variant, "requalify").verdict,
                                    1, None, known={b.adjacent_fail: "PASS"})
        q = r.requalified
        old, new = p.levels[b.min_pass], p.levels[q.min_pass]
        r.frontier = {"before": old, "after": new, "below_range": q.adjacent_fail is None and q.min_pass == 0}
        if p.dimension != "runtime":
            before, after = (states.base_value(p.dimension, x) for x in (old, new))
            r.frontier.update(saved=before - after, ratio=after / before,
                              unit=states.unit_kind(p.dimension, old),  # core, byte or token (a KV cache in tokens)
                              absolute_change=after - before, relative_change=(after - before) / before)
        if q.adjacent_fail is not None:
            r.next_binding = self._diagnose(q.adjacent_fail, p.variant, "next-binding", known_pass=q.min_pass)
        else:
            r.next_binding = {"binding": None, "note": "the intervention passes at every level given"}
        return r

    def _confirm(self, pass_index: int, fail_index: int) -> bool:
        """Interleaved A/B of the minimum PASS and the adjacent FAIL level, when a FAIL there had a
        cause a slower host can produce: the PASS level must still pass and the FAIL level still
        fail, round after round. A PASS level that fails too means the host got slower (a contended
        stop); a FAIL level that passes means the boundary does not reproduce (a problem). Either
        way no chain. A FAIL the state caused itself (oom, kv-capacity, quality) needs no A/B."""
        p, r = self.plan, self.result
        fails = [t for t in r.trials if t.phase == "boundary" and t.variant == p.baseline
                 and t.state == p.state(fail_index) and t.verdict == "FAIL"]
        if not any(judge.timing_only(t.cause) for t in fails):
            return True
        for round_ in range(1, AB_ROUNDS + 1):
            a = self._trial(p.state(pass_index), p.baseline, "boundary")
            b = self._trial(p.state(fail_index), p.baseline, "boundary")
            r.ab.append({"round": round_, "pass_level": a.verdict, "fail_level": b.verdict,
                         "trials": [a.index, b.index]})
            if a.verdict != "PASS":
                raise HostContended(a, f"the minimum PASS level {p.state(pass_index).label()} gave {a.verdict}"
                                       f"{f' ({a.cause})' if a.cause else ''} in round {round_} of an interleaved "
                                       "A/B with the level below: the host got slower, not the state")
            if b.verdict != "FAIL":
                r.problems.append(f"the adjacent FAIL level {p.state(fail_index).label()} gave {b.verdict} in round "
                                  f"{round_} of an interleaved A/B with the minimum PASS: the boundary does not "
                                  "reproduce on this host")
                return False
        return True

    def _diagnose(self, fail_index: int, variant: str, phase: str, known_pass: int | None = None) -> dict:
        """Restore each candidate dimension (every dimension of the FAIL state) alone to the most
        this host offers and run a trial there; the binding resources are the restorations that
        recover PASS. Restoring the crossed dimension is the minimum PASS state itself, already
        measured (its trials are the evidence). A dimension the runner cannot restore here (the
        service does not use it, the host offers no more of it) is recorded `not-tested`, with
        why, rather than left out. More than one recovering restoration: co-binding."""
        p, r = self.plan, self.result
        fail_state = p.state(fail_index)
        crossed_pass = known_pass if known_pass is not None else r.boundary.min_pass
        rows = [{"dimension": p.dimension, "restored_to": p.levels[crossed_pass], "verdict": "PASS",
                 "evidence": "the minimum PASS state's trials"}]
        for dim, level in fail_state.levels:
            if dim == p.dimension:
                continue
            why = self._unrestorable(dim, level)
            if why:
                rows.append({"dimension": dim, "restored_to": level, "verdict": "not-tested", "reason": why})
                continue
            t = self._trial(fail_state.with_level(dim, states.reference_level(dim)), variant, phase)
            rows.append({"dimension": dim, "restored_to": states.reference_level(dim), "verdict": t.verdict,
                         "trial": t.index, "cause": t.cause})
        recovering = [row["dimension"] for row in rows if row["verdict"] == "PASS"]
        fail_trials = [t for t in r.trials if t.state == fail_state and t.variant == variant]
        causes = sorted({t.cause for t in fail_trials if t.cause})
        # Restoring the crossed dimension always recovers (it is the minimum PASS state); when another
        # restoration recovers too, the boundary is co-bound: both are binding resources.
        return {"binding": p.dimension,
                "also_recovering": [d for d in recovering if d != p.dimension], "restorations": rows,
                "fail_causes": causes,
                "fail_telemetry": {k: fail_trials[-1].telemetry.get(k) for k in
                                   ("peak_rss_bytes", "runtime_footprint_bytes", "weight_bytes", "error", "phase")}
                if fail_trials else {}}

    def _unrestorable(self, dim: str, level: Level) -> str | None:
        """Why `dim` cannot be restored by this runner on this host (None when it can)."""
        service = self.plan.contract.service
        users = _SERVICE_DIMENSIONS.get(dim)
        if users is not None and service not in users:
            return f"the {service} service does not use {dim}: this runner cannot make it bind or recover"
        try:
            ref = states.reference_level(dim)
            if states.unit_kind(dim, ref) != states.unit_kind(dim, level):
                return f"the runner knows no host maximum of {dim} in {states.unit_kind(dim, level)}s"
            full = states.order_key(dim, ref) <= states.order_key(dim, level)
        except ConfigError as exc:
            return f"this host cannot provide more {dim}: {exc}"
        if full:
            return f"already at this host's full level ({states.describe(ref)}): nothing more to restore here"
        return None
