"""The nodes every projector writes: a record's root node, the shared entities (workload,
architecture, contract, machine state and its levels, intervention, software configuration) with
content-derived IRIs described once per batch, quantities in canonical units, a trial, and the
prov:Activity that produced a record; and the registry of projectors.

The projector of each record kind (`luma.kb.ingest.projection_*`) builds on these nodes and
registers itself with `@projects(kind)`; `luma.kb.ingest.projection` imports every projector
module, checks that each kind of the registry (kb/records/kinds.py) has one, and chooses one per record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from luma.kb.ingest import nquads as nq
from luma.kb.records import units
from luma.kb.records.dimensions import Dimension
from luma.kb.records.pex_chain import Level
from luma.kb.vocab import ID, LUMA, PROV, QUDT, RDF, RDFS, short_hash, slug

#: record_type -> the function that projects it, filled by `projects` as the projector modules load.
PROJECTORS: dict[str, Callable] = {}


def projects(kind: str) -> Callable[[Callable], Callable]:
    """Register the decorated function as the projector of record kind `kind`."""
    def register(projector: Callable) -> Callable:
        if kind in PROJECTORS:
            raise RuntimeError(f"two projectors for record kind {kind!r}")
        PROJECTORS[kind] = projector
        return projector
    return register


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


def runner_iri(fingerprint: str) -> str:
    """A runner key's node: named by its fingerprint, so trust, revocation and every record it
    signed meet there."""
    return ID + "runner/" + fingerprint


@lru_cache(maxsize=65536)
def _named(kind: str, name: str, *facts: str) -> str:
    """IRI of a named entity; the facts that define it are hashed in, so a name reused with
    different facts (another model, vendor, kind) is a different entity, not a conflict."""
    return f"{ID}{kind}/{slug(name)}-{short_hash(list(facts))[:8]}"


def text_hash(text: str) -> str:
    """A short content key of `text` (the hex SHA-256 prefix that names states and contracts)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def record_node(w: nq.QuadWriter, node: str, cls: str, evidence: str) -> None:
    """A record's root node: its class (a name in the LUMA namespace), its evidence class (an IRI
    term) and an explicit link to its record graph, so that union-graph queries (and `luma kb
    explain`) keep its provenance."""
    w.add(node, TYPE, nq.iri(LUMA + cls))
    w.add(node, LUMA + "evidenceClass", evidence)
    w.add(node, PROV + "wasDerivedFrom", nq.iri(w.graph))


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
        add_quantity(w.add, o, obs.metric, obs.value, obs.unit)


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


def architecture_node(w: nq.QuadWriter, ar) -> str:
    arch = _named("architecture", ar.name, ar.kind, ar.vendor)
    if w.entity(arch, LUMA + "Architecture"):
        w.describe(arch, LABEL, nq.string(ar.name))
        w.describe(arch, LUMA + "architectureKind", nq.iri(LUMA + ARCH_KINDS[ar.kind]))
        w.describe(arch, LUMA + "vendor", nq.string(ar.vendor))
    return arch


def contract_node(w: nq.QuadWriter, contract) -> str:
    # exclude_none: a contract without a concurrency keeps the IRI it had before the field existed.
    iri = ID + "contract/" + text_hash(contract.model_dump_json(exclude_none=True))
    if w.entity(iri, LUMA + "ServiceContract"):
        w.describe(iri, LABEL, nq.string(contract.name))
        if contract.concurrency is not None:
            w.describe(iri, LUMA + "concurrency", nq.integer(contract.concurrency))
        for i, clause in enumerate(contract.clauses):
            cl = f"{iri}/clause/{i}"
            w.describe(iri, LUMA + "clause", nq.iri(cl))
            add_quantity(w.describe, cl, clause.metric, clause.value, clause.unit)
            w.describe(cl, LUMA + "operator", nq.string(clause.op))
    return iri


def state_node(w: nq.QuadWriter, state, dims: dict[str, Dimension]) -> tuple[str, dict[str, str]]:
    """(state IRI, {dimension: level IRI}). A state is its set of levels (levels are compared in
    canonical units, so 8 GiB and 8192 MiB are the same level and the same state)."""
    levels = {key: level_node(w, dims[key], level) for key, level in state.dimensions.items()}
    s = ID + "state/" + text_hash(" ".join(sorted(levels.values())))
    if w.entity(s, LUMA + "MachineState"):
        for iri in levels.values():
            w.describe(s, LUMA + "level", nq.iri(iri))
    return s, levels


def add_quantity(add, node: str, metric: str, value: float, unit: str) -> None:
    normalised, canonical = units.normalise(float(value), unit)
    add(node, LUMA + "metric", nq.string(metric))
    add(node, VALUE, nq.double(normalised))
    add(node, UNIT, nq.iri(units.unit_iri(canonical)))


def level_node(w: nq.QuadWriter, dim: Dimension, level: Level) -> str:
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


def add_activity(w: nq.QuadWriter, subject: str, tool: str, git_revision, host, started, environment=None) -> None:
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
        add_environment(w, act, environment)


def workload_node(w: nq.QuadWriter, wl) -> str:
    iri = _named("workload", wl.name, wl.model, wl.task)
    model = ID + "model/" + slug(wl.model)
    if w.entity(iri, LUMA + "Workload"):
        w.describe(iri, LABEL, nq.string(wl.name))
        w.describe(iri, LUMA + "model", nq.iri(model))
        w.describe(iri, LUMA + "task", nq.string(wl.task))
    if w.entity(model, LUMA + "Model"):
        w.describe(model, LABEL, nq.string(wl.model))
    return iri


def intervention_node(w: nq.QuadWriter, name: str, kind: str) -> str:
    iri = _named("intervention", name, kind)
    if w.entity(iri, LUMA + "Intervention"):
        w.describe(iri, LABEL, nq.string(name))
        w.describe(iri, LUMA + "interventionKind", nq.iri(LUMA + INTERVENTION_KINDS[kind]))
    return iri


def add_environment(w: nq.QuadWriter, subject: str, environment) -> None:
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
