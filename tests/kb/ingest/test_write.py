"""The write path's batch hygiene (kb/ingest/write.py)."""

from __future__ import annotations

import gc
import weakref

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
