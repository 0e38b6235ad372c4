"""Which work a rules run gives its threads, and in what order.

The store evaluates a query on one core without holding the GIL, so a run keeps a few queries
going at once: independent strata side by side (`priority` orders the ready ones), and the
batches of one `reads: records` rule (`each`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import networkx as nx


def default_workers() -> int:
    """Threads for independent strata: the cores this process may use (at most 4)."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


def priority(needs: dict[int, set[int]], seconds: dict[int, float]) -> Callable[[int], tuple]:
    """The sort key by which ready strata take a free worker: first those more strata wait on
    (directly or not), then the longest by the last run's time (a leaf that runs long goes beside
    them, not ahead), then file order. Submitting every ready stratum at once queued the rules the
    rest waited on behind leaves (+1,000 chains at 100k: hardware-requirement behind
    binds-before). `needs`: {stratum: the strata it reads from}."""
    graph = nx.DiGraph((j, i) for i, direct in needs.items() for j in direct)
    graph.add_nodes_from(needs)
    waiting = {i: len(nx.descendants(graph, i)) for i in needs}
    return lambda i: (-waiting[i], -seconds.get(i, 0.0), i)


def each(texts: Iterable, fn: Callable, workers: int) -> Iterator:
    """`fn` of every text, in order, `workers` at a time; the next texts are taken only when the
    last ones' answers were (a full run's batches are many: never all held at once)."""
    if workers == 1:
        yield from map(fn, texts)
        return
    it = iter(texts)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while window := list(islice(it, workers)):
            yield from pool.map(fn, window)
