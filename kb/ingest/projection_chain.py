"""Projection of the sprint's records: a PEX chain (its states, boundary, trials and outcomes:
`luma.kb.ingest.projection_outcomes`) and a single PEX trial."""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest.projection_nodes import (
    VERDICTS, LedgerMeta, add_activity, add_quantity, architecture_node, contract_node,
    intervention_node, project_trial, projects, record_node, software_config, state_node, text_hash,
    workload_node,
)
from luma.kb.ingest.projection_outcomes import project_outcomes
from luma.kb.records import units
from luma.kb.records.dimensions import Dimension
from luma.kb.records.pex_chain import PexChain
from luma.kb.records.pex_trial import PexTrial
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA


@projects("pex-chain")
def project_pex_chain(w: nq.QuadWriter, rec: PexChain, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    c = ID + "chain/" + meta.content_hash[:32]
    record_node(w, c, "BoundaryQualification", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))

    w.add(c, LUMA + "workload", nq.iri(workload_node(w, rec.workload)))

    w.add(c, LUMA + "architecture", nq.iri(architecture_node(w, rec.architecture)))
    w.add(c, LUMA + "contract", nq.iri(contract_node(w, rec.contract)))

    crossed = rec.crossed_dimension
    for prop, state in (("pass", rec.pass_state), ("fail", rec.fail_state)):
        s, levels = state_node(w, state, dims)
        w.add(c, LUMA + prop + "State", nq.iri(s))
        # The state's levels with the crossed dimension left out: equal for PASS and FAIL
        # exactly when the two states differ only in the crossed dimension (what the
        # qualification rule asks), as one comparison instead of a join over levels.
        rest = sorted(iri for key, iri in levels.items() if key != crossed)
        w.add(c, LUMA + prop + "Context", nq.string(text_hash(" ".join(rest))))

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
    w.add(c, LUMA + "intervention", nq.iri(intervention_node(w, rec.intervention.name, rec.intervention.kind)))
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
        add_activity(w, c, p.tool, p.git_revision, p.host, p.started, p.environment)


@projects("pex-trial")
def project_pex_trial(w: nq.QuadWriter, rec: PexTrial, meta: LedgerMeta, dims: dict[str, Dimension]) -> None:
    t = ID + "trial/" + meta.content_hash[:32]
    record_node(w, t, "SprintTrial", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(t, LUMA + "sprint", nq.string(rec.sprint))
    w.add(t, LUMA + "sequence", nq.integer(rec.sequence))
    w.add(t, LUMA + "trialPhase", nq.string(rec.phase))
    w.add(t, LUMA + "workload", nq.iri(workload_node(w, rec.workload)))
    w.add(t, LUMA + "architecture", nq.iri(architecture_node(w, rec.architecture)))
    w.add(t, LUMA + "contract", nq.iri(contract_node(w, rec.contract)))
    w.add(t, LUMA + "machineState", nq.iri(state_node(w, rec.state, dims)[0]))
    w.add(t, LUMA + "softwareVariant", nq.string(rec.variant))
    w.add(t, LUMA + "verdict", nq.iri(LUMA + VERDICTS[rec.verdict]))
    if rec.failure_cause:
        w.add(t, LUMA + "failureCause", nq.string(rec.failure_cause))
    if rec.failure_message:
        w.add(t, LUMA + "failureMessage", nq.string(rec.failure_message))
    w.add(t, LUMA + "attempts", nq.integer(rec.attempts))
    for j, obs in enumerate(rec.observations):
        o = f"{t}/observation/{j}"
        w.add(t, LUMA + "observation", nq.iri(o))
        add_quantity(w.add, o, obs.metric, obs.value, obs.unit)
    p = rec.provenance
    add_activity(w, t, p.tool, p.git_revision, p.host, p.started, p.environment)
