"""`luma partner evaluate`: does a partner's intervention move the accepted-service frontier
*after its own costs*? The analytical model, projected: the contract on the baseline machine
and on the same machine with the intervention applied (effects.py: capacity and bandwidth
effects net of metadata and memory-management overhead, encode time, added decode latency,
codec power, buffering).

For each side:

* the **minimum machine state**: the cheapest PASS over accelerator counts (simulate's frontier
  over the given state with its accelerator_count swept), with its adjacent FAIL one count down;
* the **maximum concurrency** that passes at the given state, and the resource that binds at the
  next concurrency level (what becomes binding next);
* the memory per device the state needs with every sequence's KV resident, and the memory tier
  that takes: HBM when it fits, HBM plus a lower tier (host or CXL) for the excess;
* cost (per hour, per accepted request, per accepted token) and energy (per request, per token)
  at the minimum PASS state.

Verdict **gain** when the intervention's minimum PASS state costs less, or more concurrency
passes at the given state without a dearer minimum state; **no gain** otherwise. Everything is
**projected** evidence; the frozen experiment matrix (both configurations' candidate boundary
states and adjacent FAILs, the contract's clauses, repetitions) is what a PEX sprint runs to
prove it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np

from luma.errors import ContractError, StateError
from luma.experiments.model import effects as effects_mod
from luma.experiments.model import llm_calibrate, simulate, space
from luma.experiments.model.evaluate import Evaluator
from luma.experiments.model.predict import Prediction, predict

#: Accelerator counts tried when the space file has no accelerator_count axis.
COUNTS = (1, 2, 4, 8, 16)
#: Concurrency levels tried for the maximum that passes (with the state's own level).
CONCURRENCY = tuple(2**k for k in range(13))


@dataclass
class Side:
    """One configuration (baseline or intervention), predicted."""

    name: str
    at_state: dict  # verdict, binding/tightest, figures at the given state
    min_state: dict | None  # the cheapest PASS over accelerator counts (None: none passes)
    adjacent_fail: dict | None  # one count level down from min_state
    max_concurrency: int | None  # the highest concurrency level that passes at the given state
    next_fail_concurrency: int | None
    binds_next: str | None  # the binding resource at next_fail_concurrency
    accepted: dict  # cost and energy per accepted output at min_state


@dataclass
class Evaluation:
    record: dict
    contract: str
    model: str
    state: dict
    verdict: str  # gain | no gain
    reasons: list[str]
    baseline: Side
    intervention: Side
    changes: dict
    effects: dict
    matrix: dict
    cost_unit: str
    evidence_class: str = "projected"
    cost_source: str = ""  # where the prices come from (a space's cost_source: "illustrative ...")
    notes: list[str] = field(default_factory=list)
    #: the model's error on held-out published measurements (llm_calibrate): per metric n,
    #: median, p90, max, bias, and where the engine figures come from
    model_error: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return _clean(asdict(self))


def _clean(x):
    """JSON-safe: NaN/inf -> None, numpy scalars -> float."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _pred_row(p: Prediction) -> dict:
    f = p.figures
    keep = ("memory_need", "memory_min", "memory_capacity", "kv_bytes_per_token", "kv_per_device", "slots", "ttft",
            "tpot", "latency", "throughput", "token_throughput", "energy_per_request", "energy_per_token", "cost")
    clauses = [{k: r[k] for k in ("check", "predicted", "threshold", "margin", "verdict", "resource")} for r in p.clauses]
    margin = min((r["margin"] for r in p.clauses if not math.isnan(r["margin"])), default=float("nan"))
    return {"state": p.state, "verdict": p.verdict, "binding": p.binding, "tightest": p.tightest,
            "margin": margin, "figures": {k: f[k] for k in keep if k in f}, "clauses": clauses,
            "memory_tier": _tier(f)}


def _tier(f: dict) -> dict:
    """Where every sequence's KV would live: HBM when it fits, else HBM plus a lower tier."""
    need, cap = f.get("memory_need", float("nan")), f.get("memory_capacity", float("nan"))
    excess = max(need - cap, 0.0)
    return {"need_per_device": need, "hbm_per_device": cap,
            "tier": "hbm" if excess == 0 else "hbm + host/cxl", "excess_per_device": excess}


def _replace_axis(sp: space.Space, name: str, levels: list, drop=()) -> space.Space:
    axes = {k: v for k, v in sp.axes.items() if k not in drop}
    axes[name] = space.make_axis(name, levels, f"search.{name}")
    return dataclasses.replace(sp, axes=axes)


def _one(sp: space.Space, labels: dict) -> space.Space:
    """The single state `labels` of (a copy of) `sp`'s axes."""
    axes = {n: space.make_axis(n, [labels[n]], f"state.{n}") if n in labels else a for n, a in sp.axes.items()}
    return dataclasses.replace(sp, name="state", axes=axes)


def _side(name, contract, state, counts, conc, cal, eff, cost_unit) -> Side:
    at = predict(contract, state, cal, eff)
    # The cheapest PASS over accelerator counts, and its adjacent FAIL (simulate's frontier).
    search = _replace_axis(state, "accelerator_count", counts, drop=("tp",))
    out = simulate.explore(contract, search, cal, propose=50, effects=eff)
    row = out["frontier"][0] if out["frontier"] else {"state": None}
    min_state = adjacent = None
    if row.get("state") is not None:
        full = {**row["state"], **{k: v for k, v in (row.get("demand") or {}).items()}}
        min_state = _pred_row(predict(contract, _one(search, full), cal, eff))
        down = [p for p in out["proposals"] if p.get("pass_state") == row["state"] and
                "along accelerator_count" in p.get("reason", "")]
        if down:
            adjacent = _pred_row(predict(contract, _one(search, down[0]["state"]), cal, eff))
    # The highest concurrency that passes at the given state (levels from the bottom, in order).
    csp = _replace_axis(state, "concurrency", conc)
    ev = Evaluator(contract, csp, cal, eff)
    m, _ = ev.evaluate(np.arange(ev.size))
    j = ev.judge(m)
    levels = csp.axes["concurrency"].values
    max_c = next_c = binds = None
    for i, ok in enumerate(j.passed):
        if not ok:
            next_c, binds = int(levels[i]), j.resource(i)
            break
        max_c = int(levels[i])
    accepted = {}
    if min_state:
        f = min_state["figures"]
        accepted = {"cost_per_hour": f["cost"], "cost_unit": cost_unit,
                    "cost_per_request": f["cost"] / (f["throughput"] * 3600.0),
                    "cost_per_token": f["cost"] / (f["token_throughput"] * 3600.0),
                    "energy_per_request": f["energy_per_request"], "energy_per_token": f["energy_per_token"]}
    return Side(name, _pred_row(at), min_state, adjacent, max_c, next_c, binds, accepted)


def _count(row: dict | None) -> float | None:
    return float(row["state"]["accelerator_count"]) if row else None


def _delta(before, after) -> dict:
    d = {"before": before, "after": after}
    if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before:
        d["change"] = after / before - 1.0
    return d


def evaluate(record, contract, levels: Mapping[str, object] | None, *, llm_ref: str | None = None,
             base: space.Space | None = None, calibration: dict | None = None, source: str | None = None,
             repetitions: int | None = None, project=None) -> Evaluation:
    """Evaluate an InterventionParameters `record` against `contract` at one machine state,
    `levels` {dimension: level} (see space.from_state; `project`: the command's Settings)."""
    eff = effects_mod.from_record(record, source)
    state = space.from_state(levels, contract, llm_ref, base, project)
    if not state.is_llm:
        raise ContractError("a partner evaluation needs an LLM: name the model served (llm), or give a space with one",
                          field="llm")
    if "accelerator_type" not in state.axes:
        raise StateError("the state needs an accelerator_type (e.g. accelerator_type=NAME, accelerator_count=4)",
                          field="state.accelerator_type")
    ev0 = Evaluator(contract, state, calibration)
    cost_unit, cost_source = ev0.cost_unit, ev0.cost_source
    counts = ([str(int(v)) for v in base.axes["accelerator_count"].values] if base and "accelerator_count" in base.axes
              else [str(c) for c in COUNTS])
    count_now = state.axes.get("accelerator_count")
    if count_now is not None and count_now.labels[0] not in counts:
        counts.append(count_now.labels[0])
    c_now = int(state.axes["concurrency"].values[0]) if "concurrency" in state.axes else contract.load.concurrency
    conc = sorted({*CONCURRENCY, c_now})
    conc = [str(c) for c in conc]
    before = _side("baseline", contract, state, counts, conc, calibration, None, cost_unit)
    after = _side("intervention", contract, state, counts, conc, calibration, eff, cost_unit)

    b_cost = before.min_state["figures"]["cost"] if before.min_state else math.inf
    a_cost = after.min_state["figures"]["cost"] if after.min_state else math.inf
    reasons = []
    if a_cost < b_cost:
        reasons.append(f"the minimum PASS state costs less: {_num(b_cost)} -> {_num(a_cost)} {cost_unit}"
                       f" ({_count(before.min_state) or 'none'} -> {_count(after.min_state) or 'none'} accelerators)")
    more = (after.max_concurrency or 0) > (before.max_concurrency or 0)
    if more and a_cost <= b_cost:
        reasons.append(f"more concurrency passes at the given state: {before.max_concurrency or 0} -> "
                       f"{after.max_concurrency} (levels tried: {', '.join(conc)})")
    verdict = "gain" if reasons else "no gain"
    if not reasons:
        if a_cost > b_cost:
            reasons.append(f"after its own costs the minimum PASS state costs more: {_num(b_cost)} -> {_num(a_cost)}")
        else:
            reasons.append("after its own costs neither the minimum PASS state nor the concurrency that passes improves")
        if (after.max_concurrency or 0) < (before.max_concurrency or 0):
            reasons.append(f"less concurrency passes at the given state: {before.max_concurrency or 0} -> "
                           f"{after.max_concurrency or 0} (binding: {after.binds_next})")
    changes = {
        "min_state": _delta(before.min_state and before.min_state["state"], after.min_state and after.min_state["state"]),
        "accelerator_count": _delta(_count(before.min_state), _count(after.min_state)),
        "max_concurrency": _delta(before.max_concurrency, after.max_concurrency),
        "memory_tier": _delta(before.at_state["memory_tier"], after.at_state["memory_tier"]),
        "memory_need_per_device": _delta(before.at_state["memory_tier"]["need_per_device"],
                                         after.at_state["memory_tier"]["need_per_device"]),
        "binding": _delta(before.at_state["binding"] or before.at_state["tightest"],
                          after.at_state["binding"] or after.at_state["tightest"]),
        "binds_next": _delta(before.binds_next, after.binds_next),
    }
    for k in ("cost_per_hour", "cost_per_request", "cost_per_token", "energy_per_request", "energy_per_token"):
        changes[k] = _delta(before.accepted.get(k), after.accepted.get(k))
    rec = {"partner": record.partner, "name": record.name, "version": record.version,
           "evidence_class": record.evidence_class, "source": source}
    matrix = _matrix(contract, state, rec, eff, before, after, repetitions)
    notes = list(eff.notes)
    if "tp" in state.axes:
        notes.append("tp is left to follow the accelerator count while counts are swept")
    notes.append("projected from datasheet figures, engine figures fitted to published measurements and the "
                 "partner's stated figures; a PEX sprint on the matrix qualifies it")
    notes.append("model " + llm_calibrate.summary_line(ev0.llm_cal) + " (the partner's figures add their own error)")
    if ev0.overridden:
        notes.append(f"the space's [efficiency] sets {', '.join(ev0.overridden)}: the stated error was measured with "
                     "the fitted figures, not these")
    error = {"basis": llm_calibrate.basis(ev0.llm_cal), "held_out": ev0.llm_cal.get("errors", {}).get("held-out", {}),
             "p90": dict(ev0.errors)}
    return Evaluation(rec, contract.name, state.model.name, {n: a.labels[0] for n, a in state.axes.items()},
                      verdict, reasons, before, after, changes, eff.as_dict(), matrix, cost_unit, notes=notes,
                      cost_source=cost_source, model_error=error)


def _num(x: float) -> str:
    return "none" if not math.isfinite(x) else f"{x:.4g}"


def _matrix(contract, state, rec, eff, before: Side, after: Side, repetitions: int | None) -> dict:
    """The frozen experiment matrix a PEX sprint runs: both configurations' candidate boundary."""
    reps = repetitions or (contract.sprint.repetitions if contract.sprint else 3)

    def states(side: Side) -> list[dict]:
        out = []
        for role, row in (("candidate-pass", side.min_state), ("adjacent-fail", side.adjacent_fail)):
            if row:
                out.append({"role": role, "state": row["state"], "predicted": row["verdict"],
                            "margin": row["margin"], "binding": row["binding"] or row["tightest"]})
        base = {n: a.labels[0] for n, a in state.axes.items() if n != "concurrency"}
        if side.max_concurrency is not None:
            out.append({"role": "concurrency-pass", "state": {**base, "concurrency": str(side.max_concurrency)},
                        "predicted": "PASS"})
        if side.next_fail_concurrency is not None:
            out.append({"role": "concurrency-fail", "state": {**base, "concurrency": str(side.next_fail_concurrency)},
                        "predicted": "FAIL", "binding": side.binds_next})
        return out

    def boundary(side: Side) -> dict:
        return {"accelerator_count": {"pass": side.min_state and side.min_state["state"].get("accelerator_count"),
                                      "fail": side.adjacent_fail and side.adjacent_fail["state"].get("accelerator_count")},
                "concurrency": {"pass": side.max_concurrency, "fail": side.next_fail_concurrency}}

    tag = f"{rec['partner']}/{rec['name']}@{rec['version']}"
    body = {
        "kind": "pex-experiment-matrix", "frozen": True, "evidence_class": "projected",
        "contract": {"name": contract.name, **contract.record_contract(),
                     "load": contract.load.model_dump(exclude_none=True)},
        "accepted_service": [c.model_dump(exclude_none=True) for c in contract.clauses],
        "model": state.model.name, "dimension": "accelerator_count", "repetitions": reps,
        "configurations": [
            {"name": "baseline", "intervention": None, "states": states(before)},
            {"name": "intervention", "intervention": tag, "effects": eff.as_dict(), "states": states(after)},
        ],
        "candidate_boundary": {"baseline": boundary(before), "intervention": boundary(after)},
    }
    body = _clean(body)
    body["sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return body
