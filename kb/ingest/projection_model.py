"""Projection of the model's records (kb/records/model_prediction.py) into quads.

A `model-prediction` becomes one `luma:ModelRun` (the command, the model's code and calibration
hashes, the notes) and one `luma:ModelPrediction` per predicted state. A prediction names the
contract and the machine state through the very entities a PEX chain or trial names
(`projection_nodes.contract_node`, `state_node`: same contract, same levels in canonical units ->
same IRI), so the model-agreement rule joins them without comparing levels itself. An
`experiment-matrix` becomes one `luma:ExperimentMatrix` with a node per state of each
configuration.
"""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest import projection_nodes as nodes
from luma.kb.ingest.projection_nodes import projects
from luma.kb.records import units
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA, QUDT, RDF, short_hash

TYPE = RDF + "type"
#: Predicted verdicts: the trial verdicts, and UNKNOWN where the model cannot judge a clause.
PREDICTED = {"PASS": "Pass", "FAIL": "Fail", "UNKNOWN": "Unknown"}


@projects("model-prediction")
def project_model_prediction(w: nq.QuadWriter, rec, meta, dims) -> None:
    """The run and one node per predicted state."""
    run = ID + "model-run/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    nodes.record_node(w, run, "ModelRun", ec)
    w.add(run, LUMA + "command", nq.string(rec.command))
    m = rec.model
    w.add(run, LUMA + "modelName", nq.string(m.name))
    w.add(run, LUMA + "modelCode", nq.string(m.code))
    w.add(run, LUMA + "calibrated", nq.boolean(m.calibrated))
    if m.calibration:
        w.add(run, LUMA + "calibrationHash", nq.string(m.calibration))
    if m.space:
        w.add(run, LUMA + "spaceName", nq.string(m.space))
    contract = nodes.contract_node(w, rec.contract)
    w.add(run, LUMA + "contract", nq.iri(contract))
    workload = nodes.workload_node(w, rec.workload) if rec.workload is not None else None
    if workload:
        w.add(run, LUMA + "workload", nq.iri(workload))
    if rec.intervention:
        w.add(run, LUMA + "partnerIntervention", nq.string(rec.intervention))
    for text in rec.notes:
        w.add(run, LUMA + "modelNote", nq.string(text))
    for i, p in enumerate(rec.predictions):
        node = f"{run}/prediction/{i}"
        w.add(run, LUMA + "prediction", nq.iri(node))
        nodes.record_node(w, node, "ModelPrediction", ec)
        w.add(node, LUMA + "contract", nq.iri(contract))
        if workload:
            w.add(node, LUMA + "workload", nq.iri(workload))
        state = nodes.state_node(w, p.state, dims)[0]
        w.add(node, LUMA + "predictedState", nq.iri(state))
        # The same prediction recorded twice (same contract, state, settings, model code and
        # calibration) has the same key, so model-vs-pex counts it once.
        key = [contract, state, sorted(p.configuration.items()), m.code, m.calibration, rec.intervention]
        w.add(node, LUMA + "predictionKey", nq.string(short_hash(key)))
        w.add(node, LUMA + "predictionRole", nq.string(p.role))
        w.add(node, LUMA + "predictedVerdict", nq.iri(LUMA + PREDICTED[p.verdict]))
        w.add(node, LUMA + "predictsBaseline", nq.boolean(p.baseline))
        w.add(node, LUMA + "atContractLoad", nq.boolean(p.at_contract_load))
        # The resource the prediction is about: the binding one of a FAIL, else the tightest.
        resource = p.binding_resource or p.tightest_resource
        if resource:
            w.add(node, LUMA + "predictedResource", nq.string(resource))
        if p.binding_resource:
            w.add(node, LUMA + "predictedBinding", nq.string(p.binding_resource))
        if p.margin is not None:
            w.add(node, LUMA + "predictedMargin", nq.double(p.margin))
        variant = p.configuration.get("variant")
        if variant:
            w.add(node, LUMA + "predictedVariant", nq.string(variant))
        for key, value in p.configuration.items():
            w.add(node, LUMA + "setting", nq.string(f"{key}={value}"))
        for j, c in enumerate(p.clauses):
            cl = f"{node}/clause/{j}"
            w.add(node, LUMA + "predictedClause", nq.iri(cl))
            w.add(cl, LUMA + "checkName", nq.string(c.check))
            w.add(cl, LUMA + "checkOperator", nq.string(c.op))
            w.add(cl, LUMA + "predictedVerdict", nq.iri(LUMA + PREDICTED[c.verdict]))
            w.add(cl, LUMA + "predictedResource", nq.string(c.resource))
            if c.predicted is not None:
                value, canonical = units.normalise(float(c.predicted), c.unit)
                w.add(cl, QUDT + "numericValue", nq.double(value))
                w.add(cl, QUDT + "unit", nq.iri(units.unit_iri(canonical)))
            if c.threshold is not None:
                w.add(cl, LUMA + "threshold", nq.double(units.normalise(float(c.threshold), c.unit)[0]))
            if c.margin is not None:
                w.add(cl, LUMA + "predictedMargin", nq.double(c.margin))
        for j, f in enumerate(p.figures):
            fig = f"{node}/figure/{j}"
            w.add(node, LUMA + "predictedFigure", nq.iri(fig))
            value, canonical = units.normalise(float(f.value), f.unit)
            w.add(fig, LUMA + "metric", nq.string(f.metric))
            w.add(fig, QUDT + "numericValue", nq.double(value))
            w.add(fig, QUDT + "unit", nq.iri(units.unit_iri(canonical)))
    pv = rec.provenance
    nodes.add_activity(w, run, pv.tool, pv.git_revision, pv.host, pv.started, pv.environment)


@projects("experiment-matrix")
def project_experiment_matrix(w: nq.QuadWriter, rec, meta, dims) -> None:
    """The matrix and one node per state of each configuration."""
    mx = ID + "experiment-matrix/" + meta.content_hash[:32]
    nodes.record_node(w, mx, "ExperimentMatrix", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(mx, LUMA + "matrixHash", nq.string(rec.sha256))
    w.add(mx, LUMA + "contract", nq.iri(nodes.contract_node(w, rec.contract)))
    w.add(mx, LUMA + "matrixDimension", nq.string(rec.dimension))
    w.add(mx, LUMA + "matrixRepetitions", nq.integer(rec.repetitions))
    if rec.model:
        w.add(mx, LUMA + "modelName", nq.string(rec.model))
    for i, config in enumerate(rec.configurations):
        for j, s in enumerate(config.states):
            node = f"{mx}/configuration/{i}/state/{j}"
            w.add(mx, LUMA + "matrixState", nq.iri(node))
            w.add(node, LUMA + "configurationName", nq.string(config.name))
            if config.intervention:
                w.add(node, LUMA + "partnerIntervention", nq.string(config.intervention))
            w.add(node, LUMA + "predictionRole", nq.string(s.role))
            for key, value in s.levels.items():
                w.add(node, LUMA + "setting", nq.string(f"{key}={value}"))
            if s.predicted:
                w.add(node, LUMA + "predictedVerdict", nq.iri(LUMA + PREDICTED[s.predicted]))
            if s.binding:
                w.add(node, LUMA + "predictedBinding", nq.string(s.binding))
    pv = rec.provenance
    nodes.add_activity(w, mx, pv.tool, pv.git_revision, pv.host, pv.started, pv.environment)
