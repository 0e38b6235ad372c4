"""One running service at one library state: `python -m luma.experiments.pilot.server SPEC.json`.

It starts like a trial's worker (`luma.experiments.worker`): CPU affinity before torch loads,
torch's threads warmed, RLIMIT_DATA = runtime footprint + the state's host_memory level, then the
artifact of the state's variant. It then serves requests on a Unix socket until told to stop —
and outlives the pilot that started it: a pilot killed with SIGKILL leaves its service running
in a library state, and `luma pilot run --resume` reconnects to it.

Protocol (JSON lines). In: `{"op": "req", "id": N, "c": CONTEXT, "t": ARRIVAL}` (arrival on
`time.perf_counter`, which is CLOCK_MONOTONIC on Linux: one clock for every process of the
host), `{"op": "apply", "key", "cores", "threads", "replicas", "max_batch", "host_memory"}` (change
the state in place: `applied` or `refused` comes back), `{"op": "stop"}` (finish what is queued, then exit). Out: `{"ev": "ready", ...}` on
connect, `{"ev": "first"|"done", "id": N, "at": T, "tok": K}`, `{"ev": "err", "id": N, "cause"}`.
One client at a time: a new connection replaces the old one (its requests are still served; their
answers go to whoever is connected). With no client for `orphan_s` seconds the server exits, so a
pilot that never comes back leaves no process behind for ever.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import socket
import sys
import time

POOL = 64  # payloads prepared per context length (requests cycle through them)


def _setup(spec: dict):
    """The trial worker's process set-up (affinity, threads, footprint, memory limit), then the
    artifact, request pools and a warmed engine."""
    from luma.experiments.services.replicas import make_engine
    from luma.experiments.worker import prepare_runtime

    state = spec["state"]
    service, _, foot = prepare_runtime(spec)
    loaded = service.load(spec["artifact"], {**state, "variant": spec["variant"]})
    pools = {}
    for ctx in spec["contexts"]:
        load = {**spec["load"], "context": ctx} if ctx else spec["load"]
        pools[ctx] = service.requests(POOL, spec.get("seed", 0), load)
    engine = make_engine(loaded, spec["max_batch"], spec.get("replicas"), resizable=True)
    # Warm-up: a few batches of each length per replica, so the first live requests do not pay for it.
    first = next(iter(pools.values()))
    for i, p in enumerate((first * 4)[: 2 * spec["max_batch"] * int(spec.get("replicas") or 1)]):
        engine.submit(-1 - i, p)
    while engine.busy():
        engine.step()
    return loaded, pools, foot, engine


def _apply(msg: dict, foot: int, engine, uses_torch: bool, host_cpus: list[int]) -> str | None:
    """Change the state in place: cores (affinity of every thread, torch's thread count), engine
    replicas, the memory limit and the batch size. None when applied, else why it cannot be (then
    the pilot restarts the service at the new state instead)."""
    if not hasattr(engine, "max_batch"):
        return "this engine fixes its batch at start"
    replicas = int(msg.get("replicas") or 1)
    if replicas != getattr(engine, "replicas", 1) and not hasattr(engine, "resize"):
        return "this engine cannot change its replicas"  # a restart builds the other engine
    cores = msg.get("cores")
    if cores:
        allowed = sorted(host_cpus)[:cores]
        os.sched_setaffinity(0, allowed)
        for tid in os.listdir("/proc/self/task"):  # torch's pool threads keep their own masks
            try:
                os.sched_setaffinity(int(tid), allowed)
            except OSError:
                pass
        if uses_torch:
            import torch

            from luma.experiments.worker import threads_of

            torch.set_num_threads(threads_of({"threads": msg.get("threads"), "replicas": replicas}, cores))
    limit = msg.get("host_memory")
    resource.setrlimit(resource.RLIMIT_DATA, ((foot + limit) if limit else resource.RLIM_INFINITY,
                                              resource.RLIM_INFINITY))
    engine.max_batch = max(1, int(msg.get("max_batch") or engine.max_batch))
    if hasattr(engine, "resize"):
        engine.resize(replicas)  # after the affinity: new replica threads inherit the new mask
    return None


def serve(spec: dict) -> int:
    from luma.experiments.services.replicas import make_engine

    t0 = time.perf_counter()
    try:
        loaded, pools, foot, engine = _setup(spec)
    except BaseException as exc:  # noqa: BLE001 - the pilot reads why the state could not start
        _write_status(spec, {"ev": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]})
        return 1
    outstanding: set[int] = set()
    arrived: dict[int, float] = {}
    deadline = float(spec.get("deadline_s", 5.0))
    last_expiry = 0.0
    path = spec["socket"]
    if os.path.exists(path):
        os.unlink(path)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(4)
    lsock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, "listen")
    _watch(sel, engine)
    conn: socket.socket | None = None
    buf = b""
    stopping = False
    last_client = time.monotonic()
    ready = {"ev": "ready", "pid": os.getpid(), "load_s": round(time.perf_counter() - t0, 3),
             "weight_bytes": loaded.weight_bytes}
    _write_status(spec, ready)

    def send(obj: dict) -> None:
        nonlocal conn
        if conn is None:
            return
        try:
            conn.sendall((json.dumps(obj, separators=(",", ":")) + "\n").encode())
        except OSError:
            sel.unregister(conn)
            conn.close()
            conn = None

    while True:
        evented = hasattr(engine, "wakeup_fd")  # it wakes the select when a batch finishes: no polling
        for key, _ in sel.select(0.02 if evented or not engine.busy() else 0):
            if key.data == "engine":
                engine.drain_wakeups()
                continue
            if key.data == "listen":
                new, _ = lsock.accept()
                if conn is not None:
                    sel.unregister(conn)
                    conn.close()
                conn, buf = new, b""
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, "client")
                send(ready)
                continue
            try:
                chunk = conn.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(conn)
                conn.close()
                conn, buf = None, b""
                last_client = time.monotonic()
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if msg["op"] == "req":
                    pool = pools.get(msg.get("c")) or next(iter(pools.values()))
                    engine.submit(msg["id"], pool[msg["id"] % len(pool)])
                    outstanding.add(msg["id"])
                    arrived[msg["id"]] = msg.get("t", time.perf_counter())
                elif msg["op"] == "apply":
                    from luma.experiments.services import get

                    host_cpus = spec.get("host_cpus") or list(range(os.cpu_count() or 1))
                    why = _apply(msg, foot, engine, getattr(get(spec["service"]), "uses_torch", True), host_cpus)
                    send({"ev": "applied", "key": msg.get("key")} if why is None else
                         {"ev": "refused", "key": msg.get("key"), "why": why})
                elif msg["op"] == "stop":
                    stopping = True
        if engine.busy() and hasattr(engine, "expire") and time.perf_counter() - last_expiry > 0.1:
            # Requests past their deadline are errors to the client already: drop them unserved,
            # as servers with deadline propagation do, so a backlog does not outlive its cause.
            last_expiry = time.perf_counter()
            late = {rid for rid in outstanding if last_expiry - arrived.get(rid, last_expiry) > deadline}
            if late:
                engine.expire(late)
                for rid in sorted(late):
                    send({"ev": "err", "id": rid, "cause": "timeout"})
                    arrived.pop(rid, None)
                outstanding -= late
        if engine.busy():
            try:
                events = engine.step(0) if evented else engine.step()
            except BaseException as exc:  # noqa: BLE001 - a failed step fails its requests, not the service
                cause = "oom" if isinstance(exc, MemoryError) or "memory" in str(exc).lower() else "error"
                for rid in sorted(outstanding):
                    send({"ev": "err", "id": rid, "cause": cause})
                outstanding.clear()
                if hasattr(engine, "close"):
                    sel.unregister(engine.wakeup_fd())
                    engine.close()
                engine = make_engine(loaded, spec["max_batch"], getattr(engine, "replicas", 1), resizable=True)
                _watch(sel, engine)
                continue
            for ev in events:
                if ev.kind == "done":
                    outstanding.discard(ev.request_id)
                    arrived.pop(ev.request_id, None)
                send({"ev": "first" if ev.kind == "first_token" else "done", "id": ev.request_id, "at": ev.at,
                      "tok": ev.tokens})
        elif stopping:
            break
        elif conn is None and time.monotonic() - last_client > spec.get("orphan_s", 900):
            break
    if conn is not None:
        conn.close()
    lsock.close()
    try:
        os.unlink(path)
    except OSError:
        pass
    return 0


def _watch(sel, engine) -> None:
    """Wake the server's select when the engine's replicas finish a batch (engines that have one)."""
    if hasattr(engine, "wakeup_fd"):
        sel.register(engine.wakeup_fd(), selectors.EVENT_READ, "engine")


def _write_status(spec: dict, obj: dict) -> None:
    tmp = spec["status"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    os.replace(tmp, spec["status"])


def main(argv: list[str]) -> int:
    with open(argv[0]) as fh:
        spec = json.load(fh)
    return serve(spec)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
