"""Writing N-Quads terms directly as text.

The projection emits millions of quads for a large batch; formatting them as strings and
handing them to Oxigraph's bulk loader is several times faster than building term objects.
"""

from __future__ import annotations

from datetime import datetime, timezone

from luma.kb.vocab import XSD

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


def iri(value: str) -> str:
    """`<value>`; callers only pass IRIs minted from namespaces and slugs."""
    return f"<{value}>"


def string(value: str) -> str:
    return f'"{value.translate(_ESCAPES)}"'


def double(value: float) -> str:
    return f'"{float(value)!r}"^^<{XSD}double>'


def integer(value: int) -> str:
    return f'"{int(value)}"^^<{XSD}integer>'


def boolean(value: bool) -> str:
    return f'"{"true" if value else "false"}"^^<{XSD}boolean>'


def datetime_(value: datetime) -> str:
    """xsd:dateTime in UTC with a `Z`, so the text is the same whatever zone the value came in."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return f'"{value.isoformat()}Z"^^<{XSD}dateTime>'
    return f'"{value.isoformat()}"^^<{XSD}dateTime>'


class QuadWriter:
    """The triples one record projects to: its own facts, and descriptions of shared entities.

    Record facts go to the record's named graph. Shared entities (workloads, architectures,
    contracts, machine states, ...) have content-derived IRIs, so their descriptions are the
    same whichever record mentions them; they go to one entities graph, where repeats collapse
    instead of appearing once per record in union-graph queries.
    """

    __slots__ = ("graph", "entity_graph", "triples", "_record", "_entities", "_current")

    def __init__(self, graph: str, entity_graph: str):
        self.graph = graph
        self.entity_graph = entity_graph
        #: every (subject IRI, predicate IRI, object as an N-Quads term): what the shape check reads
        self.triples: list[tuple[str, str, str]] = []
        self._record: list[tuple[str, str, str]] = []
        self._entities: dict[str, list[tuple[str, str, str]]] = {}
        self._current: list[tuple[str, str, str]] | None = None

    def add(self, s: str, p: str, o: str) -> None:
        """Add `<s> <p> o` to the record graph (o is an already formatted term)."""
        t = (s, p, o)
        self.triples.append(t)
        self._record.append(t)

    def entity(self, iri: str) -> bool:
        """Start describing a shared entity; False if this record already described it."""
        if iri in self._entities:
            self._current = None
            return False
        self._current = self._entities[iri] = []
        return True

    def describe(self, s: str, p: str, o: str) -> None:
        """Add a triple of the entity opened by the last `entity()` call."""
        t = (s, p, o)
        self.triples.append(t)
        self._current.append(t)

    def data(self, seen: set[str] | None = None) -> bytes:
        """N-Quads; entities already in `seen` are skipped (and new ones added to it)."""
        g = f"<{self.graph}> .\n"
        e = f"<{self.entity_graph}> .\n"
        lines = [f"<{s}> <{p}> {o} {g}" for s, p, o in self._record]
        for iri, triples in self._entities.items():
            if seen is not None:
                if iri in seen:
                    continue
                seen.add(iri)
            lines += [f"<{s}> <{p}> {o} {e}" for s, p, o in triples]
        return "".join(lines).encode()
