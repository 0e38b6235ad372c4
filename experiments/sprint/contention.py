"""How contended the host was while a trial served: CPU steal and other tenants' CPU time on the
trial's cores, the run queue, and CPU pressure (PSI) where the kernel offers it — read from /proc
by the sprint process (never inside the trial's worker: a sampling thread there would add its
stack to the data segment a memory level limits).

The worker snapshots the counters (a few file reads, no thread) as its serve phase starts and
ends, with its own process tree's CPU time; a `Watch` in the sprint process samples the run queue
every `interval_s` meanwhile, and `Watch.stop(t0, t1, snapshots)` measures over the serve phase
(or, when the worker stamped none, over the snapshots it took itself). What the verdict makes of
the figures is `luma.kb.records.judge.contention_verdict` (ingest re-judges with the same rule).

Every reader takes the file's text through `read(path)`, so a test can feed a synthetic source.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from luma.kb.records import judge

Reader = Callable[[str], str]


def read_proc(path: str) -> str:
    """The text of a /proc (or /sys) file."""
    return Path(path).read_text()


@dataclass(frozen=True)
class Snapshot:
    """The host's counters at one instant (ticks in USER_HZ, PSI in microseconds)."""

    t: float  # time.monotonic()
    cpus: dict[int, tuple[int, ...]]  # per CPU: user nice system idle iowait irq softirq steal
    running: int | None  # runnable tasks on the host (/proc/loadavg)
    psi_us: int | None  # CPU pressure "some" total (cgroup's where readable, else the system's)
    own_ticks: int | None  # utime + stime of the watched process tree


def to_json(s: Snapshot) -> dict:
    """A snapshot as JSON-ready data (the worker hands its serve-phase snapshots over this way)."""
    return {"t": s.t, "cpus": {str(c): list(v) for c, v in s.cpus.items()}, "running": s.running, "psi_us": s.psi_us,
            "own_ticks": s.own_ticks}


def from_json(d: dict) -> Snapshot:
    return Snapshot(float(d["t"]), {int(c): tuple(v) for c, v in d["cpus"].items()}, d.get("running"),
                    d.get("psi_us"), d.get("own_ticks"))


def cpu_ticks(text: str) -> dict[int, tuple[int, ...]]:
    """Per-CPU tick counters (the first eight fields) from /proc/stat's text."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            out[int(name[3:])] = tuple(int(x) for x in rest.split()[:8])
    return out


def running_tasks(text: str) -> int | None:
    """Runnable tasks from /proc/loadavg (`0.50 0.40 0.30 3/412 1234`)."""
    try:
        return int(text.split()[3].split("/")[0])
    except (IndexError, ValueError):
        return None


def psi_total(text: str) -> int | None:
    """The `some` line's total stall time (µs) from a PSI file (/proc/pressure/cpu, cpu.pressure)."""
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[6:])
    return None


def tree_ticks(pid: int, read: Reader = read_proc) -> int | None:
    """CPU ticks of `pid` and its descendants, every thread, the children they have reaped
    included; None once it is gone."""
    try:
        fields = read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # utime, stime, cutime, cstime (stat fields 14-17). A child that exits leaves the live tree,
    # and its time moves to its parent's cutime/cstime once reaped: without them a server that
    # ran and exited inside the window (vLLM refusing a KV budget after loading) reads as other
    # tenants' time. A live process's cutime holds only children no longer in the tree: no double count.
    total = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for tid in tasks:
        try:
            children = read(f"/proc/{pid}/task/{tid}/children").split()
        except OSError:
            continue
        for child in children:
            total += tree_ticks(int(child), read) or 0
    return total


def _psi_path() -> str:
    """The trial's own cgroup's cpu.pressure where readable (cgroup v2), else the system's."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                p = "/sys/fs/cgroup" + line[3:].strip() + "/cpu.pressure"
                if os.access(p, os.R_OK):
                    return p
    except OSError:
        pass
    return "/proc/pressure/cpu"


def snapshot(pid: int | None = None, read: Reader = read_proc, psi_path: str | None = None) -> Snapshot:
    """The counters now (a field stays None where this host does not offer it)."""
    try:
        cpus = cpu_ticks(read("/proc/stat"))
    except OSError:
        cpus = {}
    try:
        running = running_tasks(read("/proc/loadavg"))
    except OSError:
        running = None
    try:
        psi = psi_total(read(psi_path or "/proc/pressure/cpu"))
    except OSError:
        psi = None
    own = tree_ticks(pid, read) if pid is not None else None
    return Snapshot(time.monotonic(), cpus, running, psi, own)


def between(a: Snapshot, b: Snapshot, cores: list[int], runqueue: list[int] | None = None) -> dict:
    """Contention over [a, b] on the trial's `cores`: `steal_pct` (share of those cores' time the
    hypervisor gave other guests), `cotenant_pct` (share the trial's own process tree did not use
    but something else did), `cotenant_cpu_s`, `runqueue_mean`/`runqueue_max` (runnable tasks on
    the whole host), `cpu_pressure_pct` (PSI `some`), `window_s`. None where unknown."""
    cores = [c for c in cores if c in a.cpus and c in b.cpus]
    hz = _hz()
    out: dict = {"window_s": round(b.t - a.t, 3), "cores": cores, "steal_pct": None, "cotenant_pct": None,
                 "cotenant_cpu_s": None, "runqueue_mean": None, "runqueue_max": None, "cpu_pressure_pct": None}
    if cores:
        d = [[y - x for x, y in zip(a.cpus[c], b.cpus[c])] for c in cores]
        total = sum(sum(row) for row in d)
        if total > 0:
            steal = sum(row[7] for row in d)
            busy = sum(row[0] + row[1] + row[2] + row[5] + row[6] for row in d)  # not idle, iowait, steal
            out["steal_pct"] = round(100 * steal / total, 2)
            if a.own_ticks is not None and b.own_ticks is not None:
                others = max(0, busy - (b.own_ticks - a.own_ticks))
                out["cotenant_cpu_s"] = round(others / hz, 3)
                # Tick sampling makes a few ticks of noise either way: under the judge's floor of
                # other tenants' time a window counts as uncontended (see judge.CONTENTION_FLOOR_S).
                out["cotenant_pct"] = round(100 * others / total, 2)
    if runqueue:
        out["runqueue_mean"] = round(sum(runqueue) / len(runqueue), 2)
        out["runqueue_max"] = max(runqueue)
    if a.psi_us is not None and b.psi_us is not None and b.t > a.t:
        out["cpu_pressure_pct"] = round(100 * (b.psi_us - a.psi_us) / 1e6 / (b.t - a.t), 2)
    return out


#: Fewest clock ticks a serve phase must span to be measured on its own (else it is widened).
MIN_TICKS = 20


def _hz() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Watch:
    """Snapshots the host every `interval_s` while a trial's worker runs (a daemon thread in the
    sprint process). `follow(pid)` once the worker started; `stop(t0, t1)` the contention over the
    serve phase [t0, t1] (monotonic), or over the whole watch when the worker stamped none."""

    cores: list[int]
    interval_s: float = 0.2
    read: Reader = read_proc
    snaps: list[Snapshot] = field(default_factory=list)
    pid: int | None = None

    def __post_init__(self):
        self._done = threading.Event()
        self._psi = _psi_path() if self.read is read_proc else "/proc/pressure/cpu"
        self._thread = threading.Thread(target=self._loop, name="luma-contention", daemon=True)

    def follow(self, pid: int) -> "Watch":
        self.pid = pid
        self.snaps.append(snapshot(pid, self.read, self._psi))
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._done.wait(self.interval_s):
            s = snapshot(self.pid, self.read, self._psi)
            self.snaps.append(s)
            if s.own_ticks is None:
                return  # the worker is gone (this last snapshot still reads the host's counters)

    def stop(self, t0: float | None = None, t1: float | None = None, serve: list[dict] | None = None) -> dict:
        """Contention over the serve phase: between the worker's own two `serve` snapshots when it
        took them (exact, however short the phase), else between the watch's snapshots that
        bracket [t0, t1]; the run queue from the watch's samples inside it."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        snaps = self.snaps
        if serve and len(serve) == 2:
            a, b = from_json(serve[0]), from_json(serve[1])
            if (b.t - a.t) * _hz() < MIN_TICKS:
                # Too short for 10 ms ticks to say anything: widen to the watch's snapshots around it
                # (the worker's and the watch's snapshots read the same counters of the same tree).
                a = max((s for s in snaps if s.t <= a.t), key=lambda s: s.t, default=a)
                b = min((s for s in snaps if s.t >= b.t and s.own_ticks is not None), key=lambda s: s.t, default=b)
            inside = [s.running for s in snaps if a.t <= s.t <= b.t and s.running is not None]
            return between(a, b, self.cores, inside or [x for x in (a.running, b.running) if x is not None])
        if len(snaps) < 2:
            return between(snaps[0], snaps[0], self.cores) if snaps else {}
        if t0 is not None and t1 is not None and t1 > t0:
            # The last snapshot at or before the serve phase began, the first at or after it ended.
            first = max((s for s in snaps if s.t <= t0), key=lambda s: s.t, default=snaps[0])
            last = min((s for s in snaps if s.t >= t1), key=lambda s: s.t, default=snaps[-1])
        else:
            first, last = snaps[0], snaps[-1]
        inside = [s.running for s in snaps if first.t <= s.t <= last.t and s.running is not None]
        return between(first, last, self.cores, inside)


def reasons(contention: dict) -> list[str]:
    """Why the contention `between` measured counts as contended (judge.contention_reasons)."""
    return judge.contention_reasons(contention.get("steal_pct"), contention.get("cotenant_pct"),
                                    contention.get("cotenant_cpu_s"))


def observations(contention: dict) -> list[dict]:
    """The contention figures a trial record carries (the judge's inputs among them)."""
    out = []
    for metric, key, unit in (("host_steal", "steal_pct", "percent"), ("host_cotenant", "cotenant_pct", "percent"),
                              ("host_cotenant_cpu_time", "cotenant_cpu_s", "s"),
                              ("host_runqueue", "runqueue_mean", "dimensionless"),
                              ("host_cpu_pressure", "cpu_pressure_pct", "percent"),
                              ("host_contention_window", "window_s", "s")):
        value = contention.get(key)
        if isinstance(value, (int, float)):
            out.append({"metric": metric, "value": float(value), "unit": unit})
    return out


def quiet_wait(cores: list[int], max_wait_s: float = 20.0, step_s: float = 1.0, read: Reader = read_proc,
               sleep: Callable[[float], None] = time.sleep) -> dict:
    """Wait (up to `max_wait_s`) for a `step_s` window in which `cores` see no contention the
    judge would count (no process tree of ours runs, so all busy time is other tenants'); the
    last window's figures."""
    waited, last = 0.0, {}
    while True:
        a = snapshot(None, read)
        sleep(step_s)
        b = snapshot(None, read)
        a = Snapshot(a.t, a.cpus, a.running, a.psi_us, 0)
        b = Snapshot(b.t, b.cpus, b.running, b.psi_us, 0)
        last = between(a, b, cores)
        waited += step_s
        if not reasons(last) or waited >= max_wait_s:
            return {**last, "waited_s": waited}
