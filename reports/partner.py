"""The Partner Evaluation Report: what a partner states about its intervention, what the
analytical model projects it does to the accepted-service frontier after its own costs (minimum
machine state, concurrency, accelerator count, memory tier, cost and energy per accepted output,
the resource that binds next), and the frozen experiment matrix a PEX sprint runs to prove it.

Everything in it is **projected** (the model on datasheet and partner figures) or a **vendor
claim** (the partner's record); nothing is measured until the matrix has been run.
`build(evaluation, record)` takes `experiments.model.partner.evaluate(...).as_dict()` and the
InterventionParameters record.
"""

from __future__ import annotations

from luma.reports import partner_figures as figures
from luma.reports.fmt import num
from luma.reports.md_escape import fmt, record as literal
from luma.reports.plots import change_plot, require
from luma.reports.render import Plot, Report, Section, Table


def _cell(value, unit: str = "") -> str:
    """A number of the matrix tables (counts, thresholds in their clause's unit)."""
    if value is None:
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{num(float(value))} {unit}".strip()
    return str(value)


def _state(state: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (state or {}).items()) or "—"


def _quantity(q) -> str:
    if q is None:
        return "—"
    # A ratio stated in "1" reads better as a plain number.
    return num(float(q.value)) if q.unit.strip() in ("1", "", "dimensionless") else f"{num(float(q.value))} {q.unit}"


def _record_sections(record) -> list[Section]:
    facts = [["partner", literal(record.partner)],
             ["intervention", fmt("{} {} ({})", record.name, record.version, record.kind)],
             ["evidence class", record.evidence_class], ["integration point", literal(record.integration_point)],
             ["data classes", literal(", ".join(record.data_classes))],
             ["formats", literal(", ".join(record.formats)) if record.formats else "—"],
             ["access patterns", literal(", ".join(record.access_patterns)) if record.access_patterns else "—"]]
    for field in ("encode_throughput", "decode_throughput", "added_latency", "power", "silicon_area", "buffering",
                  "metadata_overhead", "memory_management_overhead"):
        facts.append([field.replace("_", " "), _quantity(getattr(record, field, None))])
    effects = [[literal(e.data_class), _quantity(e.compression_ratio), _quantity(e.capacity_effect),
                _quantity(e.bandwidth_effect), literal(e.conditions) if e.conditions else "—"]
               for e in record.effects]
    blocks = [Table("table-record", ["figure", "stated"], facts, "What the partner states (vendor claim)")]
    if effects:
        blocks.append(Table("table-record-effects", ["data class", "compression", "capacity effect",
                                                     "bandwidth effect", "conditions"], effects,
                            "Effects per data class, as stated"))
    limits = [fmt("Limitation: {}", x) for x in record.limitations]
    paragraphs = limits + [fmt("Licensing: {}", record.licensing) if record.licensing else "",
                           fmt("Evaluation boundary: {}", record.evaluation_boundary)
                           if record.evaluation_boundary else ""]
    return [Section("record", "The partner's record", [p for p in paragraphs if p], blocks)]


def _frontier_section(ev: dict) -> Section:
    labels, changes = figures.changes(ev)
    blocks: list = [Table("table-frontier", ["figure", "at", "baseline", "with the intervention", "change"],
                          figures.rows(ev),
                          f"Projected at {_state(ev['state'])} ({ev['model']}); each side's own minimum PASS "
                          f"state or the given state, as the second column says; {figures.prices_text(ev)}")]
    if labels:
        title = "Accepted-service figures after the intervention's costs"
        blocks.append(Plot("plot-frontier-change", change_plot("plot-frontier-change", title, labels, changes),
                           "Relative change of each figure with the intervention (its own costs included)"))
    blocks.append(Table("table-effects", ["model input", "value"], figures.input_rows(ev["effects"]),
                        "How the model applied the record (capacity after metadata and memory-management overhead, "
                        "added per-step latency, codec power, buffering), with units"))
    return Section("frontier", "Frontier change after the intervention's own costs",
                   [f"**Verdict: {ev['verdict']}.**", *ev["reasons"],
                    f"Rows marked *{figures.MIN_PASS}* compare each side at its own cheapest passing state; rows "
                    f"marked *{figures.GIVEN}* compare both at the state given ({_state(ev['state'])}). "
                    f"Prices: {ev.get('cost_source') or 'not stated'} ({ev['cost_unit']})."], blocks)


def _matrix_section(ev: dict) -> Section:
    m = ev["matrix"]
    rows = []
    for conf in m["configurations"]:
        for st in conf["states"]:
            rows.append([conf["name"], st["role"], _state(st["state"]), st.get("predicted", "—"),
                         st.get("binding") or "—"])
    clauses = [[c.get("metric", "—"), c.get("op", ""), _cell(c.get("value")), c.get("unit", "")]
               for c in m["accepted_service"]]
    b = m["candidate_boundary"]
    bound = [[name, _cell(side["accelerator_count"]["pass"]), _cell(side["accelerator_count"]["fail"]),
              _cell(side["concurrency"]["pass"]), _cell(side["concurrency"]["fail"])] for name, side in b.items()]
    return Section("matrix", "Qualification plan: the frozen experiment matrix",
                   [f"A PEX sprint runs these states, {m['repetitions']} repetitions each, under contract "
                    + fmt("`{}`", m['contract']['name']) + f"; matrix `{m['sha256'][:16]}` (sha256 of its JSON, "
                    "written beside this report as `matrix.json`). Only its measured verdicts can qualify the gain."],
                   [Table("table-matrix", ["configuration", "role", "state", "predicted", "binding"], rows,
                          "Baseline vs intervention configurations"),
                    Table("table-accepted-service", ["metric", "op", "value", "unit"], clauses,
                          "Accepted-service metrics (the contract's clauses)"),
                    Table("table-candidate-boundary", ["configuration", "accelerators PASS", "accelerators FAIL",
                                                       "concurrency PASS", "concurrency FAIL"], bound,
                          "Candidate boundary")])


def build(ev: dict, record) -> Report:
    """The report of one evaluation (`Evaluation.as_dict()`) of `record`."""
    require()
    rec = ev["record"]
    err = ev.get("model_error") or {}
    held = err.get("held_out") or {}
    error_rows = [[metric, str(e["n"]), f"{e['median']:.0%}", f"{e['p90']:.0%}", f"{e['max']:.0%}", f"{e['bias']:+.0%}"]
                  for metric, e in held.items()]
    evidence = Section("evidence", "Evidence", [
        "Every figure of the frontier and the matrix is **projected**: the analytical model run on datasheet "
        "figures, engine figures fitted to published measurements and the partner's stated figures. The record "
        f"itself is a **{rec['evidence_class']}**. Neither qualifies anything: run the matrix with `luma sprint run`.",
        *([f"The model's own error, measured on published measurements its fit did not use, is below "
           f"({err.get('basis', '')}); the partner's figures add theirs."] if held else []),
        *[f"Note: {n}" for n in ev["notes"]]],
        [Table("table-model-error", ["metric", "held-out n", "median", "p90", "max", "bias"], error_rows,
               "Model error on held-out published measurements (relative; bias: median signed, + = the model "
               "predicts more)")] if error_rows else [])
    return Report(
        "partner", f"Partner Evaluation Report — {rec['partner']}/{rec['name']} {rec['version']}",
        fmt("contract {} · {} · {}", ev['contract'], ev['model'], _state(ev['state'])),
        [("partner", literal(rec["partner"])), ("intervention", fmt("{} {}", rec['name'], rec['version'])),
         ("contract", literal(ev["contract"])), ("model", literal(ev["model"])), ("verdict", ev["verdict"]),
         ("evidence", "projected")],
        [*_record_sections(record), _frontier_section(ev), _matrix_section(ev), evidence],
        callout=f"Verdict: {ev['verdict']} — {ev['reasons'][0]}" if ev["reasons"] else f"Verdict: {ev['verdict']}",
        footer="Projected evidence; generated by luma report partner.")
