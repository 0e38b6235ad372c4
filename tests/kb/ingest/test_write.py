"""The write path's batch hygiene (kb/ingest/write.py)."""

from __future__ import annotations

import gc

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
        ids = {id(a), id(b)}
        del a, b
    gc.collect()
    assert not any(id(o) in ids for o in gc.get_objects() if isinstance(o, Node))
