"""`luma machine characterize`: measure this host and describe it as a **measured** machine record.

* Memory bandwidth: NumPy copy and triad over buffers well beyond the last-level cache, in one
  process per core (each pinned to its core), started together by a handshake; a window's
  figure is the bytes all processes moved over the longest of their times; the best window of
  at least five counts. Bytes are what the NumPy operations read and write (the triad is two
  passes, so it moves 5 buffers' worth per iteration, not STREAM's 3).
* Matrix-multiply throughput per precision (fp32, bf16, int8) on 1..N cores: each core count
  in its own process with its CPU affinity set before torch is imported (torch sizes its
  thread pool from it), the size grown until one product takes long enough to time, best of
  at least five. int8 runs on `torch._int_mm` and on PyTorch's quantized engine (u8 x s8); the
  faster one is the figure and its method says which.
* Usable memory: `MemAvailable` from /proc/meminfo, capped by the cgroup limit; nothing large
  is ever allocated to find it.

A probe runs as `python -m luma.experiments.characterize PROBE SPEC_JSON` and prints one JSON
line; a failed probe is a `CharacterizeError`, never a figure.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from luma.errors import CharacterizeError
from luma.experiments.host import architecture, default_name, describe, git_revision
from luma.experiments.sprint import contention

TOOL = "luma machine characterize"
PRECISIONS = ("fp32", "bf16", "int8")


@dataclass(frozen=True)
class Budget:
    """How long each measurement may take."""

    window_s: float  # one bandwidth window
    windows: int  # bandwidth windows per kernel (best counts)
    op_s: float  # grow a product until one takes this long
    reps: int  # timed products per precision (best counts)
    max_n: int  # largest square matrix

    @classmethod
    def of(cls, quick: bool) -> "Budget":
        return cls(0.12, 5, 0.015, 5, 1024) if quick else cls(0.4, 8, 0.08, 8, 2048)


# -- facts read from the system (no measurement) -----------------------------------------------


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (sysfs), 32 MiB when unknown."""
    best = 0
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        m = re.fullmatch(r"(\d+)([KMG]?)", path.read_text().strip())
        if m:
            best = max(best, int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])
    return best or 32 << 20


def usable_memory_bytes() -> tuple[int, str]:
    """(bytes a new process may still use, how that was read): MemAvailable, capped by the cgroup."""
    avail = None
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    if avail is None:
        raise CharacterizeError("/proc/meminfo has no MemAvailable line")
    how = "MemAvailable from /proc/meminfo"
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max" and int(limit) - used < avail:
            avail, how = int(limit) - used, "cgroup memory.max minus memory.current"
    except (OSError, ValueError):
        pass
    return avail, how


# -- the probes (each in its own process) --------------------------------------------------------


def _pin(cpus: list[int]) -> None:
    os.sched_setaffinity(0, cpus)


def probe_stream(spec: dict) -> dict:
    """One bandwidth worker: set up, say `ready`, wait for the start time on stdin, then run
    `windows` copy windows and `windows` triad windows at the agreed times."""
    _pin([spec["cpu"]])
    import numpy as np

    n = spec["nbytes"] // 8
    a, b, c = (np.ones(n) for _ in range(3))  # touched now: page faults are not bandwidth
    np.copyto(b, a)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    w, gap = spec["window_s"], 0.02
    out = {"copy": [], "triad": []}
    kernels = {"copy": (lambda: np.copyto(b, a), 2 * 8 * n),
               "triad": (lambda: (np.multiply(c, 3.0, out=a), np.add(a, b, out=a)), 5 * 8 * n)}
    slot = 0
    for name in ("copy", "triad"):
        fn, nbytes = kernels[name]
        for _ in range(spec["windows"]):
            t0 = start + slot * (w + gap)
            slot += 1
            while time.monotonic() < t0:
                pass
            moved = 0
            while time.monotonic() < t0 + w:
                fn()
                moved += nbytes
            out[name].append([moved, time.monotonic() - t0])
    return out


def _time_best(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _grow(make, op_s: float, max_n: int) -> tuple[int, object]:
    """The smallest power-of-two size (>= 128) at which one product takes op_s, capped at max_n."""
    n = 128
    while True:
        fn = make(n)
        t = _time_best(fn, 1)
        if t >= op_s or n * 2 > max_n:
            return n, fn
        n *= 2


def probe_matmul(spec: dict) -> dict:
    """Matrix-multiply throughput per precision on the first `cores` usable CPUs."""
    cores = spec["cores"]
    _pin(spec["cpus"][:cores])
    import warnings

    import torch

    torch.set_num_threads(cores)
    op_s, reps, max_n = spec["op_s"], spec["reps"], spec["max_n"]
    out = {"cores": cores, "threads": torch.get_num_threads(), "figures": {}}

    def float_mm(dtype):
        def make(n):
            x, y = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
            return lambda: torch.mm(x, y)
        return make

    def int_mm(n):
        x = torch.randint(-127, 128, (n, n), dtype=torch.int8)
        y = torch.randint(-127, 128, (n, n), dtype=torch.int8)
        return lambda: torch._int_mm(x, y)

    def engine_mm(n):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the quantized-tensor constructors are deprecated
            qx = torch.quantize_per_tensor(torch.randn(n, n), 0.05, 128, torch.quint8)
            qw = torch.quantize_per_tensor(torch.randn(n, n), 0.05, 0, torch.qint8)
            packed = torch.ops.quantized.linear_prepack(qw, None)
        return lambda: torch.ops.quantized.linear(qx, packed, 1.0, 0)

    engine = torch.backends.quantized.engine
    paths = {"fp32": [("torch.mm float32", float_mm(torch.float32))],
             "bf16": [("torch.mm bfloat16", float_mm(torch.bfloat16))],
             "int8": [("torch._int_mm int8 x int8 -> int32", int_mm),
                      (f"quantized engine {engine} linear u8 x s8", engine_mm)]}
    for precision in spec["precisions"]:
        tried = []
        for method, make in paths[precision]:
            try:
                n, fn = _grow(make, op_s, max_n)
                best = _time_best(fn, reps)
            except (RuntimeError, AttributeError) as exc:  # a path this build lacks
                tried.append({"method": method, "error": f"{type(exc).__name__}: {exc}"[:200]})
                continue
            tried.append({"method": f"{method}, {n}x{n}x{n}, best of {reps}", "flops": 2 * n**3 / best})
        good = [t for t in tried if "flops" in t]
        out["figures"][precision] = {"best": max(good, key=lambda t: t["flops"]) if good else None, "tried": tried}
    if spec.get("environment"):
        # loaded only when asked, after the probe set its CPU affinity (torch, NumPy size their pools from it)
        from luma.kernels.evidence import environment_block

        # the sprint records' environment block (threads belong to a trial, not to the host)
        out["environment"] = environment_block(describe(), exclude=("torch_threads",))
    return out


PROBES = {"stream": probe_stream, "matmul": probe_matmul}


# -- the orchestrator --------------------------------------------------------------------------


def _cmd(probe: str, spec: dict) -> list[str]:
    return [sys.executable, "-m", "luma.experiments.characterize", probe, json.dumps(spec)]


def _answer(proc_out: str, proc_err: str, what: str) -> dict:
    lines = [ln for ln in proc_out.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc_err.strip().splitlines() or ["no output"])[-1]
        raise CharacterizeError(f"{what} probe failed: {tail}")
    return json.loads(lines[-1])


def run_matmul(cores: int, cpus: list[int], budget: Budget, environment: bool = False) -> dict:
    spec = {"cores": cores, "cpus": cpus, "precisions": list(PRECISIONS), "op_s": budget.op_s,
            "reps": budget.reps, "max_n": budget.max_n, "environment": environment}
    try:
        proc = subprocess.run(_cmd("matmul", spec), capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise CharacterizeError(f"matmul probe on {cores} cores took over 300 s") from None
    return _answer(proc.stdout, proc.stderr, f"matmul ({cores} cores)")


def run_stream(cores: int, cpus: list[int], budget: Budget, nbytes: int) -> dict:
    """Aggregate copy and triad bandwidth of `cores` pinned processes, in bytes/s (best window)."""
    procs = [subprocess.Popen(_cmd("stream", {"cpu": cpu, "nbytes": nbytes, "window_s": budget.window_s,
                                              "windows": budget.windows}),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cpu in cpus[:cores]]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise CharacterizeError(f"bandwidth probe failed: {(p.stderr.read().strip().splitlines() or ['no output'])[-1]}")
        start = time.monotonic() + 0.05
        for p in procs:
            p.stdin.write(f"{start}\n")
            p.stdin.flush()
        results = [_answer(*p.communicate(timeout=120), "bandwidth") for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    out = {}
    for kernel in ("copy", "triad"):
        windows = zip(*(r[kernel] for r in results), strict=True)
        out[kernel] = max(sum(m for m, _ in win) / max(s for _, s in win) for win in windows)
    return out


#: The note a record measured beside a neighbour carries (`allow_contended`): contract thresholds
#: relative to the host refuse such a calibration (experiments/sprint/calibration.py).
CONTENDED_NOTE = "contended:"


def characterize(quick: bool = False, cores: list[int] | None = None, name: str | None = None,
                 progress=lambda msg: None, allow_contended: bool = False) -> dict:
    """Measure this host; return a measured machine record (a dict in the record format). The
    host's contention over the measurement is judged by the sprint's rule: contended, it is a
    CharacterizeError (figures taken beside a neighbour are low), unless `allow_contended`, which
    keeps the figures with a note saying so."""
    watch = contention.Watch(usable_cpus(), interval_s=0.5).follow(os.getpid())
    try:
        doc = _characterize(quick, cores, name, progress)
    finally:
        seen = watch.stop()
    reasons = contention.reasons(seen)
    if reasons and not allow_contended:
        raise CharacterizeError(f"host too contended to characterize ({'; '.join(reasons)}): figures measured beside "
                                "a neighbour are low; run it on a quiet host (or allow a contended measurement: "
                                "kept with a note, never usable as a contract's calibration)")
    if reasons:
        doc["notes"].append(f"{CONTENDED_NOTE} measured beside a neighbour ({'; '.join(reasons)})")
    else:
        doc["notes"].append(f"Contention over the measurement: steal {seen.get('steal_pct')} %, other tenants "
                            f"{seen.get('cotenant_pct')} % of the usable CPUs' time")
    return doc


def _characterize(quick: bool, cores: list[int] | None, name: str | None, progress) -> dict:
    started = datetime.now(timezone.utc).replace(microsecond=0)
    cpus = usable_cpus()
    counts = sorted(set(cores or range(1, len(cpus) + 1)))
    bad = [c for c in counts if not 1 <= c <= len(cpus)]
    if bad:
        raise CharacterizeError(f"core counts must be from 1 to {len(cpus)} (the CPUs this process may use), got {bad}")
    budget = Budget.of(quick)
    usable, how = usable_memory_bytes()
    # Well beyond the last-level cache, and never more than a quarter of what is free for all workers.
    nbytes = min(max(4 * last_level_cache_bytes(), 64 << 20), usable // (4 * 3 * counts[-1]))
    memory = [{"tier": "host", "capacity": {"value": round(usable / 2**30, 3), "unit": "GiB"}, "method": how}]
    compute, env, notes = [], None, []
    for k in counts:
        progress(f"memory bandwidth on {_cores(k)}")
        bw = run_stream(k, cpus, budget, nbytes)
        kernel = max(bw, key=bw.get)
        memory.append({"tier": "host", "cores": k, "bandwidth": {"value": round(bw[kernel] / 1e9, 3), "unit": "GB/s"},
                       "method": f"NumPy {kernel}, {k} pinned process{'es' * (k != 1)}, {nbytes >> 20} MiB buffers, best of "
                                 f"{budget.windows} windows of {budget.window_s} s (copy {bw['copy'] / 1e9:.2f}, "
                                 f"triad {bw['triad'] / 1e9:.2f} GB/s)"})
    for k in counts:
        progress(f"matmul fp32/bf16/int8 on {_cores(k)}")
        res = run_matmul(k, cpus, budget, environment=k == counts[-1])
        env = res.get("environment", env)
        for precision in PRECISIONS:
            fig = res["figures"][precision]
            if fig["best"] is None:
                notes.append(f"{precision} on {_cores(k)}: no path worked ({'; '.join(t['error'] for t in fig['tried'])})")
                continue
            compute.append({"precision": precision, "cores": k, "dense": True, "method": fig["best"]["method"],
                            "throughput": {"value": round(fig["best"]["flops"] / 1e9, 3), "unit": "GFLOP/s"}})
            others = [t for t in fig["tried"] if t != fig["best"] and "flops" in t]
            notes += [f"{precision} on {_cores(k)}, slower path: {t['method']}: {t['flops'] / 1e9:.2f} GFLOP/s"
                      for t in others]
    arch = architecture()
    notes.append(f"Measured in {'quick' if quick else 'full'} mode on CPUs {cpus}; figures are per core count "
                 "(`cores`); the device-wide figure is the best of them. Other load on shared cores lowers them.")
    provenance = {"tool": TOOL, "host": socket.gethostname() or "unknown", "started": started.isoformat(),
                  **({"environment": env} if env else {})}
    rev = git_revision()
    if rev:
        provenance["git_revision"] = rev
    return {"record_type": "machine", "evidence_class": "measured", "name": name or default_name(arch["name"], len(cpus)),
            "architecture": arch, "count": 1, "compute": compute, "memory": memory, "notes": notes,
            "provenance": provenance}


def _cores(k: int) -> str:
    return f"{k} core{'s' * (k != 1)}"


def main(argv: list[str]) -> int:
    probe, spec = argv
    print(json.dumps(PROBES[probe](json.loads(spec))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
