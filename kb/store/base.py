"""The store contract: what the knowledge base needs from any quad store.

Two families implement it: an embedded Oxigraph store (on disk or in memory) and any SPARQL 1.1
endpoint (Query, Update and Graph Store protocols). The same contract test suite runs against
each registered backend.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from luma.errors import QueryError, RdfSyntaxError, StoreError, UnknownName

#: Export / load formats by CLI name: (pyoxigraph format, carries named graphs).
RDF_FORMATS: dict[str, tuple[ox.RdfFormat, bool]] = {
    "nquads": (ox.RdfFormat.N_QUADS, True),
    "trig": (ox.RdfFormat.TRIG, True),
    "turtle": (ox.RdfFormat.TURTLE, False),
    "ntriples": (ox.RdfFormat.N_TRIPLES, False),
    "jsonld": (ox.RdfFormat.JSON_LD, True),
}

RESULT_FORMATS = {
    "json": ox.QueryResultsFormat.JSON,
    "csv": ox.QueryResultsFormat.CSV,
    "tsv": ox.QueryResultsFormat.TSV,
    "xml": ox.QueryResultsFormat.XML,
}


@dataclass(frozen=True)
class QueryLimits:
    """What one isolated query may use: seconds, bytes of memory, bytes of answer; and whether
    it may run at all without the network sandbox (`Settings.require_sandbox`)."""

    timeout: float | None
    memory_bytes: int
    answer_bytes: int
    require_sandbox: bool = False


def answer_too_large(limits: QueryLimits) -> QueryError:
    """The error for an answer over `limits.answer_bytes`."""
    return QueryError(answer_message(limits))


def answer_message(limits: QueryLimits) -> str:
    """What a query whose answer grew over `limits.answer_bytes` is told."""
    return (f"the answer is larger than {mib(limits.answer_bytes)} and was stopped "
            "(LUMA_QUERY_MAX_ANSWER_BYTES); narrow the query or use LIMIT")


def mib(n: int) -> str:
    """`n` bytes in words: 256 MiB, 4 GiB."""
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


def rdf_format(name: str) -> tuple[ox.RdfFormat, bool]:
    try:
        return RDF_FORMATS[name]
    except KeyError:
        raise UnknownName(f"unknown RDF format {name!r} (known: {', '.join(RDF_FORMATS)})") from None


@dataclass(frozen=True)
class QueryOutput:
    """A serialised query answer: `kind` is select, ask or graph. The answer is in `body`, or,
    for a query run in a child process (kb/store/isolated_query.py), spooled to `file`."""

    kind: str
    media_type: str
    body: bytes = b""
    file: Path | None = None
    #: Whether the answer is known to be whole (written by an engine that finished); an
    #: endpoint's may have broken off after an HTTP 200 and must be parsed to be trusted.
    complete: bool = True

    def data(self) -> bytes:
        """The whole answer in memory."""
        return self.file.read_bytes() if self.file is not None else self.body

    def size(self) -> int:
        return self.file.stat().st_size if self.file is not None else len(self.body)

    def write_to(self, stream) -> None:
        """Copy the answer to a binary stream, 1 MiB at a time."""
        if self.file is None:
            stream.write(self.body)
            return
        with open(self.file, "rb") as fh:
            while chunk := fh.read(1 << 20):
                stream.write(chunk)

    def json(self) -> dict:
        """The SPARQL 1.1 JSON results (select/ask only); a truncated answer raises StoreError."""
        try:
            return json.loads(self.data())
        except ValueError:
            raise StoreError("the store's answer is not complete SPARQL JSON (truncated?)") from None


class QuadStore(ABC):
    """One quad store. Writes go to named graphs; the default graph holds only bookkeeping."""

    #: A short name for messages and benchmarks.
    backend = "abstract"

    @abstractmethod
    def query(self, sparql: str, *, union: bool = True, results: str = "json", timeout: float | None = None,
              named_graphs: list[str] | None = None, default_graphs: list[str] | None = None) -> QueryOutput:
        """Run a read query. `union` makes the default graph the union of all named graphs;
        `named_graphs` restricts the graphs `GRAPH ?g` ranges over (the protocol's named-graph-uri);
        `default_graphs` makes the default graph the union of these graphs only (the protocol's
        default-graph-uri; `union` is then ignored). Scoped queries (kb/query/scope.py) use both."""

    def query_bounded(self, sparql: str, limits, spool: Path, *, results: str = "json", union: bool = True,
                      default_graphs: list[str] | None = None, named_graphs: list[str] | None = None) -> QueryOutput:
        """Run an untrusted read query within `limits` (QueryLimits: seconds,
        memory, answer bytes), spooling the answer under `spool` where the backend can. This
        default bounds the time and checks the answer's size afterwards; the embedded on-disk
        store and the endpoint store do better (a child process; a streamed, capped download)."""
        out = self.query(sparql, union=union, results=results, timeout=limits.timeout,
                         default_graphs=default_graphs, named_graphs=named_graphs)
        if out.size() > limits.answer_bytes:
            raise answer_too_large(limits)
        return out

    def construct_to_file(self, sparql: str, path: Path, *, union: bool = True,
                          named_graphs: list[str] | None = None) -> None:
        """Run a CONSTRUCT and write its answer, N-Triples, to `path`. This default holds the
        answer in memory on the way; the embedded and endpoint stores stream it to the file."""
        path.write_bytes(self.query(sparql, union=union, named_graphs=named_graphs).body)

    def load_nquads_file(self, path: Path) -> None:
        """Add the N-Quads of a file fast (as `bulk_load_nquads`), 64 MiB at a time: Oxigraph's
        bulk loader holds what it is given while it sorts it (the qualification rule's 485 MB at
        300k chains: 1.46 GB peak loaded at once, 0.42 GB in 64 MiB blocks, 18 % slower)."""
        with open(path, "rb") as f:
            self.bulk_load_nquads(line_blocks(f))

    @abstractmethod
    def update(self, sparql: str) -> None:
        """Run a SPARQL update atomically."""

    @abstractmethod
    def bulk_load_nquads(self, chunks: Iterable[bytes], *, checked: bool = False) -> None:
        """Add N-Quads fast. Not atomic across chunks: the ledger is the commit point.
        `checked`: the caller validated every IRI in them (luma.kb.ingest.nquads.IriCheck), so a
        store whose parser would validate each again may skip that."""

    @abstractmethod
    def load_nquads(self, data: bytes) -> None:
        """Add N-Quads atomically (small batches)."""

    @abstractmethod
    def iter_quads(self) -> Iterator[ox.Quad]:
        """Every quad of every named graph (not the default graph)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove everything."""

    def close(self) -> None:
        """Release the store (flush, unlock)."""

    # -- conveniences written once on top of the primitives ---------------------------------

    def select(self, sparql: str, *, union: bool = True) -> list[dict[str, str]]:
        """Rows of a SELECT as {variable: lexical value}."""
        answer = self.query(sparql, union=union).json()
        return [{k: v["value"] for k, v in row.items()} for row in answer["results"]["bindings"]]

    def existing_graphs(self, graphs: list[str]) -> set[str]:
        """The named graphs among `graphs` that hold at least one quad."""
        found: set[str] = set()
        for i in range(0, len(graphs), 500):
            values = " ".join(f"<{g}>" for g in graphs[i:i + 500])
            rows = self.select(f"SELECT ?g WHERE {{ VALUES ?g {{ {values} }} FILTER EXISTS {{ GRAPH ?g {{ ?s ?p ?o }} }} }}",
                               union=False)
            found.update(r["g"] for r in rows)
        return found

    def count(self, graph_prefix: str | None = None) -> int:
        """Number of quads in named graphs (optionally only graphs whose IRI starts with a prefix)."""
        filt = f'FILTER(STRSTARTS(STR(?g), "{graph_prefix}"))' if graph_prefix else ""
        rows = self.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} {filt} }}", union=False)
        return int(rows[0]["n"])

    def dump(self, fmt: str, *, sort: bool = False) -> bytes:
        """Serialise every named graph; graph-less formats get the union of the graphs."""
        oxfmt, has_graphs = rdf_format(fmt)
        quads: Iterable = self.iter_quads()
        if not has_graphs:
            quads = (ox.Triple(q.subject, q.predicate, q.object) for q in quads)
        data = ox.serialize(quads, format=oxfmt) or b""
        if sort and fmt in ("nquads", "ntriples"):
            lines = sorted(set(data.splitlines(keepends=True)))
            data = b"".join(lines)
        return data


def parse_rdf(data: bytes, fmt: str, source: str, base_iri: str | None = None) -> list[ox.Quad]:
    """Parse RDF fully before anything is written; errors name the file, line and column."""
    oxfmt, _ = rdf_format(fmt)
    try:
        return list(ox.parse(data, format=oxfmt, base_iri=base_iri, without_named_graphs=False))
    except SyntaxError as exc:
        raise RdfSyntaxError(f"invalid {fmt}: {exc}", source=source) from None
    except (ValueError, OSError) as exc:
        raise RdfSyntaxError(f"cannot read {fmt}: {exc}", source=source) from None


def line_blocks(f, size: int = 64 << 20) -> Iterator[bytes]:
    """A binary file's bytes in blocks of about `size`, each ending at a line end (N-Quads and
    N-Triples lines stay whole); a last line without its line break gets one."""
    rest = b""
    while True:
        block = f.read(size)
        if not block:
            break
        block = rest + block
        cut = block.rfind(b"\n") + 1
        rest = block[cut:]
        if cut:
            yield block[:cut]
    if rest:
        yield rest + b"\n"
