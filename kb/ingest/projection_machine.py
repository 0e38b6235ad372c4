"""Projection of a kernel result (an intervention's benchmark figures and the environment they ran
in) and of a machine record (one luma:MachineFigure per quantity, each with the record's evidence class)."""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest.projection_nodes import (
    TYPE, UNIT, VALUE, LedgerMeta, add_activity, add_environment, add_quantity, architecture_node,
    intervention_node, projects, record_node, workload_node,
)
from luma.kb.records import units
from luma.kb.records.dimensions import Dimension
from luma.kb.records.kernel_result import KernelResult
from luma.kb.records.machine import MachineRecord
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA


@projects("kernel-result")
def project_kernel_result(w: nq.QuadWriter, rec: KernelResult, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    r = ID + "result/" + meta.content_hash[:32]
    record_node(w, r, "KernelResult", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(r, LUMA + "workload", nq.iri(workload_node(w, rec.workload)))  # the same entity PEX chains name
    m = rec.method
    w.add(r, LUMA + "intervention", nq.iri(intervention_node(w, m.name, m.kind)))
    for prop, value in (("bits", m.bits), ("granularity", m.granularity), ("quantMode", m.mode),
                        ("gemmBackend", m.backend)):
        if value is not None:
            w.add(r, LUMA + prop, nq.integer(value) if isinstance(value, int) else nq.string(value))
    for j, obs in enumerate(rec.metrics):
        o = f"{r}/observation/{j}"
        w.add(r, LUMA + "observation", nq.iri(o))
        add_quantity(w.add, o, obs.metric, obs.value, obs.unit)
    w.add(r, LUMA + "repetitions", nq.integer(rec.repetitions))
    w.add(r, LUMA + "warmup", nq.integer(rec.warmup))
    w.add(r, LUMA + "artifact", nq.string(rec.artifact))
    for text in rec.limitations:
        w.add(r, LUMA + "limitation", nq.string(text))
    add_activity(w, r, rec.tool, rec.git_revision, None, rec.started)
    add_environment(w, r, rec.environment)


@projects("machine")
def project_machine(w: nq.QuadWriter, rec: MachineRecord, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    """Machine parameters: one node, one luma:MachineFigure per quantity (value in its canonical
    unit), each carrying the record's evidence class so a figure is never read without it."""
    m = ID + "machine/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    record_node(w, m, "MachineParameters", ec)
    w.add(m, LUMA + "machineName", nq.string(rec.name))
    w.add(m, LUMA + "architecture", nq.iri(architecture_node(w, rec.architecture)))
    w.add(m, LUMA + "deviceCount", nq.integer(rec.count))
    if rec.source is not None:
        w.add(m, LUMA + "sourceTitle", nq.string(rec.source.title))
        w.add(m, LUMA + "sourceUrl", nq.string(rec.source.url))
        if rec.source.retrieved:
            w.add(m, LUMA + "sourceRetrieved", nq.string(rec.source.retrieved.isoformat()))
    if rec.price is not None:
        w.add(m, LUMA + "pricePerHour", nq.double(rec.price.value))
        w.add(m, LUMA + "priceCurrency", nq.string(rec.price.currency))
    for text in rec.notes:
        w.add(m, LUMA + "note", nq.string(text))
    qualifiers = {"compute": "precision", "memory capacity": "memoryTier", "memory bandwidth": "memoryTier",
                  "interconnect bandwidth": "linkName", "interconnect latency": "linkName",
                  "interconnect links": "linkName"}
    for i, row in enumerate(rec.figures()):
        f = f"{m}/figure/{i}"
        section = row["section"]
        w.add(m, LUMA + "figure", nq.iri(f))
        w.add(f, TYPE, nq.iri(LUMA + "MachineFigure"))
        w.add(f, LUMA + "evidenceClass", ec)
        w.add(f, LUMA + "figureKind", nq.string(_FIGURE_KINDS.get(section, section.replace(" ", "_"))))
        if section in qualifiers:
            w.add(f, LUMA + qualifiers[section], nq.string(row["key"]))
        if row["dense"] is not None:
            w.add(f, LUMA + "dense", nq.boolean(row["dense"]))
        if row["cores"] is not None:
            w.add(f, LUMA + "cores", nq.integer(row["cores"]))
        if row["method"]:
            w.add(f, LUMA + "measurementMethod", nq.string(row["method"]))
        w.add(f, VALUE, nq.double(row["si"]))
        w.add(f, UNIT, nq.iri(units.unit_iri(row["si_unit"])))
    p = rec.provenance
    add_activity(w, m, p.tool, p.git_revision, p.host, p.started, p.environment)


_FIGURE_KINDS = {"compute": "compute_throughput", "power": "power_tdp"}
