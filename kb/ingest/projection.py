"""Projection: a validated record (plus its ledger metadata) -> quads.

A pure function. Same record -> same IRIs -> same quads, which is what makes re-ingest a
no-op and `luma kb rebuild` exact. The record's own facts (the chain, its trials, the record
metadata) go to its named graph; shared entities (workload, architecture, contract, machine
state, intervention, submitter) get content-derived IRIs and are described in the shared
entities graph, so rules join across records without seeing one copy per record. A partner's
records are the exception: everything of one, entity descriptions included, goes to its
partner graph (kb/store/partner_graphs.py), so nothing of a partner is visible outside that partner's graphs.
"""

from __future__ import annotations

from functools import lru_cache

from luma.kb.ingest import nquads as nq
from luma.kb.ingest import (  # noqa: F401 (each registers its projectors)
    projection_chain,
    projection_machine,
    projection_model,
    projection_optimize,
    projection_partner,
    projection_pilot,
    projection_runner,
)
from luma.kb.ingest.projection_nodes import LABEL, PROJECTORS, TYPE, LedgerMeta, projects, runner_iri
from luma.kb.store.partner_graphs import PARTNER_RECORD_TYPES, partner_graph
from luma.kb.records.dimensions import Dimension, record_dimensions
from luma.kb.records.kinds import KINDS
from luma.kb.records.rdf_document import project_document
from luma.kb.vocab import ENTITY_GRAPH, EVIDENCE_CLASSES, ID, LUMA, PROV, record_graph, slug

# Each projector module registers the kinds it projects (`@projects`) as it is imported above; an
# RDF document projects itself (kb/records/rdf_document.py).
projects("rdf-document")(project_document)
if set(PROJECTORS) != {k.name for k in KINDS}:  # a kind added to the registry needs its projector
    raise RuntimeError(f"record kinds without a projector: {sorted({k.name for k in KINDS} - set(PROJECTORS))}")


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


@lru_cache(maxsize=1024)
def _agent(submitter: str) -> str:
    return ID + "agent/" + slug(submitter)
