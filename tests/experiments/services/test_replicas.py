"""Engine replicas (experiments/services/replicas.py) and the layouts `sprint optimize` tries."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import ConfigError
from luma.experiments.sprint.optimize import layouts
from luma.experiments.services.base import BatchEngine, Loaded
from luma.experiments.services.replicas import ReplicatedEngine, make_engine


def _factory(seen: list, delay: float = 0.0, fail_on=None):
    lock = threading.Lock()

    def run(payloads):
        if fail_on is not None and fail_on in payloads:
            raise MemoryError("cannot allocate memory")
        with lock:
            seen.append((threading.get_ident(), list(payloads)))
        time.sleep(delay)
        return [p * 2 for p in payloads]

    return lambda max_batch: BatchEngine(run, max_batch)


def _drain(engine) -> list:
    out = []
    deadline = time.monotonic() + 20
    while engine.busy():
        assert time.monotonic() < deadline
        out += engine.step()
    return out


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 60), replicas=st.integers(1, 4), max_batch=st.integers(1, 9))
def test_every_request_is_served_once_in_batches_of_at_most_max_batch(n, replicas, max_batch):
    seen: list = []
    engine = ReplicatedEngine(_factory(seen), max_batch, replicas)
    for i in range(n):
        engine.submit(i, i)
    events = _drain(engine)
    engine.close()
    assert sorted(e.request_id for e in events) == list(range(n))
    assert all(e.kind == "done" for e in events)
    assert all(1 <= len(b) <= max_batch for _, b in seen)
    assert sorted(x for _, b in seen for x in b) == list(range(n))


def test_replicas_serve_batches_side_by_side():
    seen: list = []
    engine = ReplicatedEngine(_factory(seen, delay=0.05), 2, 3)
    for i in range(6):
        engine.submit(i, i)
    t = time.perf_counter()
    _drain(engine)
    took = time.perf_counter() - t
    engine.close()
    assert len({tid for tid, _ in seen}) == 3  # three threads served the three batches
    assert took < 0.05 * 3 * 0.9  # ... at the same time (sleeping releases the GIL as kernels do)


def test_outputs_are_kept_when_asked():
    engine = ReplicatedEngine(_factory([]), 4, 2)
    engine.keep_outputs = True
    for i in range(10):
        engine.submit(i, i)
    _drain(engine)
    engine.close()
    assert engine.outputs == {i: 2 * i for i in range(10)}


def test_expired_requests_are_dropped_unserved():
    seen: list = []
    engine = ReplicatedEngine(_factory(seen, delay=0.05), 1, 1)
    for i in range(5):
        engine.submit(i, i)
    time.sleep(0.01)  # request 0 is in flight by now
    engine.expire({1, 2, 3})
    done = {e.request_id for e in _drain(engine)}
    engine.close()
    assert done == {0, 4} and not engine.busy()


def test_a_failed_batch_raises_in_the_stepping_thread_and_the_engine_goes_on():
    engine = ReplicatedEngine(_factory([], fail_on=3), 1, 2)
    for i in range(6):
        engine.submit(i, i)
    with pytest.raises(MemoryError):
        _drain(engine)
    rest = {e.request_id for e in _drain(engine)}
    engine.close()
    assert 3 not in rest and not engine.busy()


def test_resize_up_and_down_in_place():
    seen: list = []
    engine = ReplicatedEngine(_factory(seen, delay=0.01), 1, 1)
    for size in (3, 1, 2):
        engine.resize(size)
        assert engine.replicas == size
        for i in range(12):
            engine.submit(i, i)
        assert sorted(e.request_id for e in _drain(engine)) == list(range(12))
    engine.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > 1 and any(t.name.startswith("luma-replica") for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_make_engine_replicates_request_response_engines_only():
    batch = Loaded(engine_factory=_factory([]), weight_bytes=0)
    assert isinstance(make_engine(batch, 4), BatchEngine)
    assert isinstance(make_engine(batch, 4, resizable=True), ReplicatedEngine)
    two = make_engine(batch, 4, 2)
    assert isinstance(two, ReplicatedEngine) and two.replicas == 2
    two.close()

    class Paged:  # a continuous-batching engine with its own KV pool
        max_batch = 4

    decoder = Loaded(engine_factory=lambda mb: Paged(), weight_bytes=0)
    assert isinstance(make_engine(decoder, 4, resizable=True), Paged)
    with pytest.raises(ConfigError, match="only request/response services"):
        make_engine(decoder, 4, 2)


class _Svc:
    def __init__(self, torch=True, replicable=True):
        self.uses_torch, self.replicable = torch, replicable


@pytest.mark.parametrize("service, cores, threads, replicas, expected", [
    (_Svc(), 1, None, None, [(1, 1)]),
    (_Svc(), 2, None, None, [(1, 1), (1, 2), (2, 1)]),
    (_Svc(), 4, None, None, [(1, 1), (1, 4), (4, 1)]),
    (_Svc(), 4, [2], [2], [(2, 2)]),
    (_Svc(), 2, [2], [2], []),  # four threads in all on two cores: no layout
    (_Svc(replicable=False), 2, None, None, [(1, 1), (2, 1)]),
    (_Svc(replicable=False), 2, None, [2], []),
    (_Svc(torch=False, replicable=False), 2, None, None, [(2, 1)]),
    (_Svc(torch=False, replicable=False), 2, None, [2], []),
])
def test_layouts_never_use_more_threads_than_cores(service, cores, threads, replicas, expected):
    got = layouts(service, cores, threads, replicas)
    assert got == expected
    assert all(t * r <= cores for t, r in got)


class _Load:
    def __init__(self, mode, concurrency):
        self.mode, self.concurrency = mode, concurrency


class _Contract:
    def __init__(self, mode="closed", concurrency=8):
        self.load = _Load(mode, concurrency)


@pytest.mark.parametrize("contract, replicas, expected", [
    (_Contract(), 1, [1, 2, 4, 8]),
    (_Contract(), 2, [1, 2, 4]),  # a replica's share of 8 clients is 4
    (_Contract(concurrency=16), 2, [1, 2, 4, 8]),
    (_Contract(concurrency=1), 2, [1]),  # never nothing: the smallest batch
    (_Contract(mode="poisson"), 4, [1, 2, 4, 8, 16, 32]),
])
def test_batches_a_replica_can_fill(contract, replicas, expected):
    from luma.experiments.sprint.optimize import BATCHES, batches_for

    assert batches_for(contract, BATCHES, replicas) == expected
