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
    """Collects the triples of one named graph; `data()` renders them as N-Quads."""

    __slots__ = ("graph", "triples")

    def __init__(self, graph: str):
        self.graph = graph
        #: (subject IRI, predicate IRI, object as an N-Quads term) -- the form the shape check reads.
        self.triples: list[tuple[str, str, str]] = []

    def add(self, s: str, p: str, o: str) -> None:
        """Add `<s> <p> o` (s and p are bare IRIs, o an already formatted term)."""
        self.triples.append((s, p, o))

    def data(self) -> bytes:
        g = f"<{self.graph}> .\n"
        return "".join([f"<{s}> <{p}> {o} {g}" for s, p, o in self.triples]).encode()
