"""The pilot's side of the running service: server processes at library states (`Instance`),
the requests and their answers (`Tracker`), and the open-loop request stream (`Dispatcher`).

A switch is a rolling restart that loses no request: the new state's server starts and warms up
beside the old one, new arrivals go to it from the moment it is ready, and the old one finishes
what it holds before it exits. Both run (and are paid for) during the overlap.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from luma.errors import LumaError

_CLK_TCK = os.sysconf("SC_CLK_TCK")


class StateFailed(LumaError):
    """A library state's server did not start (the message says why)."""


@dataclass
class Request:
    """One request of the trace: when it arrived and what became of it."""

    id: int
    t: float  # trace time of arrival
    at: float  # perf_counter of arrival
    window: int
    state: str = ""  # key of the state that served it
    done: float | None = None
    first: float | None = None
    error: str | None = None

    def latency(self, now: float) -> float:
        """Seconds to the answer; for one still out, the time it has waited so far (a lower bound)."""
        return (self.done if self.done is not None else now) - self.at


class Tracker:
    """Every request of the run by id, updated by the servers' reader threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests: dict[int, Request] = {}

    def add(self, r: Request) -> None:
        with self.lock:
            self.requests[r.id] = r

    def event(self, msg: dict) -> None:
        with self.lock:
            r = self.requests.get(msg.get("id"))
            if r is None or r.done is not None or r.error:
                return
            if msg["ev"] == "first":
                r.first = msg["at"]
            elif msg["ev"] == "done":
                r.done = msg["at"]
            elif msg["ev"] == "err":
                r.error = msg.get("cause", "error")

    def fail_open(self, key: str, cause: str) -> None:
        """Every unanswered request held by the server of state `key` fails (its server died)."""
        with self.lock:
            for r in self.requests.values():
                if r.state == key and r.done is None and not r.error:
                    r.error = cause

    def of_window(self, w: int) -> list[Request]:
        with self.lock:
            return [r for r in self.requests.values() if r.window == w]


def _socket_path(folder: Path, name: str) -> str:
    """The server's socket: in the run folder, unless that path is longer than a Unix socket
    address may be (108 bytes on Linux) -- then a name in the temporary folder derived from it,
    so a resumed pilot finds the same socket."""
    path = str(folder / f"{name}.sock")
    if len(path.encode()) < 100:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:20]
    return os.path.join(tempfile.gettempdir(), f"luma-{digest}.sock")


class Instance:
    """One server process of the service at one library state."""

    def __init__(self, folder: Path, key: str, spec: dict, tracker: Tracker, name: str | None = None):
        self.key, self.tracker = key, tracker
        self.name = name or f"{key}-{int(time.time() * 1000) % 10**9}"
        self.folder = folder
        # host_cpus: the CPUs the pilot may give the service (an in-place upscale widens the
        # affinity up to these).
        self.spec = {**spec, "socket": _socket_path(folder, self.name), "status": str(folder / f"{self.name}.status"),
                     "host_cpus": sorted(os.sched_getaffinity(0))}
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.started_at = time.perf_counter()
        self.ready_at: float | None = None
        self._applied = threading.Event()
        self._apply_answer: dict = {}

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        spec_path = self.folder / f"{self.name}.json"
        spec_path.write_text(json.dumps(self.spec))
        env = dict(os.environ)
        isa = self.spec["state"].get("runtime")
        if isa:
            env["ATEN_CPU_CAPABILITY"] = isa
        env.setdefault("MALLOC_ARENA_MAX", "2")
        # OpenMP threads that spin while they wait stall whenever the pilot (or a draining server)
        # takes their core: a live service shares its host, so they sleep instead.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        with open(self.folder / f"{self.name}.log", "wb") as log:
            # Its own session: it outlives the pilot (a killed pilot leaves the service serving).
            proc = subprocess.Popen([sys.executable, "-m", "luma.experiments.pilot.server", str(spec_path)],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.pid = proc.pid
        self._proc = proc
        self.started_at = time.perf_counter()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until the server is serving, then connect; StateFailed if it cannot start."""
        deadline = time.monotonic() + timeout
        status = Path(self.spec["status"])
        while time.monotonic() < deadline:
            if status.exists():
                doc = json.loads(status.read_text())
                if doc.get("ev") == "failed":
                    raise StateFailed(f"state {self.key} did not start: {doc.get('error')}")
                if doc.get("ev") == "ready" and self.connect():
                    self.ready_at = time.perf_counter()
                    return
            if getattr(self, "_proc", None) is not None and self._proc.poll() is not None:
                tail = (self.folder / f"{self.name}.log").read_text(errors="replace")[-300:].strip()
                raise StateFailed(f"state {self.key}: its server exited with code {self._proc.returncode}: {tail}")
            time.sleep(0.05)
        self.kill()
        raise StateFailed(f"state {self.key} was not ready within {timeout:.0f} s")

    def connect(self) -> bool:
        """Connect to a running server (a resumed pilot adopts the one it left); False if none."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.spec["socket"])
        except OSError:
            s.close()
            return False
        self.sock = s
        threading.Thread(target=self._read, args=(s,), daemon=True).start()
        return True

    def _read(self, s: socket.socket) -> None:
        buf = b""
        while True:
            try:
                chunk = s.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if msg.get("ev") == "ready":
                    self.pid = msg.get("pid", self.pid)
                elif msg.get("ev") in ("applied", "refused"):
                    self._apply_answer = msg
                    self._applied.set()
                else:
                    self.tracker.event(msg)
        if not self.alive():
            self.tracker.fail_open(self.key, "error")

    def send(self, obj: dict) -> bool:
        with self.lock:
            if self.sock is None:
                return False
            try:
                self.sock.sendall((json.dumps(obj, separators=(",", ":")) + "\n").encode())
                return True
            except OSError:
                return False

    def apply_in_place(self, key: str, spec: dict, timeout: float = 10.0) -> bool:
        """Change the running server to another state of the same variant without a restart;
        False when the server refuses (its engine fixes the batch) or does not answer."""
        same = ("variant", "service", "artifact")
        if any(spec[k] != self.spec[k] for k in same) or spec["state"].get("runtime") != self.spec["state"].get("runtime"):
            return False  # another artifact or CPU ISA: only a restart changes those
        state = spec["state"]
        self._applied.clear()
        if not self.send({"op": "apply", "key": key, "cores": state.get("compute"), "threads": spec.get("threads"),
                          "replicas": spec.get("replicas", 1), "max_batch": spec.get("max_batch"),
                          "host_memory": state.get("host_memory")}):
            return False
        if not self._applied.wait(timeout) or self._apply_answer.get("ev") != "applied":
            return False
        self.key, self.spec = key, {**spec, "socket": self.spec["socket"], "status": self.spec["status"],
                                    "host_cpus": self.spec["host_cpus"]}
        return True

    def alive(self) -> bool:
        if not self.pid:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                return fh.read().split(") ", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server so far (None once it is gone)."""
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                fields = fh.read().split(") ", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except (OSError, IndexError, ValueError):
            return None

    def stop(self) -> None:
        """Finish what it holds, then exit (the drain of a rolling restart)."""
        if not self.send({"op": "stop"}):
            self.kill()

    def kill(self) -> None:
        if self.pid and self.alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def wait_gone(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            if getattr(self, "_proc", None) is not None:
                self._proc.poll()
            time.sleep(0.05)
        return not self.alive()


class Dispatcher(threading.Thread):
    """Releases the trace's arrivals in real time to whichever server is active (open loop:
    a request arrives on schedule whether or not the service keeps up)."""

    def __init__(self, arrivals: list[tuple[float, int | None]], start_index: int, origin: float, window_s: float,
                 tracker: Tracker, active):
        super().__init__(daemon=True)
        self.arrivals, self.i, self.origin, self.window_s = arrivals, start_index, origin, window_s
        self.tracker, self.active = tracker, active  # active: callable -> Instance
        self.stopped = threading.Event()

    def run(self) -> None:
        while self.i < len(self.arrivals) and not self.stopped.is_set():
            t, ctx = self.arrivals[self.i]
            wait = self.origin + t - time.perf_counter()
            if wait > 0:
                self.stopped.wait(min(wait, 0.5))
                continue
            inst = self.active()
            at = self.origin + t
            r = Request(self.i, t, at, int(t // self.window_s), inst.key)
            self.tracker.add(r)
            if not inst.send({"op": "req", "id": self.i, "c": ctx, "t": at}):
                r.error = "unavailable"
            self.i += 1

    def wait_past(self, t: float, timeout: float = 10.0) -> None:
        """Block until every arrival before trace time `t` has been released (a window is judged
        on all of its requests, even when this thread fell behind while the pilot was busy)."""
        deadline = time.monotonic() + timeout
        while self.i < len(self.arrivals) and self.arrivals[self.i][0] < t and time.monotonic() < deadline \
                and self.is_alive():
            time.sleep(0.005)

    def stop(self) -> None:
        self.stopped.set()
