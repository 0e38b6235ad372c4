"""Speculative loading: an ingest loads chunks before its ledger commit, so every way it can fail
after the first chunk loaded must leave the knowledge base exactly as it was (kb/store/pending.py)."""

from __future__ import annotations

import json

import pytest

from luma.errors import LedgerError, RecordError
from luma.kb.ingest import write as kbm
from luma.kb.store import pending
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger import Ledger
from luma.kb.ingest.shacl import ShapeChecker
from luma.kb.records.synthetic import records, write_jsonl
from luma.kb.vocab import ENTITY_GRAPH
from luma.settings import Settings


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 4 records, so a 20-record batch loads five times before it commits."""
    monkeypatch.setattr(kbm, "FIRST_CHUNK_RECORDS", 4)
    monkeypatch.setattr(kbm, "CHUNK_RECORDS", 4)


@pytest.fixture
def project(store_url, tmp_path):
    """A project on every store backend that already holds 10 records: the failing batch below
    shares workloads, architectures, contracts and levels with them."""
    settings = Settings(home=tmp_path / "home", db_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}", kb_url=store_url)
    with KnowledgeBase.open(settings) as base:
        base.ingest([write_jsonl(tmp_path / "first.jsonl", 10, seed=1)], submitter="tester")
    return settings


def _state(settings: Settings) -> tuple[bytes, int]:
    with KnowledgeBase.open(settings) as base:
        return base.store.dump("nquads", sort=True), base.ledger.last_id()


def _batch(tmp_path, n: int = 20):
    return write_jsonl(tmp_path / "batch.jsonl", n, seed=2)


def test_a_shape_failure_in_a_late_chunk_takes_back_the_loaded_chunks(project, tmp_path, small_chunks, monkeypatch):
    before = _state(project)
    real = ShapeChecker.check
    calls = {"n": 0}

    def check(self, triples, source, known=None):
        calls["n"] += 1
        if calls["n"] == 15:  # in the fourth chunk: three chunks are loaded by then
            raise RecordError("shape lsh:X: planted violation", source=source, field="x")
        return real(self, triples, source, known)

    monkeypatch.setattr(ShapeChecker, "check", check)
    with KnowledgeBase.open(project) as base:
        loaded_some = []
        monkeypatch.setattr(pending, "drop_graphs", _spy(pending.drop_graphs, loaded_some))
        with pytest.raises(RecordError, match="planted violation"):
            base.ingest([_batch(tmp_path)], submitter="tester")
    assert loaded_some, "the failure must come after chunks were loaded, or this test proves nothing"
    assert _state(project) == before
    assert pending.markers(project.home) == []


def test_a_failed_ledger_commit_takes_back_everything_loaded(project, tmp_path, small_chunks, monkeypatch):
    before = _state(project)

    def refuse(self, rows, at=None):
        raise LedgerError("ledger write failed, nothing was written: disk full")

    monkeypatch.setattr(Ledger, "append", refuse)
    with KnowledgeBase.open(project) as base:
        with pytest.raises(LedgerError, match="disk full"):
            base.ingest([_batch(tmp_path)], submitter="tester")
    monkeypatch.undo()
    assert _state(project) == before


def test_a_process_killed_before_the_commit_is_taken_back_on_the_next_open(project, tmp_path, small_chunks, monkeypatch):
    """As if killed between the last load and the ledger commit: the rollback never ran, the
    marker is on disk, and the next open finds and undoes the batch."""
    before = _state(project)

    class Killed(BaseException):
        pass

    def die(self, rows, at=None):
        raise Killed

    monkeypatch.setattr(Ledger, "append", die)
    # A killed process cleans nothing, and the kernel drops its marker's lock.
    monkeypatch.setattr(pending.PendingIngest, "rollback", lambda self, store, ledger: self.release())
    with KnowledgeBase.open(project) as base:
        with pytest.raises(Killed):
            base.ingest([_batch(tmp_path)], submitter="tester")
        entities_with_batch = base.store.count()
    monkeypatch.undo()
    assert len(pending.markers(project.home)) == 1
    assert entities_with_batch > base_quads(before)
    assert _state(project) == before  # the open inside _state recovered
    assert pending.markers(project.home) == []


def test_a_live_ingest_marker_is_never_recovered(project, tmp_path, small_chunks, monkeypatch):
    """While an ingest runs, any other open (an endpoint KB admits many) must leave its loaded,
    not yet committed graphs alone: its marker is locked. Once it commits, nothing is missing."""
    seen = {}
    real = Ledger.append

    def commit_after_another_open(self, rows, at=None):
        # Another process opens the KB between the loads and the commit (as `luma kb stats` did).
        seen["dropped"] = pending.recover(project.home, base.store, ledger=self)
        return real(self, rows, at=at)

    monkeypatch.setattr(Ledger, "append", commit_after_another_open)
    with KnowledgeBase.open(project) as base:
        base.ingest([_batch(tmp_path)], submitter="tester")
    monkeypatch.undo()
    assert seen == {"dropped": 0}
    with KnowledgeBase.open(project) as base:
        assert base.stats()["record_graphs"] == base.ledger.last_id() == 30


def test_a_marker_for_a_committed_batch_keeps_it(project, tmp_path, small_chunks):
    """Killed after the ledger commit, before the marker went: the batch stays and sync completes it."""
    batch = _batch(tmp_path, 6)
    with KnowledgeBase.open(project) as base:
        base.ingest([batch], submitter="tester")
    after = _state(project)
    with KnowledgeBase.open(project) as base:
        committed = sorted(e.content_hash for e in base.ledger.after(10))
    assert len(committed) == 6
    marker = pending.PendingIngest(project.home)
    marker.note(committed, [ENTITY_GRAPH + "/never-described"])
    marker.release()  # as a killed process leaves it
    assert _state(project) == after
    assert pending.markers(project.home) == []


def test_a_torn_last_marker_line_is_a_chunk_that_never_loaded(tmp_path):
    marker = pending.PendingIngest(tmp_path)
    marker.note(["a" * 64], ["https://example.org/e"])
    marker.release()
    with open(marker.path, "a") as fh:
        fh.write('{"record_hashes": ["b')
    assert pending.read_marker(marker.path) == (["a" * 64], ["https://example.org/e"])


def test_a_corrupt_marker_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / pending.LEGACY_MARKER
    path.write_text('not json\n{"record_hashes": [], "entity_subjects": []}\n')
    with pytest.raises(Exception, match="pending-ingest marker, line 1"):
        pending.read_marker(path)


def test_entities_the_store_already_had_survive_a_rollback(store_url, tmp_path):
    """A pre-existing entity that the failed batch described again is still referred to."""
    settings = Settings(home=tmp_path / "home", db_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}", kb_url=store_url)
    recs = list(records(3, seed=5))
    first = tmp_path / "one.json"
    first.write_text(json.dumps(recs[0]))
    with KnowledgeBase.open(settings) as base:
        base.ingest([first], submitter="tester")
        before = base.store.dump("nquads", sort=True)
        rows = base.store.select(f"SELECT DISTINCT ?s WHERE {{ GRAPH <{ENTITY_GRAPH}> {{ ?s ?p ?o }} }}", union=False)
        subjects = [row["s"] for row in rows]
        assert len(subjects) > 5
        assert pending.drop_unreferenced(base.store, subjects) == 0
        assert base.store.dump("nquads", sort=True) == before


def base_quads(state: tuple[bytes, int]) -> int:
    return state[0].count(b"\n")


def _spy(fn, calls: list):
    def wrapper(*args, **kwargs):
        calls.append(args)
        return fn(*args, **kwargs)

    return wrapper
