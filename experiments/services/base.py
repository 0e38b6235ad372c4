"""What every service a sprint qualifies provides, and the engine the load generator drives.

A trial runs in its own subprocess (`luma.experiments.sprint.worker`). The parent prepares artifacts
once per variant (`Service.prepare`, cached on disk) so that a trial only *loads* what it serves:
an int8 variant is loaded as int8 and never materialises its fp32 weights inside the memory
limit. Inside the worker, the order is: imports -> memory limit -> `load` -> warm-up -> load test
(`engine`) -> `quality`.

Engines are stepped by one thread (the load generator, `luma.experiments.sprint.load`): `submit`
queues a request, `step` does one unit of real work and reports what finished. Nothing here
sleeps or simulates time: the latencies are wall-clock times of real computation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class Event:
    """Something that happened to one request during a `step` (times are `time.perf_counter()`)."""

    request_id: int
    kind: str  # "first_token" (generative only) or "done"
    at: float
    tokens: int = 0  # tokens generated so far (generative services)
    #: When the work that finished it began: its batch's start (request/response engines, whose
    #: batch answers all its requests at one instant); None where a request's work is no one unit.
    began: float | None = None


class Engine(Protocol):
    """A serving engine on one machine state."""

    def submit(self, request_id: int, payload: Any) -> None:
        """Queue a request (its arrival time is kept by the load generator)."""

    def step(self) -> list[Event]:
        """Do one unit of work (a batch, or one decode iteration) and return what happened."""

    def busy(self) -> bool:
        """True while any request is queued or in flight."""


@dataclass
class Loaded:
    """What `Service.load` returns inside the worker."""

    engine_factory: Any  # callable(max_batch: int) -> Engine
    weight_bytes: int  # bytes of the served parameters as loaded (int8 levels + scales, fp32 ...)
    extra: dict = field(default_factory=dict)  # e.g. {"kv_blocks": 96, "kv_block_bytes": 16384}


class Service(Protocol):
    """One real service with a quality gate and interventions."""

    name: str
    #: Intervention name -> variant name it selects (e.g. {"int8-weights": "int8-weights"}).
    interventions: dict[str, str]

    def workload(self) -> dict:
        """{name, model, task} for PEX-chain records."""

    def prepare(self, variant: str, cache: Path) -> Path:
        """Parent side, once per variant: build (or reuse) the artifact a trial loads; also stores
        what `quality` compares against (fp32 reference outputs)."""

    def load(self, artifact: Path, state: dict) -> Loaded:
        """Worker side, under the memory limit. `state` holds the enforced levels in base units
        (e.g. {"kv_cache": 8388608} bytes) and `variant` (the name given to `prepare`); a service
        ignores the ones it has no use for."""

    def requests(self, n: int, seed: int, contract: dict) -> list[Any]:
        """n request payloads for the load test (deterministic for the seed; sized by the
        contract's `context` / `max_new_tokens` where the service has them)."""

    def quality(self, loaded: Loaded, artifact: Path, contract: dict) -> float:
        """The quality score of this loaded variant against the fp32 reference outputs stored by
        `prepare` (cosine similarity, accuracy, or token agreement)."""


class BatchEngine:
    """Engine of a request/response service: each `step` serves up to `max_batch` queued requests
    in one forward pass (dynamic batching, first come first served)."""

    def __init__(self, run_batch, max_batch: int):
        self._run = run_batch  # callable(list of payloads) -> list of outputs
        self.max_batch = max(1, int(max_batch))
        self._queue: list[tuple[int, Any]] = []
        self.outputs: dict[int, Any] = {}
        self.keep_outputs = False

    def submit(self, request_id: int, payload: Any) -> None:
        self._queue.append((request_id, payload))

    def busy(self) -> bool:
        return bool(self._queue)

    def expire(self, request_ids: set) -> None:
        """Drop queued requests (their clients have given up: serving them would only delay others)."""
        self._queue = [(rid, p) for rid, p in self._queue if rid not in request_ids]

    def step(self) -> list[Event]:
        import time

        batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch:]
        if not batch:
            return []
        began = time.perf_counter()
        out = self._run([p for _, p in batch])
        now = time.perf_counter()
        if self.keep_outputs:
            self.outputs.update({rid: o for (rid, _), o in zip(batch, out)})
        return [Event(rid, "done", now, began=began) for rid, _ in batch]
