"""One running service at one library state: `python -m luma.experiments.pilot.server SPEC.json`.

It starts like a trial's worker (`luma.experiments.sprint.worker`): CPU affinity before torch loads,
torch's threads warmed, RLIMIT_DATA = runtime footprint + the state's host_memory level, then the
artifact of the state's variant. It then serves requests on a Unix socket until told to stop —
and outlives the pilot that started it: a pilot killed with SIGKILL leaves its service running
in a library state, and `luma pilot run --resume` reconnects to it.

Protocol (JSON lines). In — every line carries `"token"`, the server's secret from its spec:
`{"op": "hello"}` (authenticate; `ready` comes back), `{"op": "req", "id": N, "c": CONTEXT, "t":
ARRIVAL}` (arrival on `time.perf_counter`, which is CLOCK_MONOTONIC on Linux: one clock for every
process of the host), `{"op": "apply", "key", "cores", "threads", "replicas", "max_batch",
"host_memory"}` (change the state in place: `applied` or `refused` comes back), `{"op": "stop"}`
(finish what is queued, then exit). Out: `{"ev": "ready", ...}`, `{"ev": "first"|"done", "id": N,
"at": T, "tok": K[, "b": BEGAN]}` (BEGAN: when the request's batch began, for engines that batch),
`{"ev": "err", "id": N, "cause"}`, and `{"ok": false, "error": WHY}` for a line refused
(malformed, unknown op, wrong token): the server answers it and goes on serving.

Control socket. It lives in a folder only the server's user can enter (0700, checked before the
bind), a peer of another user is closed at accept (SO_PEERCRED), and a connection becomes the
client — the one that receives every event — with its first valid line carrying the token (one
client at a time: a new authenticated connection replaces the old one; the old one's requests are
still served, their answers go to whoever is connected). Lines are at most MAX_LINE bytes, and at
most MAX_PENDING connections wait unauthenticated, each for HELLO_S seconds. With no client for
`orphan_s` seconds the server exits, so a pilot that never comes back leaves no process behind.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import resource
import selectors
import socket
import stat
import struct
import sys
import time

from luma.errors import BadRequest, UnsafeSocketFolder
from luma.experiments.services import get
from luma.experiments.services.replicas import make_engine
from luma.experiments.sprint.worker import prepare_runtime, threads_of

POOL = 64  # payloads prepared per context length (requests cycle through them)
MAX_LINE = 1 << 16  # bytes in one request line: the pilot's longest (an apply, token included) is ~300
MAX_PENDING = 8  # connections waiting unauthenticated at once; the oldest goes when a ninth comes
HELLO_S = 10.0  # an unauthenticated connection is closed after this long
# Upper bounds of the integer fields: far above any real state, low enough that no value makes the
# server build a thousand replicas or overflow a C long.
_BOUNDS = {"cores": (0, 4096), "threads": (1, 4096), "replicas": (1, 256), "max_batch": (1, 1 << 16),
           "host_memory": (0, 1 << 50)}
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


def check_private(folder: str) -> None:
    """UnsafeSocketFolder unless `folder` is a real directory of this user that no one else may enter."""
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise UnsafeSocketFolder(f"cannot read it: {exc.strerror}", source=folder) from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocketFolder("not a directory (a link?)", source=folder)
    if st.st_uid != os.geteuid():
        raise UnsafeSocketFolder(f"owned by uid {st.st_uid}, not {os.geteuid()}", source=folder)
    if st.st_mode & 0o077:
        raise UnsafeSocketFolder(f"mode {stat.S_IMODE(st.st_mode):o}: others may enter it (needs 700)",
                                 source=folder)


def _int(msg: dict, name: str, required: bool = False) -> int | None:
    v = msg.get(name)
    if v is None and not required:
        return None
    lo, hi = _BOUNDS.get(name, (0, 1 << 62))
    if type(v) is not int or not lo <= v <= hi:  # type(): a JSON true is no count
        raise BadRequest(f"must be an integer in [{lo}, {hi}]", field=name)
    return v


def parse_request(line: bytes, token: str) -> dict:
    """The request of one line, checked (JSON object, the token, a known op, its fields' types and
    ranges); BadRequest saying what is wrong otherwise."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: deeply nested arrays
        raise BadRequest("not a JSON line") from None
    if not isinstance(msg, dict):
        raise BadRequest("a request is a JSON object")
    tok = msg.get("token")
    # Before anything else: without the token a peer learns nothing about the protocol.
    if not (isinstance(tok, str) and tok.isascii() and hmac.compare_digest(tok, token)):
        raise BadRequest("missing or wrong token", field="token")
    op = msg.get("op")
    if op == "req":
        t = msg.get("t")
        if t is not None and (type(t) not in (int, float) or not math.isfinite(t)):
            raise BadRequest("must be a finite number", field="t")
        return {"op": "req", "id": _int(msg, "id", required=True), "c": _int(msg, "c"), "t": t}
    if op == "apply":
        key = msg.get("key")
        if key is not None and not (isinstance(key, str) and len(key) <= 500):
            raise BadRequest("must be a string", field="key")
        return {"op": "apply", "key": key, **{name: _int(msg, name) for name in _BOUNDS}}
    if op in ("hello", "stop"):
        return {"op": op}
    raise BadRequest("unknown op", field="op")


def peer_uid(s: socket.socket) -> int:
    """The effective uid of the process that connected `s` (SO_PEERCRED: the kernel's record of
    it at connect, which the peer cannot forge); -1 when unknown."""
    try:
        return _UCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))[1]
    except (OSError, AttributeError, struct.error):
        return -1


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class _Control:
    """The control socket's connections: the client (authenticated; every event goes to it) and
    the ones that have not yet sent a line with the token."""

    def __init__(self, lsock: socket.socket, sel: selectors.BaseSelector, token: str, ready: dict):
        self.lsock, self.sel, self.token, self.ready = lsock, sel, token, ready
        self.client: socket.socket | None = None
        self.bufs: dict[socket.socket, bytearray] = {}
        self.pending: dict[socket.socket, float] = {}  # insertion order: the oldest first
        self.last_client = time.monotonic()

    def accept(self) -> None:
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:  # none left (BlockingIOError), or out of descriptors: it waits in the backlog
                return
            s.setblocking(False)  # a peer that never reads must not stall the server, even this once
            if peer_uid(s) != os.geteuid():
                self._write(s, {"ok": False, "error": "not this server's user"})
                s.close()
                continue
            if len(self.pending) >= MAX_PENDING:
                self.drop(next(iter(self.pending)))
            self.bufs[s], self.pending[s] = bytearray(), time.monotonic()
            self.sel.register(s, selectors.EVENT_READ, "peer")

    def read(self, s: socket.socket) -> list[dict]:
        """The valid requests `s` has sent whole; each bad line is answered with an error."""
        if s not in self.bufs:  # dropped earlier in this round of events
            return []
        try:
            chunk = s.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            chunk = b""
        if not chunk:
            self.drop(s)
            return []
        buf = self.bufs[s]
        buf += chunk
        out = []
        while s in self.bufs and (i := buf.find(b"\n")) >= 0:
            line = bytes(buf[:i])
            del buf[:i + 1]
            try:
                if i > MAX_LINE:
                    raise BadRequest(f"line longer than {MAX_LINE} bytes")
                msg = parse_request(line, self.token)
            except BadRequest as exc:
                self.reply(s, {"ok": False, "error": str(exc)})
                continue
            if s is not self.client:
                self._adopt(s)
            out.append(msg)
        if s in self.bufs and len(buf) > MAX_LINE:  # no newline in sight: the rest cannot be read
            self.reply(s, {"ok": False, "error": f"line longer than {MAX_LINE} bytes"})
            self.drop(s)
        return out

    def _adopt(self, s: socket.socket) -> None:
        if self.client is not None:
            self.drop(self.client)  # one client at a time: the newest authenticated one
        self.pending.pop(s, None)
        self.client = s
        self.send(self.ready)

    def send(self, obj: dict) -> None:
        """An event to the client (dropped when there is none)."""
        if self.client is not None and not self._write(self.client, obj):
            self.drop(self.client)

    def reply(self, s: socket.socket, obj: dict) -> None:
        if not self._write(s, obj):
            self.drop(s)  # a peer that does not read its replies loses its connection

    @staticmethod
    def _write(s: socket.socket, obj: dict) -> bool:
        try:
            s.sendall(_line(obj))
            return True
        except OSError:
            return False

    def expire(self) -> None:
        now = time.monotonic()
        for s, since in list(self.pending.items()):
            if now - since > HELLO_S:
                self.reply(s, {"ok": False, "error": f"no line with the token within {HELLO_S:.0f} s"})
                self.drop(s)

    def drop(self, s: socket.socket) -> None:
        if s not in self.bufs:
            return
        self.sel.unregister(s)
        s.close()
        del self.bufs[s]
        self.pending.pop(s, None)
        if s is self.client:
            self.client = None
            self.last_client = time.monotonic()

    def close(self) -> None:
        for s in list(self.bufs):
            self.drop(s)


def _listen(path: str) -> socket.socket:
    """The listening control socket at `path`, in a private folder (checked first)."""
    check_private(os.path.dirname(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise UnsafeSocketFolder("something other than a socket is in the way", source=path)
        os.unlink(path)  # a stale socket, in a folder no one else can write to
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lsock.bind(path)
        os.chmod(path, 0o600)  # the folder already keeps others out; this says so on the socket too
        lsock.listen(16)
    except OSError:
        lsock.close()
        raise
    lsock.setblocking(False)
    return lsock


def _remove_socket(spec: dict, bound: bool = True) -> None:
    """Unlink the socket this server bound, then the private temporary folder made for it, if any."""
    if bound:
        try:
            os.unlink(spec["socket"])
        except OSError:
            pass
    if spec.get("socket_tmpdir"):  # the private folder the pilot made for it in the temporary folder
        try:
            os.rmdir(spec["socket_tmpdir"])
        except OSError:
            pass


def _setup(spec: dict):
    """The trial worker's process set-up (affinity, threads, footprint, memory limit), then the
    artifact, request pools and a warmed engine."""
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

            torch.set_num_threads(threads_of({"threads": msg.get("threads"), "replicas": replicas}, cores))
    limit = msg.get("host_memory")
    resource.setrlimit(resource.RLIMIT_DATA, ((foot + limit) if limit else resource.RLIM_INFINITY,
                                              resource.RLIM_INFINITY))
    engine.max_batch = max(1, int(msg.get("max_batch") or engine.max_batch))
    if hasattr(engine, "resize"):
        engine.resize(replicas)  # after the affinity: new replica threads inherit the new mask
    return None


def serve(spec: dict) -> int:
    """Set up, then serve on the control socket until stopped or orphaned; the exit code."""
    t0 = time.perf_counter()
    try:
        token = spec.get("token")
        if not (isinstance(token, str) and token.isascii() and len(token) >= 32):
            raise BadRequest("the spec carries no control token", field="token")
        loaded, pools, foot, engine = _setup(spec)
        lsock = _listen(spec["socket"])
    except BaseException as exc:  # noqa: BLE001 - the pilot reads why the state could not start
        _write_status(spec, {"ev": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]})
        _remove_socket(spec, bound=False)
        return 1
    outstanding: set[int] = set()
    arrived: dict[int, float] = {}
    deadline = float(spec.get("deadline_s", 5.0))
    last_expiry = 0.0
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, "listen")
    _watch(sel, engine)
    stopping = False
    ready = {"ev": "ready", "pid": os.getpid(), "load_s": round(time.perf_counter() - t0, 3),
             "weight_bytes": loaded.weight_bytes}
    ctl = _Control(lsock, sel, token, ready)
    send = ctl.send
    _write_status(spec, ready)

    while True:
        evented = hasattr(engine, "wakeup_fd")  # it wakes the select when a batch finishes: no polling
        for key, _ in sel.select(0.02 if evented or not engine.busy() else 0):
            if key.data == "engine":
                engine.drain_wakeups()
                continue
            if key.data == "listen":
                ctl.accept()
                continue
            for msg in ctl.read(key.fileobj):
                if msg["op"] == "req":
                    pool = pools.get(msg["c"]) or next(iter(pools.values()))
                    engine.submit(msg["id"], pool[msg["id"] % len(pool)])
                    outstanding.add(msg["id"])
                    arrived[msg["id"]] = msg["t"] if msg["t"] is not None else time.perf_counter()
                elif msg["op"] == "apply":
                    host_cpus = spec.get("host_cpus") or list(range(os.cpu_count() or 1))
                    try:
                        why = _apply(msg, foot, engine, getattr(get(spec["service"]), "uses_torch", True), host_cpus)
                    except Exception as exc:  # noqa: BLE001 - e.g. CPUs this host lacks: a refusal, not an exit
                        why = f"{type(exc).__name__}: {exc}"[:300]
                    send({"ev": "applied", "key": msg["key"]} if why is None else
                         {"ev": "refused", "key": msg["key"], "why": why})
                elif msg["op"] == "stop":
                    stopping = True
        ctl.expire()
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
                out = {"ev": "first" if ev.kind == "first_token" else "done", "id": ev.request_id, "at": ev.at,
                       "tok": ev.tokens}
                if ev.began is not None:
                    out["b"] = ev.began
                send(out)
        elif stopping:
            break
        elif ctl.client is None and time.monotonic() - ctl.last_client > spec.get("orphan_s", 900):
            break
    ctl.close()
    lsock.close()
    _remove_socket(spec)
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
