"""Writing N-Quads terms directly as text.

The projection emits millions of quads for a large batch; formatting them as strings and
handing them to Oxigraph's bulk loader is several times faster than building term objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

import pyoxigraph as ox

from luma.kb.vocab import RDF, XSD

_TYPE = RDF + "type"

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


def iri(value: str) -> str:
    """`<value>`; callers only pass IRIs minted from namespaces and slugs (IriCheck checks them)."""
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


class Batch:
    """Shared entities already described by earlier records of one ingest (or replay) batch.

    Each entity is described (and shape-checked) once per batch; later records only refer to
    it. Its type is kept so that their sh:class checks still see what it is.
    """

    __slots__ = ("types",)

    def __init__(self) -> None:
        #: entity IRI -> its rdf:type (an N-Quads term)
        self.types: dict[str, str] = {}


class QuadWriter:
    """The triples one record projects to: its own facts, and descriptions of shared entities.

    Record facts go to the record's named graph. Shared entities (workloads, architectures,
    contracts, machine states, levels, ...) have content-derived IRIs, so their descriptions are
    the same whichever record mentions them; they go to one entities graph, where repeats
    collapse instead of appearing once per record in union-graph queries.
    """

    __slots__ = ("graph", "entity_graph", "batch", "triples", "known", "_record", "_entities", "_current")

    def __init__(self, graph: str, entity_graph: str, batch: Batch | None = None):
        self.graph = graph
        self.entity_graph = entity_graph
        self.batch = batch if batch is not None else Batch()
        #: every (subject IRI, predicate IRI, object as an N-Quads term): what the shape check reads
        self.triples: list[tuple[str, str, str]] = []
        #: entities this record refers to that an earlier record of the batch described: IRI -> type
        self.known: dict[str, str] = {}
        self._record: list[tuple[str, str, str]] = []
        self._entities: list[tuple[str, str, str]] = []

    def add(self, s: str, p: str, o: str) -> None:
        """Add `<s> <p> o` to the record graph (o is an already formatted term)."""
        t = (s, p, o)
        self.triples.append(t)
        self._record.append(t)

    def entity(self, iri: str, rdf_type: str) -> bool:
        """Start describing a shared entity of class `rdf_type` (an IRI); False if the batch
        already has it, in which case the caller skips its description."""
        types = self.batch.types
        term = types.get(iri)
        if term is not None:
            self.known[iri] = term
            return False
        term = types[iri] = f"<{rdf_type}>"
        self.describe(iri, _TYPE, term)
        return True

    def describe(self, s: str, p: str, o: str) -> None:
        """Add a triple to the description of the entity opened by the last `entity()` call."""
        t = (s, p, o)
        self.triples.append(t)
        self._entities.append(t)

    def data(self) -> bytes:
        """N-Quads of the record graph and of the entities first described by this record."""
        return self.record_data() + self.entity_data()

    def record_data(self) -> bytes:
        """N-Quads of the record's own graph."""
        g = f"<{self.graph}> .\n"
        return "".join([f"<{s}> <{p}> {o} {g}" for s, p, o in self._record]).encode()

    def entity_subjects(self) -> set[str]:
        """Every subject of the entity descriptions this record wrote (entities and their parts)."""
        return {t[0] for t in self._entities}

    def entity_data(self) -> bytes:
        """N-Quads of the shared entities this record described first in its batch."""
        e = f"<{self.entity_graph}> .\n"
        return "".join([f"<{s}> <{p}> {o} {e}" for s, p, o in self._entities]).encode()


class IriCheck:
    """Every IRI a batch's triples write, checked as Oxigraph's N-Quads parser would check it,
    each distinct IRI once.

    Oxigraph's loader re-validates every IRI it reads, ~600 a record: 15-20 % of the load's CPU
    (docs/benchmarks.md). With every IRI checked here first, the load may skip that
    (`bulk_load_nquads(..., checked=True)`): an IRI that passes `pyoxigraph.NamedNode` is
    absolute and holds no character that could end or break its N-Quads term. Literals need no
    check: `string()` escapes what N-Quads requires, the typed forms are built here from XSD
    constants, and a plain RDF document's terms come from Oxigraph's own strict parse.
    """

    __slots__ = ("_ok",)

    def __init__(self) -> None:
        self._ok: set[str] = set()

    def first_invalid(self, graph: str, triples: Iterable[tuple[str, str, str]]) -> str | None:
        """The first IRI among the graph's and the triples' that is not a valid absolute IRI, or None."""
        ok = self._ok
        if graph not in ok and not self._valid(graph):
            return graph
        last = None
        for s, p, o in triples:
            if s is not last:  # the projection writes a subject's triples together
                if s not in ok and not self._valid(s):
                    return s
                last = s
            if p not in ok and not self._valid(p):
                return p
            if o[0] == "<":
                if o not in ok and not self._valid(o[1:-1], o):
                    return o[1:-1]
            elif o[-1] == ">":  # a typed literal: its datatype IRI
                dt = o[o.rindex("^^<") + 3:-1]
                if dt not in ok and not self._valid(dt):
                    return dt
        return None

    def _valid(self, value: str, key: str | None = None) -> bool:
        try:
            ox.NamedNode(value)
        except ValueError:
            return False
        self._ok.add(key or value)
        return True

    def clear(self) -> None:
        """Forget the IRIs checked so far (a batch's chunk is loaded: keep memory flat)."""
        self._ok.clear()
