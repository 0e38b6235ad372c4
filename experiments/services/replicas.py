"""Data-parallel replicas of a request/response engine inside one process.

A forward pass of a small model does not use two cores well through intra-op threads (MiniLM at
batch 8 on two cores of the 2-vCPU AMD EPYC host: 183-238 requests/s with two torch threads
against 132-157/s with one), while two copies of the engine, each serving its own batch on its
own thread with one torch thread, reach 245-313/s: the forward pass releases the GIL inside every
kernel. `replicas` is that serving setting (as `--data-parallel-size` or several worker processes
behind a balancer are in serving engines): the replicas share the loaded weights and pull batches
from one queue, first come first served, so a replica never idles while requests wait.

Only request/response engines (`BatchEngine`) are replicated: a continuous-batching decoder owns
a KV pool per engine, which is its own dimension.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
from typing import Any

from luma.errors import ContractError
from luma.experiments.services.base import BatchEngine, Event

#: How long `step` waits for a finished batch before it returns, so the thread that steps (the
#: load generator, the pilot's server) can hand new arrivals over while every replica computes.
POLL_S = 0.002


class ReplicatedEngine:
    """`replicas` engines from `factory`, each on its own thread, fed from one FIFO queue of at
    most `max_batch` requests per batch; stepped by one thread like any engine."""

    def __init__(self, factory, max_batch: int, replicas: int):
        self.max_batch = max(1, int(max_batch))
        self._factory = factory
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Condition()
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._in_flight = 0
        self._expired: set = set()
        self._errors: list[BaseException] = []
        self._live: set[int] = set()  # indices of replica threads serving (changed under the lock)
        self._target = 0
        # A byte per finished batch: a server waits on this with its sockets (select) instead of
        # polling `step`, so its thread does not take the GIL from the replicas while they compute.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.outputs: dict[int, Any] = {}
        self.keep_outputs = False
        self.resize(replicas)

    @property
    def replicas(self) -> int:
        """How many replicas serve now."""
        return self._target

    def resize(self, replicas: int) -> None:
        """Serve with `replicas` engines from now on: new ones start at once; surplus ones stop
        after the batch they are serving (none is interrupted)."""
        replicas = max(1, int(replicas))
        with self._lock:
            self._target = replicas
            for i in range(replicas):
                if i not in self._live:
                    self._live.add(i)
                    threading.Thread(target=self._serve, args=(i,), name=f"luma-replica-{i}", daemon=True).start()
            self._lock.notify_all()

    def _serve(self, index: int) -> None:
        engine = self._factory(self.max_batch)
        while True:
            with self._lock:
                while not self._queue and index < self._target:
                    self._lock.wait()
                if index >= self._target:
                    self._live.discard(index)  # decided under the lock: `resize` sees it at once
                    return
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                self._in_flight += len(batch)
            engine.max_batch, engine.keep_outputs = len(batch), self.keep_outputs
            for rid, payload in batch:
                engine.submit(rid, payload)
            try:
                events = engine.step()
            except BaseException as exc:  # noqa: BLE001 - re-raised by `step` in the stepping thread
                engine = self._factory(self.max_batch)
                events, failed = [], exc
            else:
                failed = None
                if self.keep_outputs:
                    self.outputs.update(engine.outputs)
                    engine.outputs.clear()
            self._events.put((events, len(batch), failed))
            try:
                os.write(self._wake_w, b"\0")
            except OSError:  # the pipe is full (nobody drains it) or closed: `step` polls anyway
                pass

    def wakeup_fd(self) -> int:
        """A file descriptor that becomes readable when a batch finishes (read it empty, then
        `step(0)` collects the batch)."""
        return self._wake_r

    def drain_wakeups(self) -> None:
        """Empty the wake-up pipe."""
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def submit(self, request_id: int, payload: Any) -> None:
        with self._lock:
            self._queue.append((request_id, payload))
            self._lock.notify()

    def busy(self) -> bool:
        with self._lock:
            return bool(self._queue) or self._in_flight > 0

    def expire(self, request_ids: set) -> None:
        """Drop queued requests (their clients gave up); batches in flight finish."""
        with self._lock:
            self._queue = collections.deque((rid, p) for rid, p in self._queue if rid not in request_ids)

    def step(self, timeout: float = POLL_S) -> list[Event]:
        """What the replicas finished since the last call, waiting up to `timeout` for one batch.
        A replica's failure (memory, a bad payload) is raised here, as a single engine's is."""
        if not self.busy():
            return []
        out: list[Event] = []
        try:
            items = [self._events.get(timeout=timeout) if timeout > 0 else self._events.get_nowait()]
        except queue.Empty:
            return out
        while True:
            try:
                items.append(self._events.get_nowait())
            except queue.Empty:
                break
        failure = None
        for events, n, failed in items:
            with self._lock:
                self._in_flight -= n
            out.extend(events)
            failure = failure or failed
        if failure is not None:
            raise failure
        return out

    def close(self) -> None:
        """Stop every replica once it has finished its batch (the wake-up pipe stays open until
        the engine is collected: a replica may still write to it)."""
        with self._lock:
            self._target = 0
            self._lock.notify_all()

    def __del__(self):
        for fd in (getattr(self, "_wake_r", None), getattr(self, "_wake_w", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


def make_engine(loaded, max_batch: int, replicas: int = 1, resizable: bool = False):
    """The engine a trial or a live server steps: `loaded`'s own, or `replicas` copies of it when
    more than one is asked for (request/response services only). `resizable`: a ReplicatedEngine
    even for one replica where the engine can be replicated, so a live server can change its
    replicas in place."""
    replicas = int(replicas or 1)
    probe = loaded.engine_factory(max_batch)
    if replicas == 1 and not (resizable and isinstance(probe, BatchEngine)):
        return probe
    if not isinstance(probe, BatchEngine):
        raise ContractError(f"replicas={replicas}: only request/response services can be replicated "
                          f"(this one's engine is {type(probe).__name__})", field="replicas")
    return ReplicatedEngine(loaded.engine_factory, max_batch, replicas)
