"""Projection: a validated record (plus its ledger metadata) -> the quads of its named graph.

A pure function. Same record -> same IRIs -> same quads, which is what makes re-ingest a
no-op and `luma kb rebuild` exact. Shared entities (workload, architecture, contract, state,
intervention) get content- or name-derived IRIs so rules can join across records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from luma.kb import nquads as nq
from luma.kb import units
from luma.kb.dimensions import Dimension, record_dimensions
from luma.kb.records.pex_chain import Level, PexChain
from luma.kb.records.rdf_document import project_document
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA, PROV, QUDT, RDF, RDFS, record_graph, short_hash, slug

TYPE = RDF + "type"
LABEL = RDFS + "label"
VALUE = QUDT + "numericValue"
UNIT = QUDT + "unit"

ARCH_KINDS = {"cpu": "CPU", "gpu": "GPU", "accelerator": "Accelerator", "system": "System"}
INTERVENTION_KINDS = {"software": "Software", "hardware": "Hardware", "partner": "Partner"}
VERDICTS = {"PASS": "Pass", "FAIL": "Fail", "INCONCLUSIVE": "Inconclusive"}


@dataclass(frozen=True)
class LedgerMeta:
    """What the ledger adds to a record: who submitted it and when."""

    content_hash: str
    submitter: str
    ingested_at: datetime


def project(model, meta: LedgerMeta, dims: dict[str, Dimension] | None = None) -> nq.QuadWriter:
    """The triples of one record's named graph (`.data()` gives its N-Quads)."""
    projector = PROJECTORS[model.record_type]
    graph = record_graph(meta.content_hash)
    w = nq.QuadWriter(graph)
    w.add(graph, TYPE, nq.iri(LUMA + "SourceRecord"))
    w.add(graph, LUMA + "recordKind", nq.string(model.record_type))
    w.add(graph, LUMA + "contentHash", nq.string(meta.content_hash))
    w.add(graph, LUMA + "evidenceClass", nq.iri(EVIDENCE_CLASSES[model.evidence_class]))
    w.add(graph, PROV + "generatedAtTime", nq.datetime_(meta.ingested_at))
    w.add(graph, PROV + "wasAttributedTo", nq.iri(ID + "agent/" + slug(meta.submitter)))
    projector(w, model, meta, dims if dims is not None else record_dimensions())
    return w


def _pex_chain(w: nq.QuadWriter, rec: PexChain, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    c = ID + "chain/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    w.add(c, TYPE, nq.iri(LUMA + "BoundaryQualification"))
    w.add(c, LUMA + "evidenceClass", ec)

    wl = ID + "workload/" + slug(rec.workload.name)
    model = ID + "model/" + slug(rec.workload.model)
    w.add(c, LUMA + "workload", nq.iri(wl))
    w.add(wl, TYPE, nq.iri(LUMA + "Workload"))
    w.add(wl, LABEL, nq.string(rec.workload.name))
    w.add(wl, LUMA + "model", nq.iri(model))
    w.add(wl, LUMA + "task", nq.string(rec.workload.task))
    w.add(model, TYPE, nq.iri(LUMA + "Model"))
    w.add(model, LABEL, nq.string(rec.workload.model))

    arch = ID + "architecture/" + slug(rec.architecture.name)
    w.add(c, LUMA + "architecture", nq.iri(arch))
    w.add(arch, TYPE, nq.iri(LUMA + "Architecture"))
    w.add(arch, LABEL, nq.string(rec.architecture.name))
    w.add(arch, LUMA + "architectureKind", nq.iri(LUMA + ARCH_KINDS[rec.architecture.kind]))
    w.add(arch, LUMA + "vendor", nq.string(rec.architecture.vendor))

    contract = ID + "contract/" + short_hash(rec.contract.model_dump(mode="json"))
    w.add(c, LUMA + "contract", nq.iri(contract))
    w.add(contract, TYPE, nq.iri(LUMA + "ServiceContract"))
    w.add(contract, LABEL, nq.string(rec.contract.name))
    for i, clause in enumerate(rec.contract.clauses):
        cl = f"{contract}/clause/{i}"
        w.add(contract, LUMA + "clause", nq.iri(cl))
        _quantity(w, cl, clause.metric, clause.value, clause.unit)
        w.add(cl, LUMA + "operator", nq.string(clause.op))

    for prop, state in (("passState", rec.pass_state), ("failState", rec.fail_state)):
        s = ID + "state/" + short_hash(state.model_dump(mode="json"))
        w.add(c, LUMA + prop, nq.iri(s))
        w.add(s, TYPE, nq.iri(LUMA + "MachineState"))
        for key, level in sorted(state.dimensions.items()):
            _level(w, s, dims[key], level)

    w.add(c, LUMA + "crossedDimension", nq.iri(dims[rec.crossed_dimension].iri))
    w.add(c, LUMA + "bindingResource", nq.iri(dims[rec.binding_resource].iri))
    iv = ID + "intervention/" + slug(rec.intervention.name)
    w.add(c, LUMA + "intervention", nq.iri(iv))
    w.add(iv, TYPE, nq.iri(LUMA + "Intervention"))
    w.add(iv, LABEL, nq.string(rec.intervention.name))
    w.add(iv, LUMA + "interventionKind", nq.iri(LUMA + INTERVENTION_KINDS[rec.intervention.kind]))
    w.add(c, LUMA + "recovered", nq.boolean(rec.recovered))
    w.add(c, LUMA + "repetitions", nq.integer(rec.repetitions))

    for i, trial in enumerate(rec.trials):
        t = f"{c}/trial/{i}"
        w.add(c, LUMA + "trial", nq.iri(t))
        w.add(t, TYPE, nq.iri(LUMA + "Trial"))
        w.add(t, LUMA + "trialState", nq.string(trial.state))
        w.add(t, LUMA + "repetitionIndex", nq.integer(trial.repetition))
        w.add(t, LUMA + "verdict", nq.iri(LUMA + VERDICTS[trial.verdict]))
        if trial.failure_cause:
            w.add(t, LUMA + "failureCause", nq.string(trial.failure_cause))
        for j, obs in enumerate(trial.observations):
            o = f"{t}/observation/{j}"
            w.add(t, LUMA + "observation", nq.iri(o))
            _quantity(w, o, obs.metric, obs.value, obs.unit)

    if rec.provenance is not None:
        p = rec.provenance
        act = f"{c}/activity"
        w.add(c, PROV + "wasGeneratedBy", nq.iri(act))
        w.add(act, TYPE, nq.iri(PROV + "Activity"))
        w.add(act, LUMA + "tool", nq.string(p.tool))
        if p.git_revision:
            w.add(act, LUMA + "gitRevision", nq.string(p.git_revision))
        if p.host:
            w.add(act, LUMA + "host", nq.string(p.host))
        if p.started:
            w.add(act, PROV + "startedAtTime", nq.datetime_(p.started))


def _quantity(w: nq.QuadWriter, node: str, metric: str, value: float, unit: str) -> None:
    normalised, canonical = units.normalise(float(value), unit)
    w.add(node, LUMA + "metric", nq.string(metric))
    w.add(node, VALUE, nq.double(normalised))
    w.add(node, UNIT, nq.iri(units.unit_iri(canonical)))


def _level(w: nq.QuadWriter, state: str, dim: Dimension, level: Level) -> None:
    node = f"{state}/level/{dim.key}"
    w.add(state, LUMA + "level", nq.iri(node))
    w.add(node, LUMA + "dimension", nq.iri(dim.iri))
    if dim.categorical:
        w.add(node, LUMA + "category", nq.string(str(level.value)))
        return
    normalised, canonical = units.normalise(float(level.value), level.unit)
    w.add(node, VALUE, nq.double(normalised))
    w.add(node, UNIT, nq.iri(units.unit_iri(canonical)))


PROJECTORS: dict[str, Callable] = {"pex-chain": _pex_chain, "rdf-document": project_document}
