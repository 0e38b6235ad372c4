"""The knowledge base: ledger (commit point) + quad store (projection) kept in step.

Opening, the read side and the bookkeeping live here; the write path (ingest, commit, replay of
the ledger into the store) is kb/ingest/write.py, imported by the methods that write. So a
command that only reads (`luma kb stats`, a query) opens the store and reads a SQLite ledger
without pydantic's record models, the projection, the shapes or SQLAlchemy: a fraction of the
start-up (issue 33).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from luma.errors import StoreError
from luma.kb.ingest.ingest_report import IngestReport, default_submitter  # noqa: F401 (part of this module's API)
from luma.kb.records.dimensions import ontology_files, record_dimensions
from luma.kb.store import access, ledger_read, open_store, pending, sessions
from luma.kb.store.base import QuadStore
from luma.kb.store.ledger_fields import missing as ledger_missing, sqlite_path
from luma.kb.store.partner_graphs import named_graphs
from luma.kb.vocab import LUMA, RECORD_GRAPH, record_graph
from luma.privacy import make_private, private_umask
from luma.settings import Settings

if TYPE_CHECKING:
    from luma.kb.ingest import shacl
    from luma.kb.records.loader import LoadedRecord
    from luma.kb.store.ledger import Ledger

_KB = "https://w3id.org/luma/id/kb"


class KnowledgeBase:
    """One project's ledger and quad store."""

    def __init__(self, settings: Settings, *, store: QuadStore | None = None, ledger: Ledger | None = None):
        self.settings = settings
        self._ledger = ledger
        self._dimensions: dict | None = None
        self.store = store or open_store(settings.kb_url, settings)
        #: The project lock this instance holds (embedded on-disk store), and for a reader that
        #: came while a writer worked, the writer's read snapshot it reads (kb/store/access.py).
        self._lock: access.ProjectLock | None = None
        self._lease: access.SnapshotLease | None = None

    @property
    def ledger(self) -> Ledger:
        """The ledger (SQLAlchemy), made on first use: readers of a SQLite ledger read it through
        `luma.kb.store.ledger_read` and never make it."""
        if self._ledger is None:
            from luma.kb.store.ledger import Ledger  # reason: SQLAlchemy loads only where the ledger is written

            self._ledger = Ledger(self.settings.db_url)
        return self._ledger

    @property
    def dimensions(self) -> dict:
        """The dimension registry of this project (ontology + its own dimensions), for the write path."""
        if self._dimensions is None:
            self._dimensions = record_dimensions(self.settings.home)
        return self._dimensions

    @property
    def checker(self) -> shacl.ShapeChecker:
        """The compiled shapes (loaded on first write: read-only commands never need them)."""
        from luma.kb.ingest import shacl  # reason: the compiled shapes load on the first write only

        return shacl.default_checker()

    @property
    def snapshot_writer(self) -> dict | None:
        """For a reader reading a writer's snapshot: who writes (pid, command, since); else None."""
        return self._lease.writer if self._lease is not None else None

    @classmethod
    def open(cls, settings: Settings, *, sync: bool = True, read_only: bool = False,
             wait: float | None = None) -> "KnowledgeBase":
        """Open (creating on first use) and catch the store up with the ledger.

        On the embedded on-disk store a writer waits up to `wait` seconds (default: settings.wait,
        else 0) for the project lock; a reader (`read_only`) never writes, reads concurrently with
        other readers, and reads a running writer's snapshot (kb/store/access.py)."""
        # SQLite and RocksDB make their own files, long after this: owner-only through the umask.
        private_umask()
        if settings.kb_url.startswith("oxigraph:") or settings.db_url.startswith("sqlite:"):
            make_private(settings.home)
        path = Path(settings.kb_url.split(":", 1)[1]) if settings.kb_url.startswith("oxigraph:") else None
        if path is None:
            kb = cls(settings)
            kb._catch_up(sync)
            return kb
        if read_only:
            return sessions.open_reader(cls, settings, path, settings.wait if wait is None else wait)
        return sessions.open_writer(cls, settings, path, (settings.wait or 0.0) if wait is None else wait, sync)

    def _catch_up(self, sync: bool) -> None:
        self.ledger.init()
        # An ingest killed before its ledger commit leaves speculative record graphs behind.
        pending.recover(self.settings.home, self.store, ledger=self.ledger)
        if sync:
            self.sync()

    def close(self) -> None:
        try:
            self.store.close()
            if self._ledger is not None:
                self._ledger.dispose()
        finally:
            if self._lease is not None:
                self._lease.release()
                self._lease = None
            if self._lock is not None:
                if self._lock.exclusive:
                    access.sweep(self.settings.home)  # this writer's snapshot, unless a reader holds it
                self._lock.release()
                self._lock = None

    def __enter__(self) -> "KnowledgeBase":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def publish_snapshot(self) -> None:
        """Readers that come from now on read what this writer has committed so far, not the
        state it opened on (for a writer that stays open across commits: a recording sprint).
        Nothing to do for a reader or an endpoint store (kb/store/access.py)."""
        if self._lock is not None and self._lock.exclusive:
            access.publish_snapshot(self.store.raw, self.settings.home)

    def _needs_repair(self) -> bool:
        """Whether a writer must open the store first: an abandoned ingest's marker, ledger
        records beyond the watermark, or an ontology the store does not hold yet."""
        if pending.markers(self.settings.home) or ledger_missing(self.settings.db_url):
            return True
        if sqlite_path(self.settings.db_url) is None:  # a server ledger makes its table on a first open
            self.ledger.init()
        if self.watermark() < self._ledger_last_id():
            return True
        return self.stored_ontology_hash() != self.ontology_digest()[0]

    # -- bookkeeping kept in the store's default graph (never exported) ----------------------

    def watermark(self) -> int:
        rows = self.store.select(f"SELECT ?n WHERE {{ <{_KB}> <{LUMA}projectedThrough> ?n }}", union=False)
        return int(rows[0]["n"]) if rows else 0

    def stored_ontology_hash(self) -> str | None:
        """The digest of the ontology files the store holds (None before the first load)."""
        rows = self.store.select(f"SELECT ?h WHERE {{ <{_KB}> <{LUMA}ontologyHash> ?h }}", union=False)
        return rows[0]["h"] if rows else None

    def set_meta(self, prop: str, literal: str) -> None:
        """Replace one bookkeeping value of the store's default graph (watermark, ontology hash)."""
        self.store.update(
            f"DELETE WHERE {{ <{_KB}> <{LUMA}{prop}> ?x }} ; INSERT DATA {{ <{_KB}> <{LUMA}{prop}> {literal} }}"
        )

    def ontology_digest(self) -> tuple[str, list]:
        """(SHA-256 of the project's ontology files, the files as (name, bytes))."""
        files = ontology_files(self.settings.home)
        return hashlib.sha256(b"".join(name.encode() + b"\0" + data for name, data in files)).hexdigest(), files

    # -- the write path (kb/ingest/write.py) -------------------------------------------------

    @staticmethod
    def _write():
        from luma.kb.ingest import write  # reason: the write path loads only for a command that writes

        return write

    def ingest(self, paths: Iterable[Path], submitter: str | None = None) -> IngestReport:
        """Validate and add record files, all or nothing."""
        return self._write().ingest_files(self, paths, submitter)

    def ingest_records(self, records: Iterable[LoadedRecord], submitter: str | None = None) -> IngestReport:
        """Add records the caller read and validated, all or nothing: every gate of `ingest` but
        the reading (`luma partner add`; a sprint's Recorder, whose records' `source` is the file
        it wrote them to)."""
        return self._write().ingest_records(self, records, submitter)

    def load_rdf(self, path: Path, fmt: str, evidence_class: str, submitter: str | None = None) -> IngestReport:
        """Add a plain RDF document as one record (its own named graph)."""
        return self._write().load_rdf(self, path, fmt, evidence_class, submitter)

    def sync(self, projected: dict[str, bytes] | None = None) -> int:
        """Load every ledger record beyond the watermark; return the number of quads loaded.

        `projected`: by content hash, what is still to load for records an ingest already
        projected (b"" when it loaded them itself); the others are re-projected.
        """
        return self._write().sync(self, projected)

    def rebuild(self) -> int:
        """Recreate the store from the ledger alone; return the quads loaded."""
        self.store.clear()
        return self.sync()

    # -- reading --------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Counts that describe the KB: quads, graphs, records by kind and evidence class."""
        # Record quads = all quads less those of the few other graphs (ontology, entities, derived,
        # partners), each counted through its own index: filtering every quad on its graph's IRI
        # decoded 19 M strings (34 s at 100k chains, against ~3 s this way).
        graphs = named_graphs(self.store)
        quads = self.store.count()
        others = sum(self._graph_size(g) for g in graphs if not g.startswith(RECORD_GRAPH))
        return {
            "record_graphs": sum(1 for g in graphs if g.startswith(RECORD_GRAPH)),
            "record_quads": quads - others,
            "quads": quads,
            "ledger_records": self._ledger_last_id(),
            "watermark": self.watermark(),
            "by_kind_and_evidence": {f"{k}/{e}": n for (k, e), n in sorted(self._ledger_counts().items())},
            "backend": self.store.backend,
        }

    def _graph_size(self, graph: str) -> int:
        rows = self.store.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}", union=False)
        return int(rows[0]["n"])

    def _ledger_last_id(self) -> int:
        last = ledger_read.last_id(self.settings.db_url)
        return self.ledger.last_id() if last is None else last

    def _ledger_counts(self) -> dict[tuple[str, str], int]:
        counts = ledger_read.count_by(self.settings.db_url)
        return self.ledger.count_by() if counts is None else counts

    def rdflib_dataset(self):
        """The rdflib API over the embedded store (oxrdflib). For reading and small edits only:
        rdflib's own SPARQL engine is orders of magnitude slower than `store.query` (DESIGN §9)."""
        import rdflib

        raw = getattr(self.store, "raw", None)
        if raw is None:
            raise StoreError(f"the rdflib view needs the embedded store, not {self.store.backend}")
        from oxrdflib import OxigraphStore

        return rdflib.Dataset(store=OxigraphStore(store=raw), default_union=True)

    def graph_of(self, content_hash: str) -> str:
        return record_graph(content_hash)


def open_kb(home: str | Path | None = None) -> KnowledgeBase:
    """The Python entry point, as the `luma` command is the shell's: read the environment once
    (`Settings.from_env`; `home` wins over LUMA_HOME) and open that project."""
    return KnowledgeBase.open(Settings.from_env(home=home))
