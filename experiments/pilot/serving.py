"""The pilot's side of the running service: server processes at library states (`Instance`),
the requests and their answers (`Tracker`), and the open-loop request stream (`Dispatcher`).

A switch is a rolling restart that loses no request: the new state's server starts and warms up
beside the old one, new arrivals go to it from the moment it is ready, and the old one finishes
what it holds before it exits. Both run (and are paid for) during the overlap.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from luma.errors import StateFailed
from luma.experiments.pilot.server import MAX_LINE, check_private, peer_uid

_CLK_TCK = os.sysconf("SC_CLK_TCK")
#: How long the tracker keeps a finished batch after the window it finished in was judged.
KEEP_BATCHES_S = 120.0


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
        #: Batches answered, from servers that say when each began: (state, began, done) → size.
        self.batches: dict[tuple[str, float, float], int] = {}

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
                began = msg.get("b")
                if isinstance(began, (int, float)) and isinstance(r.done, (int, float)) and began <= r.done:
                    key = (r.state, float(began), float(r.done))
                    self.batches[key] = self.batches.get(key, 0) + 1
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

    def service(self, key: str, start: float, end: float) -> list[list[float]]:
        """The batches state `key` finished in [start, end) (perf_counter), by size: rows
        [size, batches, Σ duration s, Σ duration² s²] — what `Predictor.observe` fits the
        state's service time on. Windows are judged in order, so batches that finished more
        than KEEP_BATCHES_S before `start` are forgotten (a day-long trace keeps minutes)."""
        rows: dict[int, list[float]] = {}
        with self.lock:
            horizon = start - KEEP_BATCHES_S
            self.batches = {k: v for k, v in self.batches.items() if k[2] >= horizon}
            for (state, began, done), size in self.batches.items():
                if state == key and start <= done < end:
                    row = rows.setdefault(size, [size, 0, 0.0, 0.0])
                    row[1] += 1
                    row[2] += done - began
                    row[3] += (done - began) ** 2
        return [rows[n] for n in sorted(rows)]


_SUN_PATH = 107  # bytes of a Unix socket address on Linux (108 with the closing NUL)


def _private_folder(folder: Path) -> None:
    """Create `folder` (0700) or make the existing one of ours 0700: the servers' sockets, specs
    (with their tokens) and logs are the pilot's alone."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not folder.is_symlink() and folder.stat().st_uid == os.geteuid():
        os.chmod(folder, 0o700)
    check_private(str(folder))


def _socket_path(folder: Path, name: str) -> tuple[str, str | None]:
    """The server's socket and the temporary folder made for it (None when in the run folder): in
    the run folder (private) unless that path is longer than a Unix socket address may be -- then
    in a fresh private folder of random name in the temporary folder, never at a predictable name
    there (another user could bind it first). Its path goes into the server's spec, where a
    resumed pilot reads it."""
    path = str(folder / f"{name}.sock")
    if len(path.encode()) <= _SUN_PATH:
        return path, None
    tmp = tempfile.mkdtemp(prefix="luma-pilot-")  # 0700, a name no one can guess
    path = os.path.join(tmp, "server.sock")
    if len(path.encode()) > _SUN_PATH:
        os.rmdir(tmp)
        raise StateFailed(f"no socket path fits in {_SUN_PATH} bytes under {tempfile.gettempdir()}: "
                          "use a shorter temporary folder (TMPDIR)")
    return path, tmp


def _recorded(folder: Path, name: str) -> dict:
    """The control socket and token in the spec a server was started with (a resumed pilot
    reconnects with them); {} when there is none."""
    try:
        doc = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: doc[k] for k in ("socket", "socket_tmpdir", "token") if isinstance(doc.get(k), str)}


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner may read (0600, whatever the umask)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fd, 0o600)  # an older file of that name keeps its mode through O_CREAT
        fh.write(text)


class Instance:
    """One server process of the service at one library state."""

    def __init__(self, folder: Path, key: str, spec: dict, tracker: Tracker, name: str | None = None):
        self.key, self.tracker = key, tracker
        self.name = name or f"{key}-{int(time.time() * 1000) % 10**9}"
        self.folder = folder
        # host_cpus: the CPUs the pilot may give the service (an in-place upscale widens the
        # affinity up to these). socket: set by start(), or the one a server of this name was
        # started with (resume). token: the server's secret, in its spec only (0600).
        self.spec = {**spec, "socket": None, "socket_tmpdir": None, "token": secrets.token_hex(32),
                     **(_recorded(folder, name) if name else {}),
                     "status": str(folder / f"{self.name}.status"), "host_cpus": sorted(os.sched_getaffinity(0))}
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.started_at = time.perf_counter()
        self.ready_at: float | None = None
        self._applied = threading.Event()
        self._apply_answer: dict = {}
        self.last_error: str | None = None  # the server's answer to the last line it refused

    def start(self) -> None:
        _private_folder(self.folder)
        self.spec["socket"], self.spec["socket_tmpdir"] = _socket_path(self.folder, self.name)
        spec_path = self.folder / f"{self.name}.json"
        _write_private(spec_path, json.dumps(self.spec))
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
                    self._remove_socket_folder()
                    raise StateFailed(f"state {self.key} did not start: {doc.get('error')}")
                if doc.get("ev") == "ready" and self.connect():
                    self.ready_at = time.perf_counter()
                    return
            if getattr(self, "_proc", None) is not None and self._proc.poll() is not None:
                tail = (self.folder / f"{self.name}.log").read_text(errors="replace")[-300:].strip()
                self._remove_socket_folder()
                raise StateFailed(f"state {self.key}: its server exited with code {self._proc.returncode}: {tail}")
            time.sleep(0.05)
        self.kill()
        self._remove_socket_folder()
        raise StateFailed(f"state {self.key} was not ready within {timeout:.0f} s")

    def connect(self, timeout: float = 10.0) -> bool:
        """Connect to a running server and authenticate (a resumed pilot adopts the one it left);
        False if there is none, or it does not accept this pilot's token."""
        path = self.spec.get("socket")
        if not path:
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        buf = b""
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    s.connect(path)
                    break
                except BlockingIOError:  # its backlog is full (a socket with a timeout does not wait)
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            if peer_uid(s) != os.geteuid():  # the folder is private; this is the check that it stayed so
                raise ConnectionRefusedError("the server is another user's")
            s.sendall(self._line({"op": "hello"}))
            while b"\n" not in buf and len(buf) <= MAX_LINE:
                chunk = s.recv(1 << 16)
                if not chunk:
                    raise ConnectionResetError("the server closed the connection")
                buf += chunk
            first, buf = buf.split(b"\n", 1)
            ready = json.loads(first)
        except (OSError, ValueError):
            s.close()
            return False
        if not isinstance(ready, dict) or ready.get("ev") != "ready":  # {"ok": false, ...}: not our server
            s.close()
            return False
        s.settimeout(None)
        self.pid = ready.get("pid", self.pid)
        with self.lock:
            old, self.sock = self.sock, s
        if old is not None:
            old.close()  # the server dropped it already: it had one client, now this one
        threading.Thread(target=self._read, args=(s, buf), daemon=True).start()
        return True

    def _read(self, s: socket.socket, buf: bytes = b"") -> None:
        while True:
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(msg, dict):
                    continue
                if msg.get("ev") == "ready":
                    self.pid = msg.get("pid", self.pid)
                elif msg.get("ev") in ("applied", "refused"):
                    self._apply_answer = msg
                    self._applied.set()
                elif msg.get("ok") is False:
                    self.last_error = msg.get("error")  # a line of ours it refused: a bug to see, not to die of
                else:
                    self.tracker.event(msg)
            try:
                chunk = s.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
        if not self.alive():
            self.tracker.fail_open(self.key, "error")

    def _line(self, obj: dict) -> bytes:
        return (json.dumps({**obj, "token": self.spec["token"]}, separators=(",", ":")) + "\n").encode()

    def send(self, obj: dict) -> bool:
        with self.lock:
            if self.sock is None:
                return False
            try:
                self.sock.sendall(self._line(obj))
                return True
            except OSError:
                return False

    def _remove_socket_folder(self) -> None:
        """The private temporary folder of a server that did not start (one that did removes its own)."""
        if self.spec.get("socket_tmpdir"):
            shutil.rmtree(self.spec["socket_tmpdir"], ignore_errors=True)

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
        self.key, self.spec = key, {**spec, **{k: self.spec[k] for k in ("socket", "socket_tmpdir", "token", "status",
                                                                          "host_cpus")}}
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
