"""In-place changes of a live server's state (experiments/pilot/server.py `_apply`)."""

from __future__ import annotations

import os
import resource

from luma.experiments.pilot import server
from luma.experiments.services.base import BatchEngine, Loaded
from luma.experiments.services.replicas import make_engine


def _loaded():
    return Loaded(engine_factory=lambda mb: BatchEngine(lambda ps: list(ps), mb), weight_bytes=0)


def test_apply_changes_batch_and_replicas_in_place():
    engine = make_engine(_loaded(), 8, 1, resizable=True)
    cpus = sorted(os.sched_getaffinity(0))
    limit = resource.getrlimit(resource.RLIMIT_DATA)
    try:
        why = server._apply({"cores": len(cpus), "replicas": 2, "max_batch": 4}, 0, engine, False, cpus)
        assert why is None and engine.replicas == 2 and engine.max_batch == 4
        for i in range(20):
            engine.submit(i, i)
        done = []
        while engine.busy():
            done += engine.step()
        assert sorted(e.request_id for e in done) == list(range(20))
        assert server._apply({"cores": len(cpus), "replicas": 1, "max_batch": 8}, 0, engine, False, cpus) is None
        assert engine.replicas == 1 and engine.max_batch == 8
    finally:
        engine.close()
        resource.setrlimit(resource.RLIMIT_DATA, limit)
        os.sched_setaffinity(0, cpus)


def test_an_engine_without_replicas_refuses_another_layout():
    class Fixed:
        max_batch = 4

    why = server._apply({"replicas": 2}, 0, Fixed(), False, sorted(os.sched_getaffinity(0)))
    assert why == "this engine cannot change its replicas"
