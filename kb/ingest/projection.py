"""Projection: a validated record (plus its ledger metadata) -> quads.

A pure function. Same record -> same IRIs -> same quads, which is what makes re-ingest a
no-op and `luma kb rebuild` exact. The record's own facts (the chain, its trials, the record
metadata) go to its named graph; shared entities (workload, architecture, contract, machine
state, intervention, submitter) get content-derived IRIs and are described in the shared
entities graph, so rules join across records without seeing one copy per record. A partner's
records are the exception: everything of one, entity descriptions included, goes to its
partner graph (kb/query/scope.py), so nothing of a partner is visible outside that partner's graphs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from luma.kb.ingest import nquads as nq
from luma.kb.records import units
from luma.kb.records.dimensions import Dimension, record_dimensions
from luma.kb.records.intervention_params import InterventionParameters, PartnerRetraction
from luma.kb.records.kernel_result import KernelResult
from luma.kb.records.machine import MachineRecord
from luma.kb.records.pex_trial import PexTrial
from luma.kb.records.pex_chain import Level, PexChain
from luma.kb.records.kinds import KINDS
from luma.kb.ingest.projection_outcomes import project_outcomes
from luma.kb.records.rdf_document import project_document  # noqa: F401 (a projector the kinds registry names)
from luma.kb.ingest.projection_model import project_experiment_matrix, project_model_prediction  # noqa: F401 (likewise)
from luma.kb.records.runner import RunnerRevocation, RunnerTrust
from luma.kb.query.scope import PARTNER_RECORD_TYPES, partner_graph
from luma.kb.vocab import (
    ENTITY_GRAPH,
    EVIDENCE_CLASSES,
    ID,
    LUMA,
    PROV,
    QUDT,
    RDF,
    RDFS,
    record_graph,
    short_hash,
    slug,
)

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


def project(
    model, meta: LedgerMeta, dims: dict[str, Dimension] | None = None, batch: nq.Batch | None = None
) -> nq.QuadWriter:
    """The triples of one record (`.data()` gives its N-Quads). Records projected with the same
    `batch` describe each shared entity once (the first record that mentions it does)."""
    projector = PROJECTORS[model.record_type]
    if model.record_type in PARTNER_RECORD_TYPES:
        # Entity descriptions too go to the partner's graph, and a fresh batch means the record
        # never leans on a description another record (public or another partner's) wrote.
        graph = partner_graph(model.partner, meta.content_hash)
        w = nq.QuadWriter(graph, graph, nq.Batch())
    else:
        graph = record_graph(meta.content_hash)
        w = nq.QuadWriter(graph, ENTITY_GRAPH, batch)
    agent = _agent(meta.submitter)
    w.add(graph, TYPE, nq.iri(LUMA + "SourceRecord"))
    w.add(graph, LUMA + "recordKind", nq.string(model.record_type))
    w.add(graph, LUMA + "contentHash", nq.string(meta.content_hash))
    w.add(graph, LUMA + "evidenceClass", nq.iri(EVIDENCE_CLASSES[model.evidence_class]))
    w.add(graph, PROV + "generatedAtTime", nq.datetime_(meta.ingested_at))
    w.add(graph, PROV + "wasAttributedTo", nq.iri(agent))
    if w.entity(agent, PROV + "Agent"):
        w.describe(agent, LABEL, nq.string(meta.submitter))
    signed = getattr(model, "attestation", None)
    if signed is not None:
        # The key that signed it (ingest checks the signature); rules join this with luma:Runner.
        w.add(graph, LUMA + "attestedBy", nq.iri(runner_iri(signed.key)))
    elif model.evidence_class == "measured":
        # Only a ledger written before runner keys holds such a record (ingest refuses them now):
        # it stays, says so, and never qualifies (the rules ask for luma:attestedBy).
        w.add(graph, LUMA + "unattested", nq.boolean(True))
    projector(w, model, meta, dims if dims is not None else record_dimensions())
    return w


def runner_iri(fingerprint: str) -> str:
    """A runner key's node: named by its fingerprint, so trust, revocation and every record it
    signed meet there."""
    return ID + "runner/" + fingerprint


@lru_cache(maxsize=1024)
def _agent(submitter: str) -> str:
    return ID + "agent/" + slug(submitter)


@lru_cache(maxsize=65536)
def _named(kind: str, name: str, *facts: str) -> str:
    """IRI of a named entity; the facts that define it are hashed in, so a name reused with
    different facts (another model, vendor, kind) is a different entity, not a conflict."""
    return f"{ID}{kind}/{slug(name)}-{short_hash(list(facts))[:8]}"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def record_node(w: nq.QuadWriter, node: str, cls: str, evidence: str) -> None:
    """A record's root node: its class (a name in the LUMA namespace), its evidence class (an IRI
    term) and an explicit link to its record graph, so that union-graph queries (and `luma kb
    explain`) keep its provenance."""
    w.add(node, TYPE, nq.iri(LUMA + cls))
    w.add(node, LUMA + "evidenceClass", evidence)
    w.add(node, PROV + "wasDerivedFrom", nq.iri(w.graph))


def _pex_chain(w: nq.QuadWriter, rec: PexChain, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    c = ID + "chain/" + meta.content_hash[:32]
    record_node(w, c, "BoundaryQualification", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))

    w.add(c, LUMA + "workload", nq.iri(_workload(w, rec.workload)))

    w.add(c, LUMA + "architecture", nq.iri(_architecture(w, rec.architecture)))
    w.add(c, LUMA + "contract", nq.iri(_contract(w, rec.contract)))

    crossed = rec.crossed_dimension
    for prop, state in (("pass", rec.pass_state), ("fail", rec.fail_state)):
        s, levels = _state(w, state, dims)
        w.add(c, LUMA + prop + "State", nq.iri(s))
        # The state's levels with the crossed dimension left out: equal for PASS and FAIL
        # exactly when the two states differ only in the crossed dimension (what the
        # qualification rule asks), as one comparison instead of a join over levels.
        rest = sorted(iri for key, iri in levels.items() if key != crossed)
        w.add(c, LUMA + prop + "Context", nq.string(_hash(" ".join(rest))))

    # The boundary itself, on the chain: the crossed dimension's PASS and FAIL levels (also in
    # the states), so boundary queries and rules read one triple instead of a join over levels.
    dim = dims[crossed]
    for prop, level in (("pass", rec.pass_state.dimensions[crossed]), ("fail", rec.fail_state.dimensions[crossed])):
        if dim.categorical:
            w.add(c, LUMA + prop + "Category", nq.string(str(level.value)))
        else:
            value, canonical = units.normalise(float(level.value), level.unit)
            w.add(c, LUMA + prop + "Level", nq.double(value))
            w.add(c, LUMA + prop + "Unit", nq.iri(units.unit_iri(canonical)))
    w.add(c, LUMA + "crossedDimension", nq.iri(dim.iri))
    w.add(c, LUMA + "bindingResource", nq.iri(dims[rec.binding_resource].iri))
    w.add(c, LUMA + "intervention", nq.iri(_intervention(w, rec.intervention.name, rec.intervention.kind)))
    if rec.software is not None:
        w.add(c, LUMA + "softwareConfig", nq.iri(software_config(w, rec.software)))
    if rec.intervention.software is not None:
        w.add(c, LUMA + "interventionSoftwareConfig", nq.iri(software_config(w, rec.intervention.software)))
    w.add(c, LUMA + "recovered", nq.boolean(rec.recovered))
    w.add(c, LUMA + "repetitions", nq.integer(rec.repetitions))
    for i, trial in enumerate(rec.trials):
        project_trial(w, c, f"{c}/trial/{i}", trial)
    project_outcomes(w, c, rec, dims)

    if rec.provenance is not None:
        p = rec.provenance
        _activity(w, c, p.tool, p.git_revision, p.host, p.started, p.environment)


def project_trial(w: nq.QuadWriter, owner: str, t: str, trial) -> None:
    """One trial of a chain (or of one of its restorations) at node `t`, linked from `owner`."""
    w.add(owner, LUMA + "trial", nq.iri(t))
    w.add(t, TYPE, nq.iri(LUMA + "Trial"))
    w.add(t, LUMA + "trialState", nq.string(trial.state))
    w.add(t, LUMA + "repetitionIndex", nq.integer(trial.repetition))
    w.add(t, LUMA + "verdict", nq.iri(LUMA + VERDICTS[trial.verdict]))
    if trial.failure_cause:
        w.add(t, LUMA + "failureCause", nq.string(trial.failure_cause))
    for j, obs in enumerate(trial.observations):
        o = f"{t}/observation/{j}"
        w.add(t, LUMA + "observation", nq.iri(o))
        _quantity(w.add, o, obs.metric, obs.value, obs.unit)


def software_config(w: nq.QuadWriter, cfg) -> str:
    """The luma:SoftwareConfig node of a record's `software` block, named by its key (the same
    configuration is one node across records); its IRI."""
    key = cfg.key()
    iri = ID + "software/" + key[:32]
    if w.entity(iri, LUMA + "SoftwareConfig"):
        w.describe(iri, LUMA + "configKey", nq.string(key))
        w.describe(iri, LUMA + "softwareService", nq.string(cfg.service))
        w.describe(iri, LUMA + "softwareVariant", nq.string(cfg.variant))
        if cfg.artifact:
            w.describe(iri, LUMA + "artifactHash", nq.string(cfg.artifact))
        for name, version in sorted(cfg.libraries.items()):
            w.describe(iri, LUMA + "library", nq.string(f"{name} {version}"))
        for name, value in sorted(cfg.settings.items()):
            w.describe(iri, LUMA + "setting", nq.string(f"{name}={value}"))
    return iri


def _architecture(w: nq.QuadWriter, ar) -> str:
    arch = _named("architecture", ar.name, ar.kind, ar.vendor)
    if w.entity(arch, LUMA + "Architecture"):
        w.describe(arch, LABEL, nq.string(ar.name))
        w.describe(arch, LUMA + "architectureKind", nq.iri(LUMA + ARCH_KINDS[ar.kind]))
        w.describe(arch, LUMA + "vendor", nq.string(ar.vendor))
    return arch


def _contract(w: nq.QuadWriter, contract) -> str:
    # exclude_none: a contract without a concurrency keeps the IRI it had before the field existed.
    iri = ID + "contract/" + _hash(contract.model_dump_json(exclude_none=True))
    if w.entity(iri, LUMA + "ServiceContract"):
        w.describe(iri, LABEL, nq.string(contract.name))
        if contract.concurrency is not None:
            w.describe(iri, LUMA + "concurrency", nq.integer(contract.concurrency))
        for i, clause in enumerate(contract.clauses):
            cl = f"{iri}/clause/{i}"
            w.describe(iri, LUMA + "clause", nq.iri(cl))
            _quantity(w.describe, cl, clause.metric, clause.value, clause.unit)
            w.describe(cl, LUMA + "operator", nq.string(clause.op))
    return iri


def _state(w: nq.QuadWriter, state, dims: dict[str, Dimension]) -> tuple[str, dict[str, str]]:
    """(state IRI, {dimension: level IRI}). A state is its set of levels (levels are compared in
    canonical units, so 8 GiB and 8192 MiB are the same level and the same state)."""
    levels = {key: _level(w, dims[key], level) for key, level in state.dimensions.items()}
    s = ID + "state/" + _hash(" ".join(sorted(levels.values())))
    if w.entity(s, LUMA + "MachineState"):
        for iri in levels.values():
            w.describe(s, LUMA + "level", nq.iri(iri))
    return s, levels


def _pex_trial(w: nq.QuadWriter, rec: PexTrial, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    t = ID + "trial/" + meta.content_hash[:32]
    record_node(w, t, "SprintTrial", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(t, LUMA + "sprint", nq.string(rec.sprint))
    w.add(t, LUMA + "sequence", nq.integer(rec.sequence))
    w.add(t, LUMA + "trialPhase", nq.string(rec.phase))
    w.add(t, LUMA + "workload", nq.iri(_workload(w, rec.workload)))
    w.add(t, LUMA + "architecture", nq.iri(_architecture(w, rec.architecture)))
    w.add(t, LUMA + "contract", nq.iri(_contract(w, rec.contract)))
    w.add(t, LUMA + "machineState", nq.iri(_state(w, rec.state, dims)[0]))
    w.add(t, LUMA + "softwareVariant", nq.string(rec.variant))
    w.add(t, LUMA + "verdict", nq.iri(LUMA + VERDICTS[rec.verdict]))
    if rec.failure_cause:
        w.add(t, LUMA + "failureCause", nq.string(rec.failure_cause))
    w.add(t, LUMA + "attempts", nq.integer(rec.attempts))
    for j, obs in enumerate(rec.observations):
        o = f"{t}/observation/{j}"
        w.add(t, LUMA + "observation", nq.iri(o))
        _quantity(w.add, o, obs.metric, obs.value, obs.unit)
    p = rec.provenance
    _activity(w, t, p.tool, p.git_revision, p.host, p.started, p.environment)


def _quantity(add, node: str, metric: str, value: float, unit: str) -> None:
    normalised, canonical = units.normalise(float(value), unit)
    add(node, LUMA + "metric", nq.string(metric))
    add(node, VALUE, nq.double(normalised))
    add(node, UNIT, nq.iri(units.unit_iri(canonical)))


def _level(w: nq.QuadWriter, dim: Dimension, level: Level) -> str:
    """The IRI of a level, described once per batch. A level is a value (dimension + quantity in
    its canonical unit, or dimension + category), shared by every state that has it."""
    if dim.categorical:
        text = str(level.value)
        node = f"{ID}level/{dim.key}/c-{slug(text)}"
        if w.entity(node, LUMA + "Level"):
            w.describe(node, LUMA + "dimension", nq.iri(dim.iri))
            w.describe(node, LUMA + "category", nq.string(text))
        return node
    normalised, canonical = units.normalise(float(level.value), level.unit)
    normalised += 0.0  # -0.0 and 0.0 are one level
    node = f"{ID}level/{dim.key}/{normalised!r}-{slug(canonical)}"
    if w.entity(node, LUMA + "Level"):
        w.describe(node, LUMA + "dimension", nq.iri(dim.iri))
        w.describe(node, VALUE, nq.double(normalised))
        w.describe(node, UNIT, nq.iri(units.unit_iri(canonical)))
    return node


def _activity(w: nq.QuadWriter, subject: str, tool: str, git_revision, host, started, environment=None) -> None:
    """The prov:Activity that produced `subject` (tool, revision, host, start), in the record graph."""
    act = f"{subject}/activity"
    w.add(subject, PROV + "wasGeneratedBy", nq.iri(act))
    w.add(act, TYPE, nq.iri(PROV + "Activity"))
    w.add(act, LUMA + "tool", nq.string(tool))
    if git_revision:
        w.add(act, LUMA + "gitRevision", nq.string(git_revision))
    if host:
        w.add(act, LUMA + "host", nq.string(host))
    if started:
        w.add(act, PROV + "startedAtTime", nq.datetime_(started))
    if environment is not None:
        _environment(w, act, environment)


def _workload(w: nq.QuadWriter, wl) -> str:
    iri = _named("workload", wl.name, wl.model, wl.task)
    model = ID + "model/" + slug(wl.model)
    if w.entity(iri, LUMA + "Workload"):
        w.describe(iri, LABEL, nq.string(wl.name))
        w.describe(iri, LUMA + "model", nq.iri(model))
        w.describe(iri, LUMA + "task", nq.string(wl.task))
    if w.entity(model, LUMA + "Model"):
        w.describe(model, LABEL, nq.string(wl.model))
    return iri


def _intervention(w: nq.QuadWriter, name: str, kind: str) -> str:
    iri = _named("intervention", name, kind)
    if w.entity(iri, LUMA + "Intervention"):
        w.describe(iri, LABEL, nq.string(name))
        w.describe(iri, LUMA + "interventionKind", nq.iri(LUMA + INTERVENTION_KINDS[kind]))
    return iri


def _kernel_result(w: nq.QuadWriter, rec: KernelResult, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    r = ID + "result/" + meta.content_hash[:32]
    record_node(w, r, "KernelResult", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(r, LUMA + "workload", nq.iri(_workload(w, rec.workload)))  # the same entity PEX chains name
    m = rec.method
    w.add(r, LUMA + "intervention", nq.iri(_intervention(w, m.name, m.kind)))
    for prop, value in (("bits", m.bits), ("granularity", m.granularity), ("quantMode", m.mode),
                        ("gemmBackend", m.backend)):
        if value is not None:
            w.add(r, LUMA + prop, nq.integer(value) if isinstance(value, int) else nq.string(value))
    for j, obs in enumerate(rec.metrics):
        o = f"{r}/observation/{j}"
        w.add(r, LUMA + "observation", nq.iri(o))
        _quantity(w.add, o, obs.metric, obs.value, obs.unit)
    w.add(r, LUMA + "repetitions", nq.integer(rec.repetitions))
    w.add(r, LUMA + "warmup", nq.integer(rec.warmup))
    w.add(r, LUMA + "artifact", nq.string(rec.artifact))
    for text in rec.limitations:
        w.add(r, LUMA + "limitation", nq.string(text))
    _activity(w, r, rec.tool, rec.git_revision, None, rec.started)
    _environment(w, r, rec.environment)


def _environment(w: nq.QuadWriter, subject: str, environment) -> None:
    env = f"{subject}/environment"
    w.add(subject, LUMA + "environment", nq.iri(env))
    w.add(env, TYPE, nq.iri(LUMA + "Environment"))
    for key, value in environment.model_dump(exclude_none=True).items():
        prop = LUMA + _ENV_PROPS[key]
        for v in value if isinstance(value, list) else [value]:
            w.add(env, prop, nq.integer(v) if isinstance(v, int) else nq.string(str(v)))


_ENV_PROPS = {
    "cpu_model": "cpuModel", "isa": "isaExtension", "logical_cpus": "logicalCpus", "usable_cpus": "usableCpus",
    "machine": "machineArchitecture", "python": "pythonVersion", "numpy": "numpyVersion", "torch": "torchVersion",
    "torch_cpu_capability": "torchCpuCapability", "torch_threads": "threads", "accelerator": "acceleratorModel",
}

def _machine(w: nq.QuadWriter, rec: MachineRecord, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    """Machine parameters: one node, one luma:MachineFigure per quantity (value in its canonical
    unit), each carrying the record's evidence class so a figure is never read without it."""
    m = ID + "machine/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    record_node(w, m, "MachineParameters", ec)
    w.add(m, LUMA + "machineName", nq.string(rec.name))
    w.add(m, LUMA + "architecture", nq.iri(_architecture(w, rec.architecture)))
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
    _activity(w, m, p.tool, p.git_revision, p.host, p.started, p.environment)


_FIGURE_KINDS = {"compute": "compute_throughput", "power": "power_tdp"}


def _intervention_parameters(w: nq.QuadWriter, rec: InterventionParameters, meta: LedgerMeta, dims) -> None:
    """A partner's parameters: one node, one luma:InterventionFigure per quantity (canonical unit,
    the record's evidence class), lists as repeated literals. All in the partner's graph."""
    r = ID + "intervention-parameters/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    record_node(w, r, "InterventionParameterRecord", ec)
    w.add(r, LUMA + "partnerName", nq.string(rec.partner))
    w.add(r, LABEL, nq.string(rec.name))
    w.add(r, LUMA + "parameterVersion", nq.string(rec.version))
    w.add(r, LUMA + "parameterizes", nq.iri(_intervention(w, rec.name, rec.kind)))
    w.add(r, LUMA + "integrationPoint", nq.string(rec.integration_point))
    for prop, values in (("dataClass", rec.data_classes), ("dataFormat", rec.formats),
                         ("accessPattern", rec.access_patterns), ("partnerLimitation", rec.limitations)):
        for v in values:
            w.add(r, LUMA + prop, nq.string(v))
    for prop, value in (("parameterDescription", rec.description), ("licensing", rec.licensing),
                        ("evaluationBoundary", rec.evaluation_boundary)):
        if value is not None:
            w.add(r, LUMA + prop, nq.string(value))
    if rec.coherence is not None:
        co = rec.coherence
        w.add(r, LUMA + "softwareTransparent", nq.boolean(co.software_transparent))
        w.add(r, LUMA + "requiresCodeChanges", nq.boolean(co.requires_code_changes))
        if co.cache_coherent is not None:
            w.add(r, LUMA + "cacheCoherent", nq.boolean(co.cache_coherent))
        for text in co.constraints:
            w.add(r, LUMA + "coherenceConstraint", nq.string(text))
    if rec.source is not None:
        w.add(r, LUMA + "sourceTitle", nq.string(rec.source.title))
        w.add(r, LUMA + "sourceUrl", nq.string(rec.source.url))
        if rec.source.retrieved:
            w.add(r, LUMA + "sourceRetrieved", nq.string(rec.source.retrieved.isoformat()))
    for i, row in enumerate(rec.figures()):
        f = f"{r}/figure/{i}"
        w.add(r, LUMA + "parameterFigure", nq.iri(f))
        w.add(f, TYPE, nq.iri(LUMA + "InterventionFigure"))
        w.add(f, LUMA + "evidenceClass", ec)
        w.add(f, LUMA + "parameterKind", nq.string(row["kind"]))
        if row["data_class"]:
            w.add(f, LUMA + "dataClass", nq.string(row["data_class"]))
        w.add(f, VALUE, nq.double(row["si"]))
        w.add(f, UNIT, nq.iri(units.unit_iri(row["si_unit"])))
    if rec.provenance is not None:
        p = rec.provenance
        _activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


def _partner_retraction(w: nq.QuadWriter, rec: PartnerRetraction, meta: LedgerMeta, dims) -> None:
    """The retraction names the graphs it withdraws (kb/query/scope.py drops them on every sync)."""
    r = w.graph  # the record node itself: only a self-description counts as a retraction
    w.add(r, TYPE, nq.iri(LUMA + "PartnerRetraction"))
    w.add(r, LUMA + "partnerName", nq.string(rec.partner))
    for h in rec.records:
        w.add(r, LUMA + "retracts", nq.iri(partner_graph(rec.partner, h)))
    if rec.reason:
        w.add(r, LUMA + "retractionReason", nq.string(rec.reason))
    p = rec.provenance
    _activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


def _runner_trust(w: nq.QuadWriter, rec: RunnerTrust, meta: LedgerMeta, dims) -> None:
    """The runner node: its name, key, partner, and since when the project trusts it (the ledger time)."""
    r = runner_iri(rec.fingerprint)
    w.add(r, TYPE, nq.iri(LUMA + "Runner"))
    w.add(r, PROV + "wasDerivedFrom", nq.iri(w.graph))
    w.add(r, LUMA + "runnerName", nq.string(rec.name))
    w.add(r, LUMA + "keyFingerprint", nq.string(rec.fingerprint))
    w.add(r, LUMA + "publicKey", nq.string(rec.public_key))
    w.add(r, LUMA + "trustedSince", nq.datetime_(meta.ingested_at))
    if rec.partner:
        w.add(r, LUMA + "partner", nq.string(rec.partner))
    p = rec.provenance
    _activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


def _runner_revocation(w: nq.QuadWriter, rec: RunnerRevocation, meta: LedgerMeta, dims) -> None:
    """The revocation (the record node itself) and, on the runner node, when it was revoked."""
    r, runner = w.graph, runner_iri(rec.fingerprint)
    w.add(r, TYPE, nq.iri(LUMA + "RunnerRevocation"))
    w.add(r, LUMA + "revokes", nq.iri(runner))
    w.add(r, LUMA + "runnerName", nq.string(rec.name))
    w.add(r, LUMA + "keyFingerprint", nq.string(rec.fingerprint))
    if rec.reason:
        w.add(r, LUMA + "revocationReason", nq.string(rec.reason))
    w.add(runner, LUMA + "revokedAt", nq.datetime_(meta.ingested_at))
    p = rec.provenance
    _activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


from luma.kb.ingest.projection_optimize import _optimize_result  # noqa: E402,F401 (a projector the kinds registry names)
from luma.kb.ingest.projection_pilot import _pilot_decision  # noqa: E402,F401 (a projector the kinds registry names)

#: record_type -> projector, for every kind of luma.kb.records.kinds.
PROJECTORS: dict[str, Callable] = {k.name: globals()[k.projector] for k in KINDS}
