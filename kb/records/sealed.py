"""The sealed vocabulary: the terms only the rules, the ledger's projection, the trust records or
the ontology may state, read from the packaged ontology's own marks (`luma:derivedOnly`,
`luma:states`; ontology/luma.ttl), never from a hand list in code.

Two things follow from it. A plain RDF document (`luma kb load`) describes only the nodes it
brings: it may not state a sealed term, nor say anything about a node LUMA mints (records,
derived nodes, runners, dimensions, ontology terms), though it may point at them
(`plain_rdf_problem`). And every reader of a sealed term reads it only inside the graphs of
whoever states it (rules/sealing.py checks the shipped queries against these marks).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pyoxigraph as ox

from luma.kb.records.dimensions import ontology_files
from luma.kb.vocab import LUMA, RDF

#: Every IRI LUMA mints lives under this root: the ontology (ns#), records, derived nodes, runners
#: and graphs (id/), dimensions (dim/), units (unit/), capability classes (capability/).
MINTED = "https://w3id.org/luma/"
_TYPE = RDF + "type"
#: `luma:states` object -> who, as the rest of the code names them.
WHO = {LUMA + "Rules": "rules", LUMA + "Ledger": "ledger", LUMA + "TrustRecords": "trust",
       LUMA + "Ontology": "ontology"}


@dataclass(frozen=True)
class Sealed:
    """Term IRI -> who may state it ("rules", "ledger", "trust", "ontology"; a term the ledger
    and the rules both state has both)."""

    by_term: dict[str, frozenset[str]]
    #: The classes marked `luma:derivedOnly true`.
    derived_only: frozenset[str] = frozenset()

    def who(self, term: str) -> frozenset[str]:
        return self.by_term.get(term, frozenset())

    def __contains__(self, term: str) -> bool:
        return term in self.by_term


@lru_cache(maxsize=1)
def sealed() -> Sealed:
    """The marks of the packaged ontology (the project's own ontology files may extend the
    vocabulary, never unseal it, so they are not read here)."""
    states, derived_only = ox.NamedNode(LUMA + "states"), ox.NamedNode(LUMA + "derivedOnly")
    out: dict[str, set[str]] = {}
    derived: set[str] = set()
    for _, data in ontology_files():
        for t in ox.parse(data, ox.RdfFormat.TURTLE):
            if t.predicate == states and t.subject.value in WHO and isinstance(t.object, ox.NamedNode):
                out.setdefault(t.object.value, set()).add(WHO[t.subject.value])
            elif t.predicate == derived_only and isinstance(t.object, ox.Literal) and t.object.value == "true":
                out.setdefault(t.subject.value, set()).add("rules")
                derived.add(t.subject.value)
    return Sealed({term: frozenset(who) for term, who in out.items()}, frozenset(derived))


def derived_only_classes() -> frozenset[str]:
    """The classes only rules derive (`luma:derivedOnly true` in the packaged ontology)."""
    return sealed().derived_only


def plain_rdf_problem(q, own: str) -> str | None:
    """Why a plain RDF document may not state the triple `q`, or None when it may. `own` is the
    IRI prefix of the document's own nodes (its skolemised blank nodes and relative IRIs)."""
    s, p, o = q.subject, q.predicate.value, q.object
    if isinstance(s, ox.NamedNode) and s.value.startswith(MINTED) and not s.value.startswith(own):
        return (f"its subject {s} is a node LUMA mints (a record, derived node, runner, dimension or ontology "
                "term): a document describes only the nodes it brings, and may point at LUMA's nodes as objects")
    marks = sealed()
    if p in marks:
        return f"{q.predicate} is stated only by {_who(marks.who(p))}"
    if p == _TYPE and isinstance(o, ox.NamedNode) and o.value in marks:
        if "rules" in marks.who(o.value):
            return f"it types a node {o}, a class only rules derive (from measured, qualified evidence)"
        return f"it types a node {o}, a class only {_who(marks.who(o.value))} may instantiate"
    return None


def _who(who: frozenset[str]) -> str:
    words = {"rules": "the rules", "ledger": "the ledger's records", "trust": "the ledger's trust records",
             "ontology": "the ontology"}
    return " and ".join(words[w] for w in sorted(who))
