"""Which GEMM path `auto` runs, measured per shape class on this machine and kept on disk.

A shape class is (mode, M bucket, K class, N class, torch threads): M in buckets 1, 2-4, 5-16,
17-64, 65-255, 256-1023, >= 1024 (the fastest path changes with M: on an AVX-512 VNNI host the
engines win at M <= 16 by 5x or more and `torch._int_mm` at M >= 1024), K and N rounded up to a
power of two. On first use of a class every candidate path this build has is packed once and
timed on the class's representative shape (one warm-up call each, then rounds of one call per
candidate in turn, so a neighbour's load falls on all of them; the minimum of each wins).

Choices are kept in a JSON file in `luma.settings.kernel_cache()` for this CPU model, ISA and
torch version (written atomically; a corrupt file or one from another machine or torch is ignored
and rewritten, never an error), so a process pays for a class's probe once per machine.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from luma.experiments.host import cpu
from luma.kernels import gemm_backend
from luma.settings import kernel_cache

FORMAT = 1
FILE_NAME = "int8-gemm-choices.json"
#: (label, lowest M, highest M or None, the M a probe runs)
M_BUCKETS = (("1", 1, 1, 1), ("2-4", 2, 4, 4), ("5-16", 5, 16, 16), ("17-64", 17, 64, 64),
             ("65-255", 65, 255, 128), ("256-1023", 256, 1023, 256), (">=1024", 1024, None, 1024))
#: Seconds of timed calls a probe spends per candidate at most (after at least MIN_ROUNDS rounds).
PROBE_BUDGET_S = 0.02
MIN_ROUNDS, MAX_ROUNDS = 3, 15


def m_bucket(m: int) -> tuple[str, int]:
    """(label, representative M) of the bucket holding M rows."""
    for label, lo, hi, rep in M_BUCKETS:
        if m >= lo and (hi is None or m <= hi):
            return label, rep
    return M_BUCKETS[0][0], M_BUCKETS[0][3]


def size_class(d: int) -> int:
    """d rounded up to a power of two."""
    return 1 << max(0, (d - 1).bit_length())


def shape_key(mode: str, m: int, k: int, n: int, threads: int | None = None) -> str:
    """The cache key of a shape class."""
    threads = threads or torch.get_num_threads()
    return f"{mode}|m{m_bucket(m)[0]}|k{size_class(k)}|n{size_class(n)}|t{threads}"


def identity() -> dict:
    """What a cached choice is valid for: this CPU model and ISA, this torch."""
    host = cpu()
    return {"format": FORMAT, "cpu_model": host["cpu_model"], "isa": host["isa"], "torch": torch.__version__}


class ChoiceTable:
    """The measured choices of one cache folder (read once, merged and rewritten on each new choice)."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder
        self._choices: dict[str, dict] | None = None

    @property
    def path(self) -> Path:
        return (self.folder or kernel_cache()) / FILE_NAME

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # absent or corrupt: measured again, then rewritten
        if not isinstance(data, dict) or data.get("identity") != identity() or not isinstance(data.get("choices"), dict):
            return {}  # another machine's or another torch's: not ours to use
        return {k: v for k, v in data["choices"].items()
                if isinstance(v, dict) and isinstance(v.get("path"), str) and v["path"] in gemm_backend.PATHS}

    def get(self, key: str) -> dict | None:
        if self._choices is None:
            self._choices = self._read()
        return self._choices.get(key)

    def put(self, key: str, entry: dict) -> None:
        """Keep `entry` and write the file atomically; a folder that cannot be written keeps the
        choice in memory only."""
        choices = {**self._read(), **(self._choices or {}), key: entry}
        self._choices = choices
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".choices-", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump({"identity": identity(), "choices": choices}, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)


#: The process's table (tests point it at a temporary folder through LUMA_KERNEL_CACHE and `reset`).
TABLE = ChoiceTable()


def reset(folder: Path | None = None) -> None:
    """Forget the choices read so far (and read them from `folder`, else the default cache)."""
    global TABLE
    TABLE = ChoiceTable(folder)


def measure(mode: str, m: int, k: int, n: int, paths: Iterable[str] | None = None,
            timer: Callable[[], float] = time.perf_counter, compare_all: bool = False) -> dict:
    """Time each candidate path on a random (m, k) x (n, k) int8 layer: {"path": fastest,
    "times_s": {path: min seconds}, "m", "k", "n"}. A path that fails here is left out, one
    whose second warm-up call took over 10x the fastest one's is not timed further."""
    gen = torch.Generator().manual_seed(m * 7919 + k * 31 + n)
    q = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
    scale = torch.rand(n, generator=gen) * 0.01 + 1e-3
    bias = torch.randn(n, generator=gen)
    x = torch.randn(m, k, generator=gen)
    runs, first = {}, {}
    # compare_all (`luma kernels tune`) also times the paths auto never takes, for the table.
    for name in paths or gemm_backend.candidates(mode, m, all_paths=compare_all):
        path = gemm_backend.PATHS[name]
        try:
            packed = path.pack(q, scale, bias)
            path.run(x, packed, scale, bias)  # lazy set-up (onednn builds its primitive) untimed
            t = timer()
            path.run(x, packed, scale, bias)
            first[name] = timer() - t
        except RuntimeError:
            continue  # this build cannot run it on this shape
        runs[name] = lambda path=path, packed=packed: path.run(x, packed, scale, bias)
    # A path with no fast kernel here (10x the fastest) is kept out of the timed rounds.
    runs = {name: fn for name, fn in runs.items() if first[name] <= 10 * min(first.values())}
    times: dict[str, list[float]] = {name: [] for name in runs}
    spent, rounds = 0.0, 0
    while runs and rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or spent < PROBE_BUDGET_S * len(runs)):
        for name, fn in runs.items():
            t = timer()
            fn()
            dt = timer() - t
            times[name].append(dt)
            spent += dt
        rounds += 1
    best = {name: min(ts) for name, ts in times.items()}
    allowed = [name for name in best if gemm_backend.PATHS[name].auto]
    choice = min(allowed, key=best.get) if allowed else ""
    # the paths left out are reported with their second warm-up call
    return {"path": choice, "times_s": {**first, **best}, "m": m, "k": k, "n": n}


def choose(mode: str, m: int, k: int, n: int) -> str:
    """The path `auto` runs for this shape: the cached choice of its class, measured on first use."""
    key = shape_key(mode, m, k, n)
    entry = TABLE.get(key)
    if entry is not None and not gemm_backend.PATHS[entry["path"]].available():
        entry = None  # chosen where the path could run (its native kernel built): measure again here
    if entry is None:
        entry = measure(mode, m_bucket(m)[1], k, n)
        if not entry["path"]:
            return gemm_backend.candidates(mode, m)[0]
        TABLE.put(key, entry)
    return entry["path"]


#: The shape classes `luma kernels tune` measures by default: (K, N).
COMMON_SHAPES = ((1024, 1024), (4096, 4096))


def tune(shapes: Iterable[tuple[int, int]] = COMMON_SHAPES, modes: Iterable[str] = ("dynamic", "weight-only"),
         progress: Callable[[str], None] | None = None) -> list[dict]:
    """Measure every M bucket of each (K, N) again and keep the choices: one row per class with
    the chosen path and each candidate's time."""
    rows = []
    for mode in modes:
        for k, n in shapes:
            for label, _, _, rep in M_BUCKETS:
                if progress:
                    progress(f"{mode} M {label} K {k} N {n}")
                entry = measure(mode, rep, k, n, compare_all=True)
                if entry["path"]:
                    TABLE.put(shape_key(mode, rep, k, n), entry)
                rows.append({"mode": mode, "m_bucket": label, "m": rep, "k": k, "n": n, "threads": torch.get_num_threads(),
                             "choice": entry["path"], "times_s": entry["times_s"]})
    return rows
