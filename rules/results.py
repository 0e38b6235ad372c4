"""A rule's results in its derived quads: which nodes it derived, and which of them a run added,
changed or removed — what `luma rules run` counts, rather than quads. A rule's graph also holds
its derivation's bookkeeping (the `prov:Activity` with its rule, version and parameters) and
several quads per result, so a quad count says "7 new" where a rule derived nothing."""

from __future__ import annotations

from dataclasses import dataclass

from luma.kb.vocab import ID, PROV

_TYPE = b"<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
_GENERATED = f"<{PROV}wasGeneratedBy>".encode()
_ACTIVITY = f"<{ID}derivation/".encode()  # the subjects of the bookkeeping quads (rules/engine.py activity_of)


@dataclass(frozen=True)
class Results:
    """How to tell a rule's results in the N-Quads lines of its graph `graph`: the nodes typed
    `result_class` (rules/analysis.py `Analysed.result_class`); without a class, every subject but
    the derivation's own."""

    graph: str
    result_class: str | None

    def nodes(self, quads: set[bytes]) -> set[bytes]:
        """The result nodes the quads state."""
        if self.result_class:
            tail = f" {_TYPE.decode()} <{self.result_class}> <{self.graph}> .".encode()
            return {line[:-len(tail)] for line in quads if line.endswith(tail)}
        return {s for s in map(_subject, quads) if not s.startswith(_ACTIVITY)}

    def touched(self, quads: set[bytes]) -> set[bytes]:
        """The subjects whose statements are among `quads`, leaving out `prov:wasGeneratedBy`: a new
        derivation (other parameters) of the same facts is not a change of the result."""
        return {_subject(line) for line in quads if line.split(b" ", 2)[1:2] != [_GENERATED]}

    def tally(self, before: set[bytes], after: set[bytes]) -> tuple[int, int, int, int]:
        """(results after, new, changed, removed) from the graph's quads before and after a run."""
        old, now = self.nodes(before), self.nodes(after)
        changed = self.touched(before ^ after) & old & now
        return len(now), len(now - old), len(changed), len(old - now)

    def type_lines(self, nodes: set[bytes]) -> set[bytes]:
        """The quads that make `nodes` results (to ask the store which of them it holds)."""
        if not self.result_class:
            return set()
        return {node + f" {_TYPE.decode()} <{self.result_class}> <{self.graph}> .".encode() for node in nodes}

    def count_query(self) -> str:
        """SPARQL counting the results the store's graph holds now (as `?n`)."""
        if self.result_class:
            return f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ GRAPH <{self.graph}> {{ ?s a <{self.result_class}> }} }}"
        return (f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ GRAPH <{self.graph}> {{ ?s ?p ?o }} "
                f"FILTER(!STRSTARTS(STR(?s), \"{_ACTIVITY[1:].decode()}\")) }}")


def _subject(line: bytes) -> bytes:
    return line.split(b" ", 1)[0]
