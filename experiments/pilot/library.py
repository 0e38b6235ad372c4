"""The qualified-state library of a contract: the only states a pilot may apply.

A state enters when the ledger holds measured evidence that it serves the contract on this
machine, under the software running now:

* a sprint's pex-trial records (any phase but optimize) of the contract — same name and the same service
  clauses — at one (machine state, variant): at least `MIN_PASS` PASS trials and no FAIL or
  INCONCLUSIVE one; its settings are the contract's batch and the state's cores as threads;
* an optimize-result record's best configuration (already confirmed by two PASS trials), with its
  batch, threads and engine replicas.

Every record must be `measured`, signed by a runner key the ledger trusts and has not revoked,
of this host's architecture (CPU model), and not stale: its environment (Python, NumPy, torch,
CPU ISA) equals the one running now — a state measured under other software is evidence about
that software, not this service. Capacity is the lowest throughput of the state's PASS trials (a
closed loop at the contract's concurrency: the rate it served with every clause holding).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from luma.errors import NotPriced, StateError
from luma.experiments.sprint import stats
from luma.experiments.sprint.records import architecture, environment
from luma.experiments.sprint.states import State, describe, resolve
from luma.kb.records import units
from luma.kb.store.ledger import Ledger
from luma.experiments.pricing import Amount, state_cost
from luma.kb.records import pilot_decision
from luma.kb.records.pex_chain import Level
from luma.kb.trust.runners import trusted_keys

MIN_PASS = 2
#: The two record kinds a library reads.
TRIALS = "pex-trial"
OPTIMA = "optimize-result"
#: Environment keys that make a record stale when they differ from this host's now.
SOFTWARE_KEYS = ("python", "numpy", "torch", "cpu_model", "isa")


@dataclass
class LibraryState:
    """One qualified state: levels, software, measured capacity and economics."""

    key: str
    levels: dict[str, dict]  # record form: {"compute": {"value": 1, "unit": "core"}, ...}
    variant: str
    settings: dict[str, int]
    capacity: float  # accepted requests per second (lowest of its PASS trials)
    p95_latency: float | None  # seconds, highest of its trials
    quality: float | None
    trials: int
    sources: list[str] = field(default_factory=list)
    cost_per_hour: float | None = None
    currency: str | None = None
    cores: int = 1
    memory_bytes: float | None = None
    #: Every PASS trial's throughput (capacity is their lowest; their spread sets the margin).
    throughputs: list[float] = field(default_factory=list)

    def label(self) -> str:
        parts = [describe(Level.model_validate(self.levels[d])) for d in sorted(self.levels) if d != "runtime"]
        reps = self.settings.get("replicas", 1)
        return " · ".join(parts + [self.variant, *([f"{reps} replicas"] if reps > 1 else []),
                                   f"batch {self.settings.get('max_batch')}"])

    def record_state(self) -> dict:
        return {"key": self.key, "state": {"dimensions": self.levels}, "variant": self.variant,
                "settings": dict(self.settings)}

    def enforced(self) -> dict:
        return State.of(resolve(self.levels)).enforced()


def state_key(levels: dict, variant: str, settings: dict) -> str:
    """The stable key of a state (the record helper's, so records and library agree)."""
    return pilot_decision.state_key(levels, variant, settings)


def _software(rec: dict) -> dict:
    env = (rec.get("provenance") or {}).get("environment") or {}
    return {k: env.get(k) for k in SOFTWARE_KEYS}


def current_software() -> dict:
    env = environment()
    return {k: env.get(k) for k in SOFTWARE_KEYS}


def _p95(observations: list[dict]) -> float | None:
    for o in observations:
        if stats.quantile_of(o["metric"]) and o["metric"].endswith("latency") and "." not in o["metric"]:
            return units.normalise(o["value"], o["unit"])[0]
    return None


def _obs(observations: list[dict], metric: str) -> float | None:
    for o in observations:
        if o["metric"] == metric:
            return float(o["value"])
    return None


def build(project, contract, prices=None) -> tuple[list[LibraryState], list[str]]:
    """(the library, why records were left out: one line per refused optimize-result record,
    naming it, its state and the reason; then one line per reason trial records were left out,
    with its count)."""
    from collections import Counter

    wanted = contract.record_contract()
    arch = architecture()["name"]
    software = current_software()
    ledger = Ledger(project.db_url)
    try:
        if project.db_url.startswith("sqlite:///"):
            from pathlib import Path

            if not Path(project.db_url[len("sqlite:///"):]).is_file():
                return [], ["the project has no ledger yet: run `luma sprint run` / `luma sprint optimize` first"]
        keys = trusted_keys(ledger)
        rows = ledger.rows_of_kinds([TRIALS, OPTIMA], "kind", "content_hash", "payload")
    finally:
        ledger.dispose()
    skipped: Counter = Counter()
    refused: dict[str, str] = {}  # an optimize-result record's source -> why it is not in the library
    groups: dict[str, dict] = {}

    def refusal(rec: dict) -> str | None:
        """Why a record of this contract cannot qualify a state here (None: it can)."""
        if rec.get("evidence_class") != "measured":
            return f"not measured ({rec.get('evidence_class')})"
        att = rec.get("attestation") or {}
        k = keys.get(att.get("key"))
        if k is None or k.revoked:
            return "not signed by a trusted, unrevoked runner key"
        if rec["architecture"].get("name") != arch:
            return f"measured on another architecture than this host's ({arch})"
        if _software(rec) != software:
            changed = [f"{k} {_software(rec)[k]} then, {software[k]} now" for k in SOFTWARE_KEYS
                       if _software(rec)[k] != software[k]]
            return "stale: measured under other software (" + "; ".join(changed) + ")"
        return None

    for kind, digest, payload in rows:
        rec = json.loads(payload)
        if rec["contract"].get("name") != wanted["name"] or rec["contract"].get("clauses") != wanted["clauses"]:
            continue  # another contract: not counted as left out
        why = refusal(rec)
        if why is not None:
            if kind == OPTIMA:
                refused[_source(rec, digest)] = why
            else:
                skipped[why.split(" (", 1)[0] if why.startswith(("stale", "not measured")) else why] += 1
            continue
        if kind == TRIALS:
            if rec.get("phase") == "optimize":
                continue  # its configuration (batch, threads) is in the optimize-result record, not here
            levels = rec["state"]["dimensions"]
            cores = int(levels.get("compute", {}).get("value", 1))
            settings = {"max_batch": contract.load.max_batch, "threads": cores}
            key = state_key(levels, rec["variant"], settings)
            g = groups.setdefault(key, {"levels": levels, "variant": rec["variant"], "settings": settings, "trials": []})
            g["trials"].append((rec["verdict"], rec.get("observations", []), f"pex-trial {digest[:12]}"))
        else:
            best = rec.get("best")
            if not best:
                refused[_source(rec, digest)] = "no configuration was accepted twice: " + _best_miss(rec, contract)
                continue
            levels = rec["state"]["dimensions"]
            cores = int(levels.get("compute", {}).get("value", 1))
            chosen = best.get("settings", {})
            settings = {"max_batch": chosen.get("max_batch", contract.load.max_batch),
                        "threads": chosen.get("threads", cores)}
            if int(chosen.get("replicas", 1)) > 1:
                settings["replicas"] = int(chosen["replicas"])
            key = state_key(levels, best["variant"], settings)
            g = groups.setdefault(key, {"levels": levels, "variant": best["variant"], "settings": settings, "trials": []})
            g.setdefault("results", []).append(_source(rec, digest))
            for conf in rec["configurations"]:
                if conf["software"] == best:
                    for t in conf["trials"]:
                        g["trials"].append((t["verdict"], t.get("observations", []), f"optimize-result {digest[:12]}"))
    library = []
    for key, g in groups.items():
        verdicts = [v for v, _, _ in g["trials"]]
        why = None
        if verdicts.count("PASS") < MIN_PASS or any(v != "PASS" for v in verdicts):
            why = "states with fewer than two PASS trials, or a FAIL or INCONCLUSIVE one"
        rates = [_obs(o, "throughput") for _, o, _ in g["trials"]]
        if why is None and any(r is None for r in rates):
            why = "PASS trials without a throughput observation"
        if why is not None:
            skipped[why] += 1
            for src in g.get("results", []):
                refused.setdefault(src, "its best configuration, with every trial of its state, has fewer than two "
                                   "PASS trials or a FAIL or INCONCLUSIVE one" if why.startswith("states") else why)
            continue
        p95s = [p for _, o, _ in g["trials"] if (p := _p95(o)) is not None]
        quals = [q for _, o, _ in g["trials"] if (q := _obs(o, "quality")) is not None]
        s = LibraryState(key, g["levels"], g["variant"], g["settings"], min(rates), max(p95s) if p95s else None,
                         min(quals) if quals else None, len(verdicts), sorted({src for _, _, src in g["trials"]}))
        s.throughputs = [float(r) for r in rates]
        s.cores = int(g["levels"].get("compute", {}).get("value", 1))
        mem = g["levels"].get("host_memory")
        s.memory_bytes = units.normalise(mem["value"], mem["unit"])[0] if mem else None
        library.append(s)
    if prices is not None:
        price_all(library, prices)
    library.sort(key=lambda s: (s.cost_per_hour if s.cost_per_hour is not None else float("inf"), -s.capacity))
    return library, ([f"{src}: refused — {why}" for src, why in sorted(refused.items())]
                     + [f"{n} record(s) or state(s) left out: {why}" for why, n in sorted(skipped.items())])


def empty_library(name: str, contract_ref: str, notes: list[str], listed: bool = False) -> StateError:
    """The error of an empty library: what was refused (the notes' count; `listed`: the notes
    were printed above it) and what to run."""
    refused = sum(1 for n in notes if n.startswith("optimize-result "))
    why = (f"{refused} optimize result(s) refused, " + ("each with its reason above" if listed else
                                                       f"`luma pilot library {contract_ref}` says why") if refused else
           "; ".join(notes) if notes else "the ledger holds no measured trial or optimize result of it")
    return StateError(f"the qualified-state library of {name} is empty on this machine ({why}). Qualify states "
                      f"first with `luma sprint optimize {contract_ref} --state ...` (docs/pilot.md) or "
                      f"`luma sprint run {contract_ref}`.", field="library")


def _source(rec: dict, digest: str) -> str:
    """An optimize-result record as the library's explanation names it: hash and state."""
    dims = (rec.get("state") or {}).get("dimensions") or {}
    state = ", ".join(f"{d}={describe(Level.model_validate(v))}" for d, v in sorted(dims.items()) if d != "runtime")
    return f"optimize-result {digest[:12]} ({state})"


def _best_miss(rec: dict, contract) -> str:
    """Why an optimize search found no accepted configuration: its highest-throughput trial's
    verdict, cause and figures against the contract (a host-contended cause says so), and for a
    closed loop the least throughput at which its clients could meet a latency threshold."""
    tried = [(t, conf) for conf in rec.get("configurations", []) for t in conf.get("trials", [])]
    if not tried:
        return "it ran no trial"
    trial, conf = max(tried, key=lambda tc: _obs(tc[0].get("observations", []), "throughput") or 0.0)
    obs = trial.get("observations", [])
    sw = conf.get("software") or {}
    st = sw.get("settings") or {}
    layout = (f"{sw.get('variant', '?')}, batch {st.get('max_batch', '?')}"
              + (f", {st['threads']} thread(s)" if "threads" in st else "")
              + (f" x {st['replicas']} replicas" if st.get("replicas", 1) > 1 else ""))
    rate = _obs(obs, "throughput")
    parts = [f"its best try ({layout}) was {trial.get('verdict')}"
             + (f" ({trial['failure_cause']})" if trial.get("failure_cause") else "")
             + (f" at {rate:.1f} requests/s" if rate is not None else "")]
    p95, slo = _p95(obs), _latency_threshold(contract)
    if p95 is not None and slo is not None:
        parts.append(f"p95 {p95 * 1000:.0f} ms against {slo * 1000:.0f} ms")
    for o in obs:
        if "steal" in o["metric"] and "." not in o["metric"]:
            parts.append(f"{o['metric'].replace('_', ' ')} {o['value']:g} {o['unit']}".replace(" dimensionless", ""))
    load = rec.get("load") or {}
    if load.get("mode") == "closed" and slo is not None and load.get("concurrency"):
        # Little's law: N clients always waiting make the mean latency N / throughput, and the p95
        # is above the mean: below N / threshold requests/s no closed loop of N clients can pass.
        need = load["concurrency"] / slo
        parts.append(f"{load['concurrency']} closed-loop clients need at least {need:.0f} requests/s to wait "
                     f"{slo * 1000:.0f} ms on average (Little's law), more at the p95")
    return "; ".join(parts)


def _latency_threshold(contract) -> float | None:
    """The contract's lowest p-quantile latency threshold, in seconds (None: no such clause)."""
    ts = [contract.threshold(c) for c in contract.clauses
          if stats.quantile_of(c.metric) and c.metric.endswith("latency")]
    return min(ts) if ts else None


def price_all(library: list[LibraryState], prices) -> None:
    """Each state's cost per hour from the price table (ConfigError if it cannot be priced)."""
    for s in library:
        levels = {"compute": Amount(float(s.cores), "core")}
        if s.memory_bytes is not None:
            levels["host_memory"] = Amount(float(s.memory_bytes), "byte")
        try:
            got = state_cost(levels, prices)
        except NotPriced as exc:
            raise StateError(f"state {s.label()} cannot be priced: {exc}", source=prices.source) from None
        s.cost_per_hour, s.currency = got.per_hour, got.currency


def find(library: list[LibraryState], key: str) -> LibraryState:
    """The library state with `key`; ConfigError for a state outside the library (never applied)."""
    for s in library:
        if s.key == key:
            return s
    raise StateError(f"state {key!r} is not in the qualified-state library of this contract "
                      f"({', '.join(s.key for s in library) or 'empty'}); a pilot applies library states only",
                      field="state")
