"""Projection of a pilot-decision record (kb/records/pilot_decision.py).

The decision node (luma:PilotDecision) carries the pilot run, the sequence, the action, the
outcome, the predicted and the verification verdicts, the window, and the workload, architecture
and contract entities the PEX records name. The states it left and applied are luma:PilotState
entities: the key the controller names them by (luma:stateKey), their machine state — the same
luma:MachineState entity trials and chains name, so levels compare across records — their variant
and settings. The predicted figures and the realized ones (before and after the switch) are
luma:PilotFigure nodes, each with its value in the canonical unit and its own evidence class
(luma:figureEvidence: a figure's class may be one no record has, `user-supplied`, so it is the
record's spelling, not an evidence-class IRI). The verification trials stay in the ledger: the
KB keeps their verdict, which ingest re-judged.
"""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest import projection_nodes as nodes
from luma.kb.ingest.projection_nodes import projects
from luma.kb.records import units
from luma.kb.records.pilot_decision import Figure, PilotDecision, PilotState
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA

#: The figure lists projected, by the property that links them to the decision.
FIGURE_LISTS = (("predictedFigure", "prediction"), ("realizedBefore", "before"), ("realizedAfter", "after"))


@projects("pilot-decision")
def project_pilot_decision(w: nq.QuadWriter, rec: PilotDecision, meta, dims) -> None:
    d = ID + "pilot-decision/" + meta.content_hash[:32]
    nodes.record_node(w, d, "PilotDecision", nq.iri(EVIDENCE_CLASSES[rec.evidence_class]))
    w.add(d, LUMA + "pilotRun", nq.string(rec.pilot))
    w.add(d, LUMA + "decisionSequence", nq.integer(rec.sequence))
    w.add(d, LUMA + "windowStart", nq.double(float(rec.window.start_s)))
    w.add(d, LUMA + "windowEnd", nq.double(float(rec.window.end_s)))
    w.add(d, LUMA + "pilotAction", nq.string(rec.action))
    w.add(d, LUMA + "pilotOutcome", nq.string(rec.outcome))
    w.add(d, LUMA + "decisionReason", nq.string(rec.reason))
    w.add(d, LUMA + "workload", nq.iri(nodes.workload_node(w, rec.workload)))
    w.add(d, LUMA + "architecture", nq.iri(nodes.architecture_node(w, rec.architecture)))
    w.add(d, LUMA + "contract", nq.iri(nodes.contract_node(w, rec.contract)))
    w.add(d, LUMA + "candidateState", nq.iri(pilot_state(w, rec.candidate, dims)))
    if rec.from_state is not None:
        w.add(d, LUMA + "fromState", nq.iri(pilot_state(w, rec.from_state, dims)))
    w.add(d, LUMA + "predictedVerdict", nq.iri(LUMA + nodes.VERDICTS[rec.prediction.verdict]))
    w.add(d, LUMA + "predictedMargin", nq.double(float(rec.prediction.margin)))
    w.add(d, LUMA + "verificationVerdict", nq.iri(LUMA + nodes.VERDICTS[rec.verification.verdict]))
    w.add(d, LUMA + "verificationWindows", nq.integer(rec.verification.windows))
    lists = {"prediction": rec.prediction.figures, "before": rec.realized.before, "after": rec.realized.after}
    for prop, part in FIGURE_LISTS:
        for i, figure in enumerate(lists[part]):
            f = f"{d}/{part}/{i}"
            w.add(d, LUMA + prop, nq.iri(f))
            _figure(w, f, figure)
    pv = rec.provenance
    nodes.add_activity(w, d, pv.tool, pv.git_revision, pv.host, pv.started, pv.environment)


def pilot_state(w: nq.QuadWriter, ps: PilotState, dims) -> str:
    """The luma:PilotState entity of a library state (described once per batch); its IRI. Named by
    its content (key, machine state, variant, settings), so a key two controllers gave different
    states never merges them."""
    state = nodes.state_node(w, ps.state, dims)[0]  # described first: `entity` below opens another description
    settings = [f"{name}={value}" for name, value in ps.settings.items()]
    iri = ID + "pilot-state/" + nodes.text_hash(" ".join([ps.key, state, ps.variant, *settings]))
    if w.entity(iri, LUMA + "PilotState"):
        w.describe(iri, LUMA + "stateKey", nq.string(ps.key))
        w.describe(iri, LUMA + "machineState", nq.iri(state))
        w.describe(iri, LUMA + "softwareVariant", nq.string(ps.variant))
        for text in settings:
            w.describe(iri, LUMA + "setting", nq.string(text))
    return iri


def _figure(w: nq.QuadWriter, f: str, figure: Figure) -> None:
    w.add(f, nodes.TYPE, nq.iri(LUMA + "PilotFigure"))
    nodes.add_quantity(w.add, f, figure.metric, figure.value, figure.unit)
    w.add(f, LUMA + "figureEvidence", nq.string(figure.evidence_class))
    if figure.ci_low is not None:
        # The bounds in the value's canonical unit, as the value.
        w.add(f, LUMA + "ciLow", nq.double(units.normalise(float(figure.ci_low), figure.unit)[0]))
        w.add(f, LUMA + "ciHigh", nq.double(units.normalise(float(figure.ci_high), figure.unit)[0]))
