"""Plain RDF loaded with `luma kb load`, kept in the ledger like any other record.

Blank nodes are replaced by IRIs under the record's graph at load time (skolemised), so the
stored payload and everything projected from it are deterministic.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel, ConfigDict

from luma.kb.stores.base import parse_rdf
from luma.kb.vocab import LOADABLE_CLASSES, EvidenceClass, record_graph

_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")



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




@lru_cache(maxsize=1)
def derived_only_classes() -> frozenset[str]:
    """The classes only rules derive (`luma:derivedOnly true` in the packaged ontology)."""
    from luma.kb.dimensions import ontology_files
    from luma.kb.vocab import LUMA

    flag = ox.NamedNode(LUMA + "derivedOnly")
    out = set()
    for _, data in ontology_files():
        for t in ox.parse(data, ox.RdfFormat.TURTLE):
            if t.predicate == flag and isinstance(t.object, ox.Literal) and t.object.value == "true":
                out.add(t.subject.value)
    return frozenset(out)


def read_document(data: bytes, fmt: str, evidence_class: str, source: str) -> tuple[str, RdfDocument]:
    """Parse (all or nothing) and skolemise; return (record hash, record). RecordError for a
    `measured` claim, a document that holds no triple, or one that types a node with a class only
    rules derive (a document's claims are its own evidence, never a derivation)."""
    from luma.errors import RecordError

    if evidence_class not in LOADABLE_CLASSES:
        raise RecordError(f"plain RDF cannot be {evidence_class!r} evidence (measured evidence comes from attested "
                          f"runners' records; use {', '.join(LOADABLE_CLASSES)})", source=source,
                          field="evidence_class")
    rec_hash = document_hash(data, fmt, evidence_class)
    base = record_graph(rec_hash) + "/"
    quads = list(parse_rdf(data, fmt, source, base_iri=base))
    derived = derived_only_classes()
    for q in quads:
        if q.predicate == _TYPE and isinstance(q.object, ox.NamedNode) and q.object.value in derived:
            raise RecordError(f"{q.subject} is typed {q.object}, a class only rules derive (from measured, "
                              "qualified evidence): a document cannot assert it; nothing was loaded",
                              source=source, field="rdf:type")
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
    """Projector for `rdf-document` records (see luma.kb.projection)."""
    for t in ox.parse(doc.ntriples.encode(), format=ox.RdfFormat.N_TRIPLES):
        if isinstance(t.subject, ox.NamedNode):
            w.add(t.subject.value, t.predicate.value, str(t.object))
