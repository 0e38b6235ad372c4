"""Projection of a partner's records: intervention parameters (one luma:InterventionFigure per
quantity) and the retraction that withdraws them; all of it in the partner's graph (kb/store/partner_graphs.py)."""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest.projection_nodes import (
    LABEL, TYPE, UNIT, VALUE, LedgerMeta, add_activity, intervention_node, projects, record_node,
)
from luma.kb.records import units
from luma.kb.records.intervention_params import InterventionParameters, PartnerRetraction
from luma.kb.store.partner_graphs import partner_graph
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA


@projects("intervention-parameters")
def project_intervention_parameters(w: nq.QuadWriter, rec: InterventionParameters, meta: LedgerMeta, dims) -> None:
    """A partner's parameters: one node, one luma:InterventionFigure per quantity (canonical unit,
    the record's evidence class), lists as repeated literals. All in the partner's graph."""
    r = ID + "intervention-parameters/" + meta.content_hash[:32]
    ec = nq.iri(EVIDENCE_CLASSES[rec.evidence_class])
    record_node(w, r, "InterventionParameterRecord", ec)
    w.add(r, LUMA + "partnerName", nq.string(rec.partner))
    w.add(r, LABEL, nq.string(rec.name))
    w.add(r, LUMA + "parameterVersion", nq.string(rec.version))
    w.add(r, LUMA + "parameterizes", nq.iri(intervention_node(w, rec.name, rec.kind)))
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
        add_activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


@projects("partner-retraction")
def project_partner_retraction(w: nq.QuadWriter, rec: PartnerRetraction, meta: LedgerMeta, dims) -> None:
    """The retraction names the graphs it withdraws (kb/store/partner_graphs.py drops them on every sync)."""
    r = w.graph  # the record node itself: only a self-description counts as a retraction
    w.add(r, TYPE, nq.iri(LUMA + "PartnerRetraction"))
    w.add(r, LUMA + "partnerName", nq.string(rec.partner))
    for h in rec.records:
        w.add(r, LUMA + "retracts", nq.iri(partner_graph(rec.partner, h)))
    if rec.reason:
        w.add(r, LUMA + "retractionReason", nq.string(rec.reason))
    p = rec.provenance
    add_activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)
