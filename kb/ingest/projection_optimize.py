"""Projection of an optimize-result record (kb/records/optimize_result.py): the result node with
the machine state it searched, the best accepted software configuration (a shared
luma:SoftwareConfig node) and its throughput, and one node per configuration tried with its
verdict, its throughput and its trials' verdicts. Rules (rules/12-qualified-optimum.rq) qualify
it like a chain: measured, signed by a trusted and unrevoked runner key."""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest import projection_nodes as nodes
from luma.kb.ingest.projection_nodes import projects
from luma.kb.records import units
from luma.kb.records.optimize_result import CONFIRMATIONS, OptimizeResult
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA


@projects("optimize-result")
def project_optimize_result(w: nq.QuadWriter, rec: OptimizeResult, meta, dims) -> None:
    r = ID + "optimum/" + meta.content_hash[:32]
    nodes.record_node(w, r, "OptimizeResult", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(r, LUMA + "sprint", nq.string(rec.sprint))
    w.add(r, LUMA + "workload", nq.iri(nodes.workload_node(w, rec.workload)))
    w.add(r, LUMA + "architecture", nq.iri(nodes.architecture_node(w, rec.architecture)))
    w.add(r, LUMA + "contract", nq.iri(nodes.contract_node(w, rec.contract)))
    w.add(r, LUMA + "machineState", nq.iri(nodes.state_node(w, rec.state, dims)[0]))
    w.add(r, LUMA + "loadMode", nq.string(rec.load.mode))
    w.add(r, LUMA + "concurrency", nq.integer(rec.load.concurrency))
    if rec.best is not None:
        w.add(r, LUMA + "softwareConfig", nq.iri(nodes.software_config(w, rec.best)))
    if rec.throughput is not None:
        value, canonical = units.normalise(float(rec.throughput.value), rec.throughput.unit)
        w.add(r, LUMA + "throughput", nq.double(value))
        w.add(r, LUMA + "throughputUnit", nq.iri(units.unit_iri(canonical)))
    for i, cfg in enumerate(rec.configurations):
        c = f"{r}/configuration/{i}"
        w.add(r, LUMA + "configuration", nq.iri(c))
        w.add(c, nodes.TYPE, nq.iri(LUMA + "TriedConfiguration"))
        w.add(c, LUMA + "softwareConfig", nq.iri(nodes.software_config(w, cfg.software)))
        w.add(c, LUMA + "concurrency", nq.integer(cfg.concurrency))
        accepted = len(cfg.trials) >= CONFIRMATIONS and all(t.verdict == "PASS" for t in cfg.trials)
        w.add(c, LUMA + "accepted", nq.boolean(accepted))
        for j, trial in enumerate(cfg.trials):
            t = f"{c}/trial/{j}"
            w.add(c, LUMA + "trial", nq.iri(t))
            w.add(t, nodes.TYPE, nq.iri(LUMA + "SearchTrial"))
            w.add(t, LUMA + "verdict", nq.iri(LUMA + nodes.VERDICTS[trial.verdict]))
            if trial.failure_cause:
                w.add(t, LUMA + "failureCause", nq.string(trial.failure_cause))
            for k, obs in enumerate(trial.observations):
                o = f"{t}/observation/{k}"
                w.add(t, LUMA + "observation", nq.iri(o))
                nodes.add_quantity(w.add, o, obs.metric, obs.value, obs.unit)
    pv = rec.provenance
    nodes.add_activity(w, r, pv.tool, pv.git_revision, pv.host, pv.started, pv.environment)
