"""Workload traces for the pilot: CSV with a header `time_s,rate[,mix]`, one row per point.

* `time_s`: seconds from the start, non-decreasing, the first 0; the trace ends at the last one.
  Two rows at one time make a step (the rate jumps there).
* `rate`: offered requests per second at that time, linearly interpolated between points.
* `mix` (optional): the request mix from that point on, `CONTEXT:SHARE` pairs joined by `;`
  (`32:0.6;128:0.4`: 60 % of requests carry 32-token inputs); shares sum to 1; empty keeps the
  previous mix (the contract's `context` before any).

Arrivals are a non-homogeneous Poisson process drawn by thinning from a seeded generator, so a
baseline replays exactly the arrivals the pilot saw. Every problem is a ConfigError naming the
file, the line and the column, raised before any service starts.
"""

from __future__ import annotations

import csv
import importlib.resources
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luma.errors import ConfigError, ContractError
from luma.kb.records.input_files import CONFIG_FILE, read_text

MAX_RATE = 100_000.0
MAX_ROWS = 100_000


@dataclass(frozen=True)
class Trace:
    """A parsed trace: points (time, rate), the mix in force from each point, and its origin."""

    name: str
    source: str
    times: tuple[float, ...]
    rates: tuple[float, ...]
    mixes: tuple[tuple[tuple[int, float], ...] | None, ...]

    @property
    def duration(self) -> float:
        return self.times[-1]

    def rate_at(self, t: float) -> float:
        """Offered rate at trace time t (the later value at a step)."""
        ts, rs = self.times, self.rates
        if t <= ts[0]:
            return rs[0]
        if t >= ts[-1]:
            return rs[-1]
        i = int(np.searchsorted(ts, t, side="right"))  # ts[i-1] <= t < ts[i]
        t0, t1, r0, r1 = ts[i - 1], ts[i], rs[i - 1], rs[i]
        return r0 if t1 == t0 else r0 + (r1 - r0) * (t - t0) / (t1 - t0)

    def mix_at(self, t: float) -> tuple[tuple[int, float], ...] | None:
        current = None
        for ti, mix in zip(self.times, self.mixes):
            if ti > t:
                break
            current = mix if mix is not None else current
        return current

    def contexts(self) -> list[int]:
        """Every context length the mix names (sorted)."""
        return sorted({c for m in self.mixes if m for c, _ in m})

    def scaled(self, duration: float | None = None, rate_scale: float = 1.0) -> "Trace":
        """The same shape replayed over `duration` seconds, rates multiplied by `rate_scale`."""
        k = 1.0 if not duration else duration / self.duration
        return Trace(self.name, self.source, tuple(t * k for t in self.times), tuple(r * rate_scale for r in self.rates),
                     self.mixes)

    def mean_rate(self, start: float, end: float, step: float = 0.05) -> float:
        """Mean offered rate over [start, end)."""
        n = max(1, int(math.ceil((end - start) / step)))
        return float(np.mean([self.rate_at(start + (i + 0.5) * (end - start) / n) for i in range(n)]))

    def arrivals(self, seed: int, default_context: int | None) -> list[tuple[float, int | None]]:
        """(trace time, context) of every request, by thinning a Poisson process at the peak rate."""
        peak = max(self.rates)
        if peak <= 0:
            return []
        rng = np.random.default_rng(seed)
        out, t = [], 0.0
        while True:
            t += rng.exponential(1.0 / peak)
            if t >= self.duration:
                return out
            u, pick = rng.random(), rng.random()
            if u * peak > self.rate_at(t):
                continue
            mix = self.mix_at(t)
            ctx = default_context
            if mix:
                acc = 0.0
                for c, share in mix:
                    acc += share
                    if pick < acc:
                        ctx = c
                        break
                else:
                    ctx = mix[-1][0]
            out.append((t, ctx))


def shipped() -> dict[str, Path]:
    """The traces that ship with LUMA, by name."""
    root = importlib.resources.files("luma.experiments.pilot.traces")
    return {p.name[:-4]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".csv")}


def _fail(msg: str, source: str, line: int | None = None, column: str | None = None) -> ConfigError:
    where = f"line {line}" + (f", {column}" if column else "") if line else column
    return ContractError(msg, source=source, field=where)


def _number(text: str, source: str, line: int, column: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise _fail(f"{text!r} is not a number", source, line, column) from None
    if not math.isfinite(value):
        raise _fail(f"{text!r} is not a finite number", source, line, column)
    return value


def _mix(text: str, source: str, line: int, max_context: int | None):
    if not text.strip():
        return None
    pairs = []
    for part in text.split(";"):
        ctx_text, sep, share_text = part.partition(":")
        if not sep:
            raise _fail(f"{part!r} is not CONTEXT:SHARE (e.g. 32:0.6)", source, line, "mix")
        ctx = _number(ctx_text.strip(), source, line, "mix")
        share = _number(share_text.strip(), source, line, "mix")
        if not ctx.is_integer() or ctx < 1:
            raise _fail(f"context {ctx_text.strip()!r} must be a whole number of tokens >= 1", source, line, "mix")
        if max_context is not None and ctx > max_context:
            raise _fail(f"context {int(ctx)} is longer than the service takes ({max_context} tokens)", source, line, "mix")
        if not 0 < share <= 1:
            raise _fail(f"share {share_text.strip()!r} must be in (0, 1]", source, line, "mix")
        pairs.append((int(ctx), share))
    total = sum(s for _, s in pairs)
    if abs(total - 1.0) > 1e-6:
        raise _fail(f"the shares sum to {total:g}, not 1", source, line, "mix")
    return tuple(pairs)


def parse(text: str, source: str, name: str, max_context: int | None = None) -> Trace:
    """A trace from CSV text (see the module docstring); ConfigError on any problem."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [(i + 1, r) for i, r in enumerate(rows) if r and not r[0].lstrip().startswith("#")]
    if not rows:
        raise _fail("empty trace: it needs a header time_s,rate[,mix] and at least two points", source)
    header = [h.strip() for h in rows[0][1]]
    if header[:2] != ["time_s", "rate"] or len(header) > 3 or (len(header) == 3 and header[2] != "mix"):
        raise _fail(f"header must be time_s,rate[,mix], not {','.join(header)}", source, rows[0][0])
    if len(rows) - 1 > MAX_ROWS:
        raise _fail(f"{len(rows) - 1} points: at most {MAX_ROWS}", source)
    times, rates, mixes = [], [], []
    for line, row in rows[1:]:
        if len(row) > len(header) or len(row) < 2:
            raise _fail(f"{len(row)} columns, the header has {len(header)}", source, line)
        t = _number(row[0].strip(), source, line, "time_s")
        r = _number(row[1].strip(), source, line, "rate")
        if r < 0 or r > MAX_RATE:
            raise _fail(f"rate {r:g} must be in [0, {MAX_RATE:g}] requests per second", source, line, "rate")
        if not times and t != 0:
            raise _fail(f"the first point must be at time 0, not {t:g}", source, line, "time_s")
        if times and t < times[-1]:
            raise _fail(f"time {t:g} goes back (the previous point is at {times[-1]:g})", source, line, "time_s")
        times.append(t)
        rates.append(r)
        mixes.append(_mix(row[2], source, line, max_context) if len(row) == 3 else None)
    if len(times) < 2 or times[-1] <= 0:
        raise _fail("a trace needs at least two points spanning more than 0 s", source)
    if max(rates) <= 0:
        raise _fail("every rate is 0: the trace offers no request", source, column="rate")
    return Trace(name, source, tuple(times), tuple(rates), tuple(mixes))


def load(ref: str | Path, project=None, max_context: int | None = None) -> Trace:
    """A trace by shipped name or CSV path (within the config-file size limit)."""
    path = Path(ref)
    if not path.is_file():
        named = shipped().get(str(ref))
        if named is None:
            raise ContractError(f"no trace file or shipped trace named {str(ref)!r} (shipped: {', '.join(sorted(shipped()))})",
                              source=str(ref))
        path = named
    text = read_text(path, CONFIG_FILE.of(project))
    return parse(text, str(path), path.stem, max_context)
