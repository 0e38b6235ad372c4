"""Namespaces and deterministic IRIs.

Every IRI LUMA mints is a pure function of content (a hash or a slug), so the same record
ingested twice, or replayed by `luma kb rebuild`, yields exactly the same triples.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

LUMA = "https://w3id.org/luma/ns#"
ID = "https://w3id.org/luma/id/"
DIM = "https://w3id.org/luma/dim/"
LUNIT = "https://w3id.org/luma/unit/"
QUDT = "http://qudt.org/schema/qudt/"
UNIT = "http://qudt.org/vocab/unit/"
PROV = "http://www.w3.org/ns/prov#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
XSD = "http://www.w3.org/2001/XMLSchema#"
OWL = "http://www.w3.org/2002/07/owl#"
SH = "http://www.w3.org/ns/shacl#"

PREFIXES = {
    "luma": LUMA,
    "id": ID,
    "dim": DIM,
    "lunit": LUNIT,
    "qudt": QUDT,
    "unit": UNIT,
    "prov": PROV,
    "rdf": RDF,
    "rdfs": RDFS,
    "xsd": XSD,
    "owl": OWL,
}

#: Named graph holding the ontology (reloaded when the ontology files change; exported too).
ONTOLOGY_GRAPH = ID + "graph/ontology"
#: Named graph of shared entities (workloads, architectures, contracts, states, ...).
ENTITY_GRAPH = ID + "graph/entities"
#: Prefix of the named graph of each ingested record.
RECORD_GRAPH = ID + "record/"



@dataclass(frozen=True)
class EvidenceClassInfo:
    """One evidence class: its record spelling, its IRI, its title in reports, and whether plain
    RDF (`luma kb load`) may claim it — `measured` comes from attested runners only."""

    name: str
    iri: str
    title: str
    loadable: bool


#: The one list of evidence classes, strongest first; everything else is derived from it.
EVIDENCE = (
    EvidenceClassInfo("measured", LUMA + "Measured", "Measured evidence", False),
    EvidenceClassInfo("simulated", LUMA + "Simulated", "Simulated evidence", True),
    EvidenceClassInfo("projected", LUMA + "Projected", "Projected evidence", True),
    EvidenceClassInfo("vendor-claim", LUMA + "VendorClaim", "Vendor-claim evidence", True),
    # Generated records (kb/records/synthetic.py) for benchmarks, tests and examples: a class of their own
    # so that no rule, query or report can take them for measurements (issue 28; DESIGN §8).
    EvidenceClassInfo("synthetic", LUMA + "Synthetic", "Synthetic evidence (generated, not measurements)", False),
)
#: Record spelling -> IRI.
EVIDENCE_CLASSES = {c.name: c.iri for c in EVIDENCE}
#: The classes plain RDF may claim.
LOADABLE_CLASSES = tuple(c.name for c in EVIDENCE if c.loadable)
#: The type of a record's `evidence_class` field.
EvidenceClass = Literal[tuple(EVIDENCE_CLASSES)]
#: Evidence classes a price may carry: a vendor's list price, or a figure the user states
#: (price tables, `luma.experiments.prices`; a pilot decision's figures may carry them too).
PRICE_CLASSES = ("vendor-claim", "user-supplied")

_SLUG_BAD = re.compile(r"[^A-Za-z0-9._~-]+")


def canonical_json(data: Any) -> str:
    """Key-sorted, whitespace-free JSON: the form that is hashed and stored in the ledger."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(data: Any) -> str:
    """SHA-256 of the canonical JSON of `data` (hex)."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def short_hash(data: Any) -> str:
    """First 128 bits of the content hash: enough to never collide in one KB, short to read."""
    return content_hash(data)[:32]


@lru_cache(maxsize=65536)
def slug(text: str) -> str:
    """A readable IRI segment for a user-given name; a hash suffix keeps distinct names distinct."""
    cleaned = _SLUG_BAD.sub("-", text.strip()).strip("-")[:64] or "x"
    if cleaned == text:
        return cleaned
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def record_graph(record_hash: str) -> str:
    """The named graph of the record with this content hash."""
    return RECORD_GRAPH + record_hash[:32]
