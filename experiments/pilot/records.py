"""Pilot decisions as evidence: one signed, measured `pilot-decision` record per finished
decision (kb/records/pilot_decision.py), written whole (tmp + rename) and ingested at once, so a
kill leaves either the whole record or none. The same decision always makes the same bytes (its
figures come from the journal), so a resumed run that decides again re-ingests nothing new."""

from __future__ import annotations

import json
import math
from pathlib import Path

from luma.experiments.pilot.controller import write_atomic
from luma.experiments.pilot.window import ratio_ci
from luma.experiments.sprint.records import architecture, provenance
from luma.experiments.services import get
from luma.kb.records.judge import sequential
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.kb.operations.runner_keys import project_signer

TOOL = "luma pilot"


def _fig(metric: str, value, unit: str, cls: str, ci=None, source: str | None = None) -> dict | None:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    out = {"metric": metric, "value": float(value), "unit": unit, "evidence_class": cls}
    if ci and all(isinstance(c, (int, float)) and math.isfinite(c) for c in ci) and ci[0] <= value <= ci[1]:
        out["ci_low"], out["ci_high"] = float(ci[0]), float(ci[1])
    if source:
        out["source"] = source[:300]
    return out


def _realized(ctx, windows: list[dict], seed: int) -> list[dict]:
    out = []
    cost = ratio_ci([w["cost"] for w in windows], [w["accepted"] for w in windows], seed=seed)
    energy = ratio_ci([w["energy_j"] for w in windows], [w["accepted"] for w in windows], seed=seed + 1)
    if cost:
        out.append(_fig("cost_per_accepted", cost["value"], f"{ctx.currency}/request", "projected",
                        (cost["ci_low"], cost["ci_high"]), "measured serving time x " + ctx.prices.title))
    if energy:
        out.append(_fig("energy_per_accepted", energy["value"], "J/request", ctx.energy_class,
                        (energy["ci_low"], energy["ci_high"]), ctx.energy_how))
    return [f for f in out if f]


def _trial(ctx, w: dict) -> dict:
    obs = [{"metric": "completed_requests", "value": w["completed"], "unit": "request"},
           {"metric": "error_rate", "value": w["error_rate"], "unit": "dimensionless"}]
    for row in w.get("clauses", []):
        if "ci_low" in row:
            obs += [{"metric": row["metric"], "value": row["value"], "unit": "s"},
                    {"metric": row["metric"] + ".ci_low", "value": row["ci_low"], "unit": "s"},
                    {"metric": row["metric"] + ".ci_high", "value": row["ci_high"], "unit": "s"},
                    {"metric": row["metric"] + ".samples", "value": row["samples"], "unit": "request"}]
        elif row["metric"] == "quality" and row.get("value") is not None:
            obs.append({"metric": "quality", "value": row["value"], "unit": "dimensionless"})
    out = {"verdict": w["verdict"], "observations": obs}
    if w["verdict"] == "FAIL":
        out["failure_cause"] = "slo-miss" if w.get("errors", 0) == 0 else "error"
    return out


def decision_record(ctx, pending, outcome: str, window_index: int, windows: list[dict]) -> dict:
    """The pilot-decision record of one finished decision."""
    before = [w for w in windows if w["index"] <= pending.decided_window][-3:]
    cur = ctx.currency
    o, p = pending.observed, pending.prediction
    observed = [_fig("rate", o.get("rate_observed"), "1/s", "measured"),
                _fig("p95_latency", o.get("p95_latency"), "s", "measured"),
                _fig("error_rate", o.get("error_rate"), "dimensionless", "measured"),
                _fig("cost_per_accepted", o.get("cost_per_accepted"), f"{cur}/request", "projected"),
                _fig("energy_per_accepted", o.get("energy_per_accepted"), "J/request", ctx.energy_class)]
    predicted = [_fig("rate", p.get("rate"), "1/s", "projected"),
                 _fig("capacity", p.get("capacity"), "1/s", "projected"),
                 _fig("p95_latency", p.get("p95_latency"), "s", "projected"),
                 _fig("cost_per_accepted", p.get("cost_per_accepted"), f"{cur}/request", "projected")]
    verdicts = [w["verdict"] for w in pending.windows]
    doc = {
        "record_type": "pilot-decision", "evidence_class": "measured", "pilot": ctx.run_id,
        "sequence": ctx.decision_seq(), "window": {"start_s": pending.decided_window * ctx.window_s,
                                                    "end_s": (window_index + 1) * ctx.window_s},
        "action": pending.action, "workload": get(ctx.contract.service).workload(), "architecture": architecture(),
        "contract": ctx.record_contract, "candidate": ctx.library_state(pending.to_key).record_state(),
        "observed": [f for f in observed if f],
        "prediction": {"verdict": p["verdict"], "margin": p["margin"] if p.get("margin") is not None else (ctx.guard.margin or 0.0), "figures": [f for f in predicted if f]},
        "verification": {"verdict": sequential(verdicts), "windows": len(pending.windows),
                         "trials": [_trial(ctx, w) for w in pending.windows]},
        "realized": {"before": _realized(ctx, before, 0), "after": _realized(ctx, pending.windows, 2)},
        "outcome": outcome, "reason": pending.reason[:300], "provenance": provenance(ctx.started),
    }
    if pending.from_key:
        doc["from_state"] = ctx.library_state(pending.from_key).record_state()
    doc["provenance"]["tool"] = TOOL
    return doc


class DecisionWriter:
    """Signs, writes and ingests decision records (`record=False`: writes unsigned files only)."""

    def __init__(self, project, folder: Path, record: bool = True):
        self.project, self.folder, self.record = project, folder, record
        self.hashes: list[str] = []

    def __call__(self, doc: dict) -> str | None:
        signer = project_signer(self.project, create=self.record)
        if signer is not None:
            doc = signer.sign(doc, f"{doc['pilot']}: pilot-decision")
        path = self.folder / f"decision-{doc['sequence']:03d}.json"
        write_atomic(path, doc)
        if not self.record:
            return None
        with KnowledgeBase.open(self.project) as kb:
            kb.ingest([path], submitter=TOOL)
        digest = validate_document(json.loads(path.read_text()), str(path), self.project.home).content_hash
        self.hashes.append(digest)
        return digest
