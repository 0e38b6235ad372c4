"""Plain RDF loaded with `luma kb load`, kept in the ledger like any other record.

Blank nodes are replaced by IRIs under the record's graph at load time (skolemised), so the
stored payload and everything projected from it are deterministic.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel, ConfigDict

from luma.errors import RecordError
from luma.kb.records.sealed import plain_rdf_problem
from luma.kb.store.base import parse_rdf
from luma.kb.vocab import LOADABLE_CLASSES, EvidenceClass, record_graph



class RdfDocument(BaseModel):
    """A Turtle / N-Triples / N-Quads / TriG / JSON-LD document, flattened into one graph."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_type: Literal["rdf-document"] = "rdf-document"
    evidence_class: EvidenceClass
    format: str
    source_sha256: str
    #: The document's triples as sorted, skolemised N-Triples.
    ntriples: str


def document_hash(data: bytes, fmt: str, evidence_class: str) -> str:
    """Identity of a loaded document: its bytes, format and evidence class."""
    h = hashlib.sha256()
    for part in (fmt.encode(), b"\0", evidence_class.encode(), b"\0", data):
        h.update(part)
    return h.hexdigest()




def read_document(data: bytes, fmt: str, evidence_class: str, source: str) -> tuple[str, RdfDocument]:
    """Parse (all or nothing) and skolemise; return (record hash, record). RecordError for a
    `measured` claim, a document that holds no triple, or one with a triple a document may not
    state (kb/records/sealed.py: about a node LUMA mints, with a predicate only the ledger, the rules or the
    ontology state, or typing a node with such a class): a document's claims are its own evidence,
    never a derivation, a record's fact, a runner's trust or the ontology."""
    if evidence_class not in LOADABLE_CLASSES:
        raise RecordError(f"plain RDF cannot be {evidence_class!r} evidence (measured evidence comes from attested "
                          f"runners' records; use {', '.join(LOADABLE_CLASSES)})", source=source,
                          field="evidence_class")
    rec_hash = document_hash(data, fmt, evidence_class)
    base = record_graph(rec_hash) + "/"
    quads = list(parse_rdf(data, fmt, source, base_iri=base))
    for q in quads:
        why = plain_rdf_problem(q, base)
        if why is not None:
            raise RecordError(f"the triple {q.subject} {q.predicate} {_short(q.object)} is refused: {why}; "
                              "nothing was loaded", source=source, field="triple")
    lines = sorted(set(skolemised_triples(quads, base + "bnode/")))
    if not lines:
        hint = " (JSON-LD needs an @context that maps its keys to IRIs)" if fmt == "jsonld" else ""
        raise RecordError(f"the document holds no RDF triple{hint}; nothing was loaded", source=source)
    doc = RdfDocument(
        evidence_class=evidence_class,
        format=fmt,
        source_sha256=hashlib.sha256(data).hexdigest(),
        ntriples="".join(lines),
    )
    return rec_hash, doc


def _short(term) -> str:
    """A term for a one-line message: long literals cut (the triple is named, not reproduced)."""
    text = str(term)
    return text if len(text) <= 120 else text[:117] + "..."


def skolemised_triples(quads, prefix: str) -> list[str]:
    """N-Triples lines of `quads` (graph names dropped), blank nodes replaced by `prefix`N IRIs.

    N counts blank nodes in document order: parsers label anonymous nodes at random, so
    numbering by appearance is what makes the same text give the same triples every time.
    """
    numbers: dict[str, str] = {}

    def term(t) -> str:
        if isinstance(t, ox.BlankNode):
            return f"<{prefix}{numbers.setdefault(t.value, str(len(numbers)))}>"
        return str(t)

    return [f"{term(q.subject)} {q.predicate} {term(q.object)} .\n" for q in quads]


def project_document(w, doc: RdfDocument, meta, dims) -> None:
    """Projector for `rdf-document` records (see luma.kb.ingest.projection)."""
    for t in ox.parse(doc.ntriples.encode(), format=ox.RdfFormat.N_TRIPLES):
        if isinstance(t.subject, ox.NamedNode):
            w.add(t.subject.value, t.predicate.value, str(t.object))
