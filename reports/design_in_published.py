"""The Design-In Report's section on published third-party results: the MLPerf Inference results
`luma import mlperf-results` brought in, listed apart from measured evidence (they are
vendor-claim: published and audited, never measured here), with the model's leave-one-submitter-
out error on them when `luma model calibrate --mlperf` has run."""

from __future__ import annotations

import json

from luma.experiments.imports.mlperf_records import SOURCE_TOOL
from luma.experiments.model import mlperf_calibrate
from luma.kb.records.pex_trial import PexTrial
from luma.kb.store.ledger_read import payloads_of_kind
from luma.reports.md_escape import fmt, record
from luma.reports.render import Section, Table

TITLE = "Published third-party results (vendor-claim)"


def rows(settings) -> list[dict]:
    """The imported MLPerf results in the ledger, one row each (the latest copy of a citation)."""
    out = {}
    for _, payload in payloads_of_kind(settings, "pex-trial"):
        t = PexTrial.model_validate_json(payload)
        src = t.provenance.source
        if src is None or src.tool != SOURCE_TOOL:
            continue
        dims = t.state.dimensions
        thr = [c for c in t.contract.clauses if c.metric.endswith("throughput")][-1]
        bounds = [f"{c.metric} {c.op} {c.value:g} {c.unit}" for c in t.contract.clauses
                  if not c.metric.endswith("throughput")]
        parts = [p.strip() for p in (src.citation or "").split(",")]
        out[src.citation] = {
            "system": ", ".join(parts[1:-3]) or t.architecture.name, "submitter": parts[0] if parts else "?",
            "accelerator": str(dims["accelerator_type"].value) if "accelerator_type" in dims else t.architecture.name,
            "count": int(dims["accelerator_count"].value) if "accelerator_count" in dims else 0,
            "benchmark": t.workload.name, "scenario": parts[-2] if len(parts) >= 2 else "?",
            "throughput": f"{thr.value:,.6g} {thr.unit}", "bounds": "; ".join(bounds) or "none (Offline)",
            "round": src.version or "?"}
    return sorted(out.values(), key=lambda r: (r["benchmark"], r["scenario"], r["submitter"], r["system"]))


def section(settings, limit: int) -> Section:
    """The section; empty ("none in this KB") when nothing was imported."""
    sec = Section("published-results", TITLE, empty="None in this KB (`luma import mlperf-results PATH` brings "
                                                     "them in).")
    found = rows(settings)
    if not found:
        return sec
    sec.paragraphs.append(
        f"{len(found)} published MLPerf Inference results: what each system's submitter states it serves at its "
        "state within the benchmark's latency bounds. They are vendor-claim — published and audited by MLCommons, "
        "not measured by LUMA, no per-request samples — so they never qualify a boundary and never count as "
        "measured evidence above; they show where other machines stand.")
    shown = found[:limit]
    sec.blocks.append(Table(
        "table-published-results", ["system", "accelerator", "count", "benchmark", "scenario", "throughput",
                                    "latency bounds", "round", "submitter"],
        [[record(r["system"]), record(r["accelerator"]), str(r["count"]), record(r["benchmark"]),
          record(r["scenario"]), record(r["throughput"]), record(r["bounds"]), record(r["round"]),
          record(r["submitter"])] for r in shown],
        "Published MLPerf Inference results (vendor-claim)",
        note=f"{len(found) - len(shown)} more not shown." if len(found) > len(shown) else ""))
    cal = settings.home / mlperf_calibrate.FILE
    if cal.is_file():
        sec.paragraphs.append(fmt("The LLM serving model on them (projected; `luma model calibrate --mlperf`): {}.",
                                  record(mlperf_calibrate.summary_line(json.loads(cal.read_text())))))
    return sec
