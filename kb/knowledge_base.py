"""The knowledge base: ledger (commit point) + quad store (projection) kept in step.

Ingest = validate everything -> project and shape-check -> append to the ledger in one
transaction (the commit point) -> load the new graphs into the store -> advance the store's
watermark. A crash after the ledger commit is healed by `sync()` on the next open, which
replays every ledger record beyond the watermark; projection is idempotent, so replaying twice
is harmless.
"""

from __future__ import annotations

import gc
import getpass
import hashlib
import socket
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path

from luma.errors import StoreError
from luma.kb.store import access, pending, reconcile, sessions
from luma.kb.ingest import shacl
from luma.kb.records.dimensions import ontology_files, record_dimensions
from luma.kb.ingest.evidence_gate import MeasuredGate
from luma.kb.store.ledger import Ledger, LedgerEntry, NewRecord, check_text
from luma.kb.ingest.nquads import Batch
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.input_files import RECORD_FILE, read_bytes
from luma.kb.records.loader import LoadedRecord, iter_records
from luma.kb.records.pex_chain import SCHEMA_VERSION
from luma.kb.records.rdf_document import read_document, skolemised_triples
from luma.kb.store.partner_graphs import drop_retracted
from luma.kb.records.kinds import KINDS
from luma.kb.store import open_store
from luma.kb.store.base import QuadStore, parse_rdf
from luma.kb.vocab import LUMA, ONTOLOGY_GRAPH, RECORD_GRAPH, record_graph
from luma.privacy import make_private, private_umask
from luma.settings import Settings

_KB = "https://w3id.org/luma/id/kb"
_REPLAY_TYPES = {k.name: k.model_class() for k in KINDS}
#: Records validated and projected per chunk (the first chunk is smaller: the load starts sooner).
CHUNK_RECORDS = 25_000
FIRST_CHUNK_RECORDS = 2_000


@dataclass
class IngestReport:
    """What one ingest call did."""

    added: list[LoadedRecord] = field(default_factory=list)
    duplicates: list[LoadedRecord] = field(default_factory=list)
    quads_added: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def _timed_chunks(records: Iterable[LoadedRecord], spent: dict[str, float]) -> Iterator[list[LoadedRecord]]:
    """Chunks of records; the time spent reading and validating them goes to spent["validate"].
    The first chunk is small, so the background load starts early."""
    it = iter(records)
    size = FIRST_CHUNK_RECORDS
    while True:
        t = time.perf_counter()
        chunk = list(islice(it, size))
        spent["validate"] += time.perf_counter() - t
        if not chunk:
            return
        yield chunk
        size = CHUNK_RECORDS


@contextmanager
def _gc_paused():
    """No cyclic garbage collection during a batch: records and their projections are acyclic,
    and with ~10^6 live objects every full collection rescans them all (a third of the
    validation time at 100k records)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _BackgroundLoader:
    """Bulk loads on one background thread, one chunk at a time (Oxigraph's bulk loader
    releases the GIL, so projection goes on meanwhile). At most one chunk waits in memory."""

    def __init__(self, store: QuadStore):
        self.store = store
        self.quads = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="luma-bulk-load")
        self._last: Future | None = None

    def submit(self, data: bytes) -> None:
        self.wait()
        self.quads += data.count(b"\n")
        self._last = self._pool.submit(self.store.bulk_load_nquads, [data])

    def wait(self, raise_errors: bool = True) -> None:
        last, self._last = self._last, None
        if last is not None:
            try:
                last.result()
            except Exception:
                if raise_errors:
                    raise

    def close(self, raise_errors: bool = True) -> None:
        try:
            self.wait(raise_errors)
        finally:
            self._pool.shutdown(wait=True)


def default_submitter() -> str:
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError):
        return "unknown"


class KnowledgeBase:
    """One project's ledger and quad store."""

    def __init__(self, settings: Settings, *, store: QuadStore | None = None, ledger: Ledger | None = None):
        self.settings = settings
        self.ledger = ledger or Ledger(settings.db_url)
        self.store = store or open_store(settings.kb_url, settings)
        self.dimensions = record_dimensions(settings.home)
        #: The project lock this instance holds (embedded on-disk store), and for a reader that
        #: came while a writer worked, the writer's read snapshot it reads (kb/store/access.py).
        self._lock: access.ProjectLock | None = None
        self._lease: access.SnapshotLease | None = None

    @property
    def checker(self) -> shacl.ShapeChecker:
        """The compiled shapes (loaded on first write: read-only commands never need them)."""
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
            self.ledger.dispose()
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
        if pending.markers(self.settings.home):
            return True
        self.ledger.init()
        if self.watermark() < self.ledger.last_id():
            return True
        rows = self.store.select(f"SELECT ?h WHERE {{ <{_KB}> <{LUMA}ontologyHash> ?h }}", union=False)
        return not rows or rows[0]["h"] != self._ontology_digest()[0]

    # -- bookkeeping kept in the store's default graph (never exported) ----------------------

    def watermark(self) -> int:
        rows = self.store.select(f"SELECT ?n WHERE {{ <{_KB}> <{LUMA}projectedThrough> ?n }}", union=False)
        return int(rows[0]["n"]) if rows else 0

    def _set_meta(self, prop: str, literal: str) -> None:
        self.store.update(
            f"DELETE WHERE {{ <{_KB}> <{LUMA}{prop}> ?x }} ; INSERT DATA {{ <{_KB}> <{LUMA}{prop}> {literal} }}"
        )

    def _ontology_digest(self) -> tuple[str, list]:
        files = ontology_files(self.settings.home)
        return hashlib.sha256(b"".join(name.encode() + b"\0" + data for name, data in files)).hexdigest(), files

    def _ensure_ontology(self) -> None:
        digest, files = self._ontology_digest()
        rows = self.store.select(f"SELECT ?h WHERE {{ <{_KB}> <{LUMA}ontologyHash> ?h }}", union=False)
        if rows and rows[0]["h"] == digest:
            return
        # Skolemised (blank nodes numbered per file), so a rebuild exports the same bytes.
        lines = set()
        for i, (name, data) in enumerate(files):
            for line in skolemised_triples(parse_rdf(data, "turtle", name), f"{ONTOLOGY_GRAPH}/bnode/{i}-"):
                lines.add(line[:-2] + f"<{ONTOLOGY_GRAPH}> .\n")
        self.store.update(f"DROP SILENT GRAPH <{ONTOLOGY_GRAPH}>")
        self.store.load_nquads("".join(sorted(lines)).encode())
        self._set_meta("ontologyHash", f'"{digest}"')

    # -- the write path ---------------------------------------------------------------------

    def ingest(self, paths: Iterable[Path], submitter: str | None = None) -> IngestReport:
        """Validate and add record files, all or nothing."""
        with _gc_paused():
            records = iter_records([Path(p) for p in paths], self.settings.home, RECORD_FILE.under(self.settings))
            return self._commit(records, submitter or default_submitter())

    def ingest_records(self, records: Iterable[LoadedRecord], submitter: str | None = None) -> IngestReport:
        """Add records the caller read and validated, all or nothing: every gate of `ingest` but
        the reading (`luma partner add`; a sprint's Recorder, whose records' `source` is the file
        it wrote them to)."""
        with _gc_paused():
            return self._commit(records, submitter or default_submitter())

    def load_rdf(self, path: Path, fmt: str, evidence_class: str, submitter: str | None = None) -> IngestReport:
        """Add a plain RDF document as one record (its own named graph)."""
        data = read_bytes(path, RECORD_FILE.under(self.settings))  # untrusted: a regular file within the record limit
        rec_hash, doc = read_document(data, fmt, evidence_class, str(path))
        rec = LoadedRecord("rdf-document", doc, doc.model_dump_json(), rec_hash, str(path))
        return self._commit([rec], submitter or default_submitter())

    def _commit(self, records: Iterable[LoadedRecord], submitter: str) -> IngestReport:
        """Validate, project and shape-check chunk by chunk while earlier chunks load in the
        background; then the ledger commits (while the last chunk loads).

        A failure anywhere before the ledger commit drops whatever was loaded (kb/store/pending.py).
        """
        check_text("submitter", submitter)  # before anything loads, on every ledger backend
        report = IngestReport()
        spent = report.seconds = {"validate": 0.0, "project+shapes": 0.0, "ledger": 0.0, "kb": 0.0}
        now = datetime.now(timezone.utc).replace(microsecond=0)
        home = self.settings.home
        batch, checker = Batch(), self.checker
        seen: set[str] = set()
        loader: _BackgroundLoader | None = None
        marker = pending.PendingIngest(home)
        gate = MeasuredGate(self.ledger, {"dimensions": self.dimensions, "home": home})
        try:
            for chunk in _timed_chunks(records, spent):
                t0 = time.perf_counter()
                fresh = []
                for rec in chunk:
                    (report.duplicates if rec.content_hash in seen else fresh).append(rec)
                    seen.add(rec.content_hash)
                existing = self.ledger.existing_hashes(r.content_hash for r in fresh)
                report.duplicates += [r for r in fresh if r.content_hash in existing]
                fresh = [r for r in fresh if r.content_hash not in existing]
                data: list[bytes] = []
                subjects: set[str] = set()
                for rec in fresh:
                    check_text("source", rec.source, source=rec.source[:200])
                    gate.check(rec)  # `measured` is earned: a trusted signature, trials that agree
                    w = project(rec.model, LedgerMeta(rec.content_hash, submitter, now), self.dimensions, batch)
                    checker.check(w.triples, rec.source, w.known)
                    data.append(w.data())
                    subjects |= w.entity_subjects()
                report.added += fresh
                if fresh:
                    if loader is None:
                        home.mkdir(parents=True, exist_ok=True)
                        loader = _BackgroundLoader(self.store)
                    marker.note([r.content_hash for r in fresh], sorted(subjects))  # before it loads
                    loader.submit(b"".join(data))
                spent["project+shapes"] += time.perf_counter() - t0
            t1 = time.perf_counter()
            self.ledger.append(
                [
                    NewRecord(
                        r.kind, r.content_hash, r.evidence_class, submitter, r.source, SCHEMA_VERSION, r.payload
                    )
                    for r in report.added
                ],
                at=now,
            )  # the commit point
            t2 = time.perf_counter()
        except BaseException:
            if loader is not None:
                loader.close(raise_errors=False)
                try:
                    marker.rollback(self.store, self.ledger)
                except Exception:
                    marker.release()  # the marker stays for the next open; the first error is the news
            raise
        if loader is not None:
            marker.finish()
            # From here on the batch is committed: a failure below is healed by the next sync.
            loader.close()
        # sync() only has to advance the watermark, unless another writer's records came between.
        report.quads_added = (loader.quads if loader else 0) + self.sync({r.content_hash: b"" for r in report.added})
        spent.update({"ledger": t2 - t1, "kb": time.perf_counter() - t2})
        return report

    # -- projection replay --------------------------------------------------------------------

    def sync(self, projected: dict[str, bytes] | None = None) -> int:
        """Load every ledger record beyond the watermark; return the number of quads loaded.

        `projected`: by content hash, what is still to load for records an ingest already
        projected (b"" when it loaded them itself); the others are re-projected.
        """
        self._ensure_ontology()
        mark = self.watermark()
        last = mark
        quads = 0
        batch = Batch()
        vouched: list[tuple[str, str]] = []  # (hash, kind) of every record the watermark passes

        def pending() -> Iterator[tuple[int, bytes]]:
            if projected:
                # Right after an ingest the batch is already projected: read ids, not payloads,
                # unless another writer's records also lie beyond the watermark.
                light = self.ledger.hashes_after(mark)
                if all(h in projected for _, h, _ in light):
                    for i, h, kind in light:
                        vouched.append((h, kind))
                        yield i, projected[h]
                    return
            for entry in self.ledger.after(mark):
                vouched.append((entry.content_hash, entry.kind))
                data = (projected or {}).get(entry.content_hash)
                yield entry.id, data if data is not None else self._reproject(entry, batch)

        def chunks() -> Iterator[bytes]:
            nonlocal last, quads
            buf: list[bytes] = []
            for entry_id, data in pending():
                quads += data.count(b"\n")
                buf.append(data)
                last = entry_id
                if len(buf) >= CHUNK_RECORDS:
                    yield b"".join(buf)
                    buf = []
            if buf:
                yield b"".join(buf)

        self.store.bulk_load_nquads(chunks())
        drop_retracted(self.store)  # a partner's removed records stay out, after a rebuild too
        quads += self._reload_missing(vouched)
        if last != mark:
            self._set_meta("projectedThrough", str(last))
        return quads

    def _reload_missing(self, vouched: list[tuple[str, str]]) -> int:
        """Load again, from the ledger, the records about to pass the watermark whose graph the
        store lacks (kb/store/reconcile.py); return the quads loaded."""
        missing = reconcile.missing_records(self.store, vouched)
        if not missing:
            return 0
        batch = Batch()
        data = b"".join(self._reproject(e, batch) for e in self.ledger.entries(missing))
        self.store.bulk_load_nquads([data])
        still = reconcile.missing_records(self.store, [(h, k) for h, k in vouched if h in set(missing)])
        if still:
            raise StoreError(f"{len(still)} record graph(s) did not load (first: {still[0][:16]}); "
                             "run `luma kb rebuild`")
        return data.count(b"\n")

    def _reproject(self, entry: LedgerEntry, batch: Batch) -> bytes:
        model_cls = _REPLAY_TYPES.get(entry.kind)
        if model_cls is None:
            raise StoreError(f"ledger record {entry.id} has unknown kind {entry.kind!r}; upgrade luma")
        model = model_cls.model_validate_json(
            entry.payload, context={"dimensions": self.dimensions, "home": self.settings.home}
        )
        meta = LedgerMeta(entry.content_hash, entry.submitter, entry.ingested_at)
        return project(model, meta, self.dimensions, batch).data()

    def rebuild(self) -> int:
        """Recreate the store from the ledger alone; return the quads loaded."""
        self.store.clear()
        return self.sync()

    # -- reading --------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Counts that describe the KB: quads, graphs, records by kind and evidence class."""
        rows = self.store.select(
            "SELECT (COUNT(DISTINCT ?g) AS ?graphs) (COUNT(*) AS ?quads) WHERE { GRAPH ?g { ?s ?p ?o } "
            f'FILTER(STRSTARTS(STR(?g), "{RECORD_GRAPH}")) }}',
            union=False,
        )
        return {
            "record_graphs": int(rows[0]["graphs"]),
            "record_quads": int(rows[0]["quads"]),
            "quads": self.store.count(),
            "ledger_records": self.ledger.last_id(),
            "watermark": self.watermark(),
            "by_kind_and_evidence": {f"{k}/{e}": n for (k, e), n in sorted(self.ledger.count_by().items())},
            "backend": self.store.backend,
        }

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
