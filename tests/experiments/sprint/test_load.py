"""The load generator: closed-loop concurrency, Poisson arrivals, deadlines."""

from __future__ import annotations

import time

import pytest

from luma.experiments.sprint import load
from luma.experiments.sprint.contract import Contract
from luma.experiments.services.base import BatchEngine


class CountingEngine(BatchEngine):
    def __init__(self, max_batch, work_s=0.001):
        self.in_flight_max = 0
        super().__init__(lambda xs: [self._work(work_s) for _ in xs], max_batch)

    @staticmethod
    def _work(s):
        end = time.perf_counter() + s
        while time.perf_counter() < end:  # busy, like real compute
            pass

    def submit(self, rid, payload):
        super().submit(rid, payload)
        self.in_flight_max = max(self.in_flight_max, len(self._queue))


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_closed_loop_keeps_exactly_concurrency_requests_outstanding(concurrency):
    eng = CountingEngine(max_batch=4)
    res = load.run(eng, list(range(40)), "closed", concurrency)
    assert res.completed == 40 and len(res.latency) == 40 and not res.timed_out
    assert eng.in_flight_max == min(concurrency, 40)
    assert res.throughput() > 0 and all(x > 0 for x in res.latency)


def test_poisson_arrivals_follow_the_rate():
    eng = CountingEngine(max_batch=8, work_s=0.0002)
    res = load.run(eng, list(range(60)), "poisson", rate=200.0, seed=3)
    assert res.completed == 60
    # 59 exponential gaps at 200/s: 0.295 s expected; generous bounds for a shared machine
    assert 0.12 < res.makespan < 0.8
    assert sorted(res.latency)[len(res.latency) // 2] < 0.05  # an idle engine answers at once


def test_the_same_seed_gives_the_same_schedule():
    a = load.run(CountingEngine(8, 0), list(range(30)), "poisson", rate=500.0, seed=1)
    b = load.run(CountingEngine(8, 0), list(range(30)), "poisson", rate=500.0, seed=1)
    assert abs(a.makespan - b.makespan) < 0.02


def test_a_deadline_stops_the_load_and_says_so():
    eng = CountingEngine(max_batch=1, work_s=0.01)
    res = load.run(eng, list(range(100)), "closed", 1, deadline=time.perf_counter() + 0.1)
    assert res.timed_out and res.completed < 100


def test_requests_needed_follows_the_highest_percentile():
    c = Contract.model_validate({"name": "x", "service": "matvec", "load": {"requests": 50}, "clauses": [
        {"metric": "p50_latency", "op": "<=", "value": 1, "unit": "s"},
        {"metric": "p99_latency", "op": "<=", "value": 2, "unit": "s"}]})
    assert c.requests_needed() == 368
    assert c.threshold(c.clauses[1]) == 2.0
