"""The pex-chain record of a boundary found among trial records (experiments/chains/boundary.py):
what a sprint's `chain_record` writes from the same trials, each trial citing its record by content
hash, with its observations (what reports show), and the restorations as the diagnosis."""

from __future__ import annotations

import json

from luma.experiments.chains.boundary import Boundary
from luma.experiments.chains.selection import TrialRecord
from luma.experiments.sprint.records import chain_repetitions

TOOL = "luma chain assemble"


def chain_document(b: Boundary) -> dict:
    """The pex-chain record (unsigned) of a complete boundary `b`."""
    first = b.pass_trials[0].model
    rows, counts = [], {}
    cited = b.pass_trials + b.fail_trials + b.recovered_trials + [t for *_, ts in b.restorations for t in ts]
    for role, group in (("pass", b.pass_trials), ("fail", b.fail_trials), ("recovered", b.recovered_trials)):
        for t in group:
            counts[role] = counts.get(role, 0) + 1
            rows.append(_row(t, role, counts[role]))
    recovered = all(t.model.verdict == "PASS" for t in b.recovered_trials)
    doc = {
        "record_type": "pex-chain", "evidence_class": first.evidence_class,
        "workload": first.workload.model_dump(exclude_none=True),
        "architecture": first.architecture.model_dump(exclude_none=True),
        "contract": first.contract.model_dump(exclude_none=True),
        "pass_state": first.state.model_dump(exclude_none=True),
        "fail_state": b.fail_trials[0].model.state.model_dump(exclude_none=True),
        "crossed_dimension": b.dimension, "binding_resource": b.dimension,
        "intervention": {"name": b.intervention, "kind": "software"}, "recovered": recovered,
        "repetitions": chain_repetitions(counts["pass"], counts.get("recovered", 0), recovered),
        "trials": rows, "provenance": _provenance([t.model for t in cited]),
    }
    if b.restorations:
        # The sprint's diagnosis: restoring the crossed dimension is the minimum PASS state itself
        # (its trials are the evidence); every other restoration that PASSes co-binds.
        pass_level = first.state.dimensions[b.dimension].model_dump(exclude_none=True)
        table = [{"dimension": b.dimension, "restored_level": pass_level, "verdict": "PASS"}]
        for dim, level, group in b.restorations:
            verdicts = {t.model.verdict for t in group}
            verdict = "FAIL" if "FAIL" in verdicts else "PASS" if verdicts == {"PASS"} else "INCONCLUSIVE"
            table.append({"dimension": dim, "restored_level": level.model_dump(exclude_none=True), "verdict": verdict,
                          "trials": [_row(t, "diagnosis", i) for i, t in enumerate(group, 1)]})
        doc["diagnosis"] = table
        doc["co_binding"] = [r["dimension"] for r in table[1:] if r["verdict"] == "PASS"]
    return doc


def _row(t: TrialRecord, role: str, repetition: int) -> dict:
    """A chain trial citing the record by hash, with its observations (what reports show)."""
    m = t.model
    row = {"state": role, "repetition": repetition, "verdict": m.verdict,
           "observations": [o.model_dump(exclude_none=True) for o in m.observations]}
    if m.failure_cause:
        row["failure_cause"] = m.failure_cause
    row["record"] = t.content_hash
    return row


def _provenance(models) -> dict:
    """This tool, with the host, environment and engine the cited trials share, and their first start."""
    prov = {"tool": TOOL}
    blocks = [m.provenance.model_dump(mode="json", exclude_none=True) for m in models]
    for part in ("host", "environment", "engine"):
        values = {json.dumps(b.get(part), sort_keys=True) for b in blocks}
        if len(values) == 1 and blocks[0].get(part) is not None:
            prov[part] = blocks[0][part]
    starts = [m.provenance.started for m in models if m.provenance.started is not None]
    if starts:
        prov["started"] = min(starts).isoformat()
    return prov
