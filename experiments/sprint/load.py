"""The load generator: closed-loop clients or Poisson arrivals against one engine, in real time.

One thread drives everything: it releases requests when they arrive, steps the engine while
it has work, and waits (really sleeps) only when the engine is idle until the next arrival.
Latency is completion minus *arrival*, so queueing behind a busy engine counts, as a user
would feel it. Closed loop: `concurrency` clients, each sending its next request the moment
its previous one completes (no think time). Poisson: arrival times drawn up front from an
exponential inter-arrival distribution at `rate` (seeded, so a repetition sees the same
schedule).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class LoadResult:
    """Per-request samples (seconds) and totals of one load test."""

    latency: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)  # time per output token after the first
    completed: int = 0
    tokens: int = 0
    makespan: float = 0.0
    timed_out: bool = False

    def throughput(self) -> float:
        return self.completed / self.makespan if self.makespan > 0 else 0.0

    def token_throughput(self) -> float:
        return self.tokens / self.makespan if self.makespan > 0 else 0.0


def run(engine, payloads: list, mode: str = "closed", concurrency: int = 1, rate: float | None = None,
        seed: int = 0, deadline: float | None = None) -> LoadResult:
    """Serve every payload through `engine`; stop early (timed_out) past `deadline` (perf_counter)."""
    n = len(payloads)
    res = LoadResult()
    arrival: dict[int, float] = {}
    first: dict[int, float] = {}
    t0 = time.perf_counter()
    if mode == "poisson":
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
        schedule = list(t0 + np.cumsum(gaps) - gaps[0])
    else:
        schedule = [t0] * min(concurrency, n)
    next_id = 0
    last_done = t0

    def release(now: float) -> None:
        nonlocal next_id
        while next_id < len(schedule) and schedule[next_id] <= now:
            arrival[next_id] = schedule[next_id]
            engine.submit(next_id, payloads[next_id])
            next_id += 1

    while res.completed < n:
        now = time.perf_counter()
        if deadline is not None and now > deadline:
            res.timed_out = True
            break
        release(now)
        if not engine.busy():
            if next_id >= len(schedule):
                break  # nothing queued and nothing left to arrive
            time.sleep(max(0.0, schedule[next_id] - time.perf_counter()))
            continue
        for ev in engine.step():
            if ev.kind == "first_token":
                first[ev.request_id] = ev.at
                res.ttft.append(ev.at - arrival[ev.request_id])
                continue
            res.latency.append(ev.at - arrival[ev.request_id])
            res.completed += 1
            last_done = max(last_done, ev.at)
            if ev.tokens:
                res.tokens += ev.tokens
                if ev.tokens > 1 and ev.request_id in first:
                    res.tpot.append((ev.at - first[ev.request_id]) / (ev.tokens - 1))
            if mode != "poisson" and len(schedule) < n:
                schedule.append(ev.at)  # the client sends its next request now
    res.makespan = last_done - t0
    return res
