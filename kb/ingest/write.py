"""The knowledge base's write path: validate, gate, project and shape-check records, load them,
commit them to the ledger, and replay the ledger into the store (`sync`).

`luma.kb.knowledge_base.KnowledgeBase` calls these for its writing methods and imports this
module only then: it brings pydantic's record models, the projection, the shapes, the
measured-evidence gate and SQLAlchemy, which a command that only reads never needs. Every `kb`
argument is that KnowledgeBase; this module does not import it, not even for type checking (the
import graph would then hold a cycle).

Ingest = validate everything -> project and shape-check -> append to the ledger in one
transaction (the commit point) -> load the new graphs into the store -> advance the store's
watermark. A crash after the ledger commit is healed by `sync()` on the next open, which
replays every ledger record beyond the watermark; projection is idempotent, so replaying twice
is harmless.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path

from luma.errors import RecordError, StoreError
from luma.kb.ingest.evidence_gate import MeasuredGate
from luma.kb.ingest.ingest_report import IngestReport, default_submitter
from luma.kb.ingest.nquads import Batch, IriCheck, QuadWriter
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.input_files import RECORD_FILE, read_bytes
from luma.kb.records.kinds import BY_NAME
from luma.kb.records.loader import LoadedRecord, RecordsLeft, iter_records
from luma.kb.records.pex_chain import SCHEMA_VERSION
from luma.kb.records.rdf_document import read_document, skolemised_triples
from luma.kb.store import pending, reconcile
from luma.kb.store.base import QuadStore, parse_rdf
from luma.kb.store.ledger import LedgerEntry, NewRecord
from luma.kb.store.ledger_fields import check_text
from luma.kb.store.partner_graphs import drop_retracted
from luma.kb.vocab import ONTOLOGY_GRAPH

#: Records validated and projected per chunk (the first chunk is smaller: the load starts sooner).
#: Each chunk is one bulk load. Smaller chunks shorten the last load (the one after the Python
#: work ends) and the peak memory, but each load into a growing store makes RocksDB compact more:
#: at 100k records 25,000 took 356 s (623 CPU-s), 10,000 378 s (686), 5,000 383 s (693), though
#: 5,000 was the fastest at 20k; doubling the first chunks up to 25,000 (2k, 4k, 8k, 16k) cost
#: 329 s against 302 s (docs/benchmarks.md, 2026-12-07).
CHUNK_RECORDS = 25_000
FIRST_CHUNK_RECORDS = 2_000
#: The smallest chunk of the tapering end (see `chunk_size`).
LAST_CHUNK_RECORDS = 2_000


def chunk_size(done: int, left: int | None) -> int:
    """How many records the next chunk takes, after `done` chunks with `left` records still to
    come (None: not known yet). The first chunk is small, so the background load starts early.
    Once fewer than a full chunk are left, each chunk takes half of them (down to
    LAST_CHUNK_RECORDS): the load still running when the Python work ends is then a small one,
    not a whole chunk loading on its own while nothing else runs (at 100k: 1.7 s after the
    Python work instead of 36 s, 302 s instead of 312 s in all)."""
    if done == 0:
        return FIRST_CHUNK_RECORDS
    if left is None or left >= CHUNK_RECORDS:
        return CHUNK_RECORDS
    return max(min(LAST_CHUNK_RECORDS, CHUNK_RECORDS), (left + 1) // 2)


def _timed_chunks(records: Iterable[LoadedRecord], spent: dict[str, float],
                  left: RecordsLeft | None = None) -> Iterator[list[LoadedRecord]]:
    """Chunks of records (`chunk_size`); the time spent reading and validating them goes to
    spent["validate"]."""
    it = iter(records)
    done = 0
    while True:
        t = time.perf_counter()
        chunk = list(islice(it, chunk_size(done, left.count if left is not None else None)))
        spent["validate"] += time.perf_counter() - t
        if not chunk:
            return
        yield chunk
        done += 1


@contextmanager
def _gc_paused():
    """No cyclic garbage collection during a batch: records and their projections are acyclic,
    and with ~10^6 live objects every full collection rescans them all (a third of the
    validation time at 100k records). On the way out, what the batch left alive moves to the
    oldest generation unscanned (freeze, then unfreeze): enabling the collector with it all in
    the youngest made the next allocation scan every one of them at once (1.8 s at 20k records,
    after the last quad had loaded; it grows with the batch). Cycles among them are still found
    by the next full collection."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
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
        # Every IRI in `data` was checked (IriCheck): the store need not check them again.
        self._last = self._pool.submit(self.store.bulk_load_nquads, [data], checked=True)

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


def ensure_ontology(kb) -> None:
    """Load the project's ontology files into the ontology graph, unless the store holds these already."""
    digest, files = kb.ontology_digest()
    if kb.stored_ontology_hash() == digest:
        return
    # Skolemised (blank nodes numbered per file), so a rebuild exports the same bytes.
    lines = set()
    for i, (name, data) in enumerate(files):
        for line in skolemised_triples(parse_rdf(data, "turtle", name), f"{ONTOLOGY_GRAPH}/bnode/{i}-"):
            lines.add(line[:-2] + f"<{ONTOLOGY_GRAPH}> .\n")
    kb.store.update(f"DROP SILENT GRAPH <{ONTOLOGY_GRAPH}>")
    kb.store.load_nquads("".join(sorted(lines)).encode())
    kb.set_meta("ontologyHash", f'"{digest}"')


def ingest_files(kb, paths: Iterable[Path], submitter: str | None = None) -> IngestReport:
    """Validate and add record files, all or nothing."""
    with _gc_paused():
        left = RecordsLeft()
        records = iter_records([Path(p) for p in paths], kb.settings.home, RECORD_FILE.under(kb.settings), left)
        return commit(kb, records, submitter or default_submitter(), left)


def ingest_records(kb, records: Iterable[LoadedRecord], submitter: str | None = None) -> IngestReport:
    """Add records the caller read and validated, all or nothing: every gate of `ingest` but
    the reading (`luma partner add`; a sprint's Recorder, whose records' `source` is the file
    it wrote them to)."""
    with _gc_paused():
        return commit(kb, records, submitter or default_submitter())


def load_rdf(kb, path: Path, fmt: str, evidence_class: str, submitter: str | None = None) -> IngestReport:
    """Add a plain RDF document as one record (its own named graph)."""
    data = read_bytes(path, RECORD_FILE.under(kb.settings))  # untrusted: a regular file within the record limit
    rec_hash, doc = read_document(data, fmt, evidence_class, str(path))
    rec = LoadedRecord("rdf-document", doc, doc.model_dump_json(), rec_hash, str(path))
    return commit(kb, [rec], submitter or default_submitter())


def _check_iris(iris: IriCheck, w: QuadWriter, source: str) -> None:
    """Every IRI the record projects to is valid (its chunk then loads without the store
    checking them again); a record that projects an invalid one is refused before anything loads."""
    bad = iris.first_invalid(w.graph, w.triples)
    if bad is None:
        bad = iris.first_invalid(w.entity_graph, ())
    if bad is not None:
        raise RecordError(f"the record projects to an invalid IRI {bad[:200]!r}; nothing was loaded", source=source)


def commit(kb, records: Iterable[LoadedRecord], submitter: str, left: RecordsLeft | None = None) -> IngestReport:
    """Validate, project and shape-check chunk by chunk while earlier chunks load in the
    background; then the ledger commits (while the last chunk loads). `left`: how many of
    `records` are still to come, where the reader knows (the end's chunks taper by it).

    A failure anywhere before the ledger commit drops whatever was loaded (kb/store/pending.py).
    """
    check_text("submitter", submitter)  # before anything loads, on every ledger backend
    report = IngestReport()
    spent = report.seconds = {"validate": 0.0, "project+shapes": 0.0, "ledger": 0.0, "kb": 0.0}
    now = datetime.now(timezone.utc).replace(microsecond=0)
    home = kb.settings.home
    batch, checker, iris = Batch(), kb.checker, IriCheck()
    seen: set[str] = set()
    loader: _BackgroundLoader | None = None
    marker = pending.PendingIngest(home)
    gate = MeasuredGate(kb.ledger, {"dimensions": kb.dimensions, "home": home})
    try:
        for chunk in _timed_chunks(records, spent, left):
            t0 = time.perf_counter()
            fresh = []
            for rec in chunk:
                (report.duplicates if rec.content_hash in seen else fresh).append(rec)
                seen.add(rec.content_hash)
            existing = kb.ledger.existing_hashes(r.content_hash for r in fresh)
            report.duplicates += [r for r in fresh if r.content_hash in existing]
            fresh = [r for r in fresh if r.content_hash not in existing]
            data: list[bytes] = []
            subjects: set[str] = set()
            iris.clear()
            for rec in fresh:
                check_text("source", rec.source, source=rec.source[:200])
                gate.check(rec)  # `measured` is earned: a trusted signature, trials that agree
                w = project(rec.model, LedgerMeta(rec.content_hash, submitter, now), kb.dimensions, batch)
                checker.check(w.triples, rec.source, w.known)
                _check_iris(iris, w, rec.source)
                data.append(w.data())
                subjects |= w.entity_subjects()
            report.added += fresh
            if fresh:
                if loader is None:
                    home.mkdir(parents=True, exist_ok=True)
                    loader = _BackgroundLoader(kb.store)
                marker.note([r.content_hash for r in fresh], sorted(subjects))  # before it loads
                loader.submit(b"".join(data))
            spent["project+shapes"] += time.perf_counter() - t0
        t1 = time.perf_counter()
        kb.ledger.append(
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
                marker.rollback(kb.store, kb.ledger)
            except Exception:
                marker.release()  # the marker stays for the next open; the first error is the news
        raise
    if loader is not None:
        marker.finish()
        # From here on the batch is committed: a failure below is healed by the next sync.
        loader.close()
    # sync() only has to advance the watermark, unless another writer's records came between.
    report.quads_added = (loader.quads if loader else 0) + sync(kb, {r.content_hash: b"" for r in report.added})
    spent.update({"ledger": t2 - t1, "kb": time.perf_counter() - t2})
    return report


def sync(kb, projected: dict[str, bytes] | None = None) -> int:
    """Load every ledger record beyond the watermark; return the number of quads loaded.

    `projected`: by content hash, what is still to load for records an ingest already
    projected (b"" when it loaded them itself); the others are re-projected.
    """
    ensure_ontology(kb)
    mark = kb.watermark()
    last = mark
    quads = 0
    batch = Batch()
    vouched: list[tuple[str, str]] = []  # (hash, kind) of every record the watermark passes

    def pending() -> Iterator[tuple[int, bytes]]:
        if projected:
            # Right after an ingest the batch is already projected: read ids, not payloads,
            # unless another writer's records also lie beyond the watermark.
            light = kb.ledger.hashes_after(mark)
            if all(h in projected for _, h, _ in light):
                for i, h, kind in light:
                    vouched.append((h, kind))
                    yield i, projected[h]
                return
        for entry in kb.ledger.after(mark):
            vouched.append((entry.content_hash, entry.kind))
            data = (projected or {}).get(entry.content_hash)
            yield entry.id, data if data is not None else reproject(kb, entry, batch)

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

    kb.store.bulk_load_nquads(chunks())
    drop_retracted(kb.store)  # a partner's removed records stay out, after a rebuild too
    quads += _reload_missing(kb, vouched)
    if last != mark:
        kb.set_meta("projectedThrough", str(last))
    return quads


def _reload_missing(kb, vouched: list[tuple[str, str]]) -> int:
    """Load again, from the ledger, the records about to pass the watermark whose graph the
    store lacks (kb/store/reconcile.py); return the quads loaded."""
    missing = reconcile.missing_records(kb.store, vouched)
    if not missing:
        return 0
    batch = Batch()
    data = b"".join(reproject(kb, e, batch) for e in kb.ledger.entries(missing))
    kb.store.bulk_load_nquads([data])
    still = reconcile.missing_records(kb.store, [(h, k) for h, k in vouched if h in set(missing)])
    if still:
        raise StoreError(f"{len(still)} record graph(s) did not load (first: {still[0][:16]}); "
                         "run `luma kb rebuild`")
    return data.count(b"\n")


def reproject(kb, entry: LedgerEntry, batch: Batch) -> bytes:
    """The N-Quads of one ledger entry, projected again from its payload."""
    model_cls = BY_NAME[entry.kind].model_class() if entry.kind in BY_NAME else None
    if model_cls is None:
        raise StoreError(f"ledger record {entry.id} has unknown kind {entry.kind!r}; upgrade luma")
    model = model_cls.model_validate_json(
        entry.payload, context={"dimensions": kb.dimensions, "home": kb.settings.home}
    )
    meta = LedgerMeta(entry.content_hash, entry.submitter, entry.ingested_at)
    return project(model, meta, kb.dimensions, batch).data()
