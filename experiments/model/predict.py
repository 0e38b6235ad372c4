"""`predict`: the model's verdict for one machine state — PASS/FAIL per contract clause, the
predicted figures behind each, and the binding (or, for a PASS, the tightest) resource."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from luma.experiments.model import judge as judge_mod
from luma.experiments.model import llm_calibrate, llm_error
from luma.experiments.model.evaluate import Evaluator, figures_row
from luma.experiments.model.space import Space

_UNITS = {"memory": "B", "kv_cache": "sequences", "quality": "", "throughput": "1/s", "token_throughput": "token/s"}


@dataclass
class Prediction:
    """What the model predicts for one state (evidence class `simulated` on this host, `projected`
    on hardware it has not measured). It never qualifies a boundary: PEX does."""

    contract: str
    state: dict[str, str]
    verdict: str  # PASS | FAIL | UNKNOWN (a clause the model cannot judge, e.g. undeclared quality)
    clauses: list[dict]
    binding: str | None  # the resource that fails first (None for a PASS)
    tightest: str  # the resource that would bind first
    figures: dict
    evidence_class: str
    calibrated: bool
    errors: dict = field(default_factory=dict)  # the model's calibrated relative error per metric
    notes: list[str] = field(default_factory=list)
    #: LLM projections: the error per metric on held-out published measurements (n, median, p90,
    #: max, bias) -- `errors` holds the p90 the verdict margins are widened by
    error_detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def predict(contract, state: Space, calibration: dict | None = None, effects=None) -> Prediction:
    """The prediction for the single state `state` (a space of one point, see space.from_state);
    `effects`: a partner intervention applied (effects.Effects)."""
    ev = Evaluator(contract, state, calibration, effects)
    m, cost = ev.evaluate(np.zeros(1, dtype=np.int64))
    j = ev.judge(m)
    bands = {k: float(np.broadcast_to(v, (1,))[0]) for k, v in (m.get("band") or {}).items()}
    rows, unknown = [], False
    for k, ch in enumerate(j.checks):
        v = float(j.values[k][0])
        mg = float(j.margins[k][0])
        if math.isnan(mg):
            verdict, unknown = "UNKNOWN", True
        else:
            verdict = "PASS" if (mg > 0 if ch.op in ("<", ">") else mg >= 0) else "FAIL"
        threshold = ch.threshold
        if ch.name == "memory":
            threshold = float(np.broadcast_to(m["memory_capacity"], (1,))[0])
        elif ch.name == "kv_cache":
            threshold = 1.0
        rows.append({"check": ch.name, "op": ch.op, "predicted": v, "threshold": threshold,
                     "unit": _UNITS.get(ch.name, _UNITS.get(ch.kind, "s")), "margin": mg, "verdict": verdict,
                     "resource": judge_mod.RESOURCES[int(j.codes[k][0])],
                     "band": bands.get(ch.kind)})
    passed = bool(j.passed[0])
    fig = figures_row(m)
    fig["cost"] = float(cost[0])
    notes = []
    axes = state.axes
    if state.is_llm and "tp" in axes and "accelerator_count" in axes and "replicas" not in axes:
        reps = float(np.broadcast_to(m.get("replicas", 1.0), (1,))[0])
        if reps > 1:
            notes.append(f"{axes['accelerator_count'].labels[0]} devices at tp {axes['tp'].labels[0]}: served as {reps:g} "
                         "replicas (replicas x tp x pp = devices; the load is split between them)")
    if not bool(np.broadcast_to(m["supported"], (1,))[0]):
        notes.append("the machine cannot run this state (no figure for the precision, or replicas x tp x pp != count)")
    detail = {}
    if state.is_llm:
        notes.append("projected: " + llm_calibrate.basis(ev.llm_cal))
        notes.append(llm_calibrate.summary_line(ev.llm_cal))
        if ev.overridden:
            notes.append(f"the space's [efficiency] sets {', '.join(ev.overridden)}: the stated error was measured "
                         "with the fitted figures, not these")
        detail = dict(ev.llm_cal.get("errors", {}).get("held-out", {}))
        notes += _band_notes(ev, state)
    elif not _calibrated(ev):
        notes.append("uncalibrated: default efficiency figures (run `luma model calibrate`)")
    verdict = "PASS" if passed else ("UNKNOWN" if unknown and rows[0]["verdict"] == "PASS" and
                                     all(r["verdict"] != "FAIL" for r in rows) else "FAIL")
    resource = j.resource(0)
    return Prediction(contract.name, ev.label(0), verdict, rows, None if passed else resource, resource, fig,
                      ev.evidence_class, _calibrated(ev), bands or dict(ev.errors), notes, detail)


def _band_notes(ev: Evaluator, state: Space) -> list[str]:
    """How the state's error bands were chosen, and why one is wider than its class's."""
    cal = ev.llm_cal
    if not cal.get("bands") or ev.overridden:
        return []
    out = ["error band: " + cal.get("band_rule", "leave-one-source-out bound per metric and setting class")]
    engines = [e for e in ev.engines if llm_error.unknown(cal, e, None)[0]]
    if engines:
        named = [e for e in engines if e]
        out.append(("engine " + ", ".join(named) + " has no calibration records: engine-neutral figures" if named else
                    "no engine named (engine=vllm|tensorrt-llm|sglang|lmdeploy|tgi|llama.cpp): engine-neutral "
                    "figures") + ", the band widened to the leave-one-engine-out bound")
    machines = [m.name for m in ev.accels if llm_error.unknown(cal, None, m.name)[1]]
    if machines:
        out.append(f"no calibration records on {', '.join(machines)}: the band widened to the leave-one-machine-out "
                   "bound")
    return out


def _calibrated(ev: Evaluator) -> bool:
    """Services: fitted on this host; LLMs: fitted on published measurements, unless the space
    overrides the fitted efficiencies."""
    return not ev.overridden if ev.space.is_llm else ev.params.calibrated
