"""The write path's batch hygiene (kb/ingest/write.py)."""

from __future__ import annotations

import gc
import weakref

from hypothesis import given
from hypothesis import strategies as st

from luma.kb.ingest import write


def test_a_batch_leaves_nothing_for_the_youngest_generation_to_rescan():
    # With the collector paused, every object a batch keeps alive piles up in generation 0; the
    # first allocation after it came back on scanned them all (1.8 s at 20k records).
    kept = []
    with write._gc_paused():
        kept.extend({"record": i, "facts": [i, str(i)]} for i in range(50_000))
        assert len(gc.get_objects(generation=0)) >= 100_000
    assert gc.isenabled()
    young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
    assert young < 10_000  # in the oldest generation, where only a full collection looks
    assert len(kept) == 50_000


def test_cycles_made_during_a_batch_are_still_collected():
    class Node:
        pass

    with write._gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        refs = [weakref.ref(a), weakref.ref(b)]
        del a, b
    assert all(r() is not None for r in refs)  # a cycle: reference counting alone keeps it
    gc.collect()
    assert all(r() is None for r in refs)


# -- chunk sizes: a small first chunk, full ones, then a tapering end ------------------------------

def _sizes(total: int) -> list[int]:
    sizes, left = [], total
    while left:
        n = min(left, write.chunk_size(len(sizes), left))
        sizes.append(n)
        left -= n
    return sizes


@given(st.integers(1, 300_000))
def test_the_chunks_cover_the_records_and_the_last_loads_are_small(total):
    sizes = _sizes(total)
    assert sum(sizes) == total and sizes[0] == min(total, write.FIRST_CHUNK_RECORDS)
    assert max(sizes) <= write.CHUNK_RECORDS
    if total > write.FIRST_CHUNK_RECORDS + write.CHUNK_RECORDS:
        assert sizes[-1] <= write.LAST_CHUNK_RECORDS  # what loads once the Python work has ended
    # a tapering end costs a few loads, never one per record or per a constant few
    assert len(sizes) <= 1 + -(-total // write.CHUNK_RECORDS) + 5
    assert all(b <= a for a, b in zip(sizes[1:], sizes[2:]))  # after the first, never growing


def test_an_unknown_remainder_keeps_full_chunks():
    assert [write.chunk_size(i, None) for i in range(3)] == [write.FIRST_CHUNK_RECORDS] + [write.CHUNK_RECORDS] * 2


def test_the_reader_counts_what_is_left_of_its_last_file_only(tmp_path):
    from luma.kb.records.loader import RecordsLeft, iter_records
    from luma.kb.records.synthetic import write_jsonl

    first, last = write_jsonl(tmp_path / "a.jsonl", 3, seed=1), write_jsonl(tmp_path / "b.jsonl", 4, seed=2)
    left = RecordsLeft()
    seen = [left.count for _ in iter_records([first, last], left=left)]
    assert seen == [None, None, None, 3, 2, 1, 0]  # after each record: unknown until b.jsonl is read


def test_an_ingest_loads_a_tapering_end(luma_home, tmp_path, monkeypatch):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.records.synthetic import write_jsonl
    from luma.settings import Settings

    monkeypatch.setattr(write, "FIRST_CHUNK_RECORDS", 2)
    monkeypatch.setattr(write, "CHUNK_RECORDS", 8)
    monkeypatch.setattr(write, "LAST_CHUNK_RECORDS", 2)
    loaded = []
    real = write._BackgroundLoader.submit
    monkeypatch.setattr(write._BackgroundLoader, "submit",
                        lambda self, data: (loaded.append(data.count(b"\n")), real(self, data))[1])
    chunks = []
    timed = write._timed_chunks
    monkeypatch.setattr(write, "_timed_chunks",
                        lambda *a: (chunks.append(len(c)) or c for c in timed(*a)))
    path = write_jsonl(tmp_path / "batch.jsonl", 33, seed=3)
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as base:
        report = base.ingest([path], submitter="tester")
    assert chunks == [2, 8, 8, 8, 4, 2, 1] and len(report.added) == 33
    assert len(loaded) == 7 and sum(loaded) == report.quads_added
