"""Length mixes: a workload's prompt and output lengths as a distribution, not one fixed pair.

A `LengthMix` holds a few joint representative points (prompt, output, weight), weights summing to
1, that the serving model evaluates one by one and weights: throughput from the mix's means, TTFT
and latency percentiles from the points' distribution. Each marginal is tabulated on a fine grid
of probability levels (`GRID`) from what the user states:

* a fixed count (one point);
* statistics (`mean`, `std`/`cv`, `min`, `max`, percentiles `p50`, `p90`, `p99`, any `pNN`): the
  quantile function runs through every stated percentile (log-linear in the normal score, so one
  percentile and a spread is a log-normal), the tails beyond them are straight in the same scale
  with the upper (then lower) slope solved so the mean comes out as stated, and `min`/`max` clip
  (a dataset filter or a max_tokens); a spread nobody stated is `ASSUMED_CV`, said in
  `assumptions`;
* a histogram (bin edges and counts; uniform within a bin).

The grid is then cut into `BIN_EDGES` probability bins per marginal (finer in the upper tail,
where the latency percentiles come from), each represented by its conditional mean, so the
points' mean equals the distribution's; the two marginals are joined independently or through a
Gaussian copula with a stated rank correlation: at most 4 x 4 = 16 points, because the model
evaluates every point over millions of states.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from luma.errors import ContractError
from luma.experiments.model.length_presets import PRESETS as PRESET_STATS

#: Probability levels each marginal is tabulated at (cell midpoints of [0, 1]).
GRID = 4_000
#: Probability edges of the bins each marginal is cut into.
BIN_EDGES = (0.0, 0.5, 0.8, 0.95, 1.0)
#: Coefficient of variation assumed for a marginal stated by its mean or one percentile alone: the
#: openchat-sharegpt4 trace's (length_presets.SHAREGPT4_FILE: prompt 0.89, output 0.61).
ASSUMED_CV = {"prompt": 0.89, "output": 0.61}
_PCT = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")
_NORMAL = NormalDist()
_SLOPE_MAX = 6.0   # a log-scale slope per normal score beyond this is not a length distribution
_SLOPE_LOW_MAX = 40.0   # the lower tail falls to min almost at once
_LAMBDA_MAX = 30.0      # Box-Cox power: beyond it, interpolation is a step to the nearer percentile


@cache
def _levels() -> tuple[np.ndarray, np.ndarray]:
    u = (np.arange(GRID) + 0.5) / GRID
    return u, np.array([_NORMAL.inv_cdf(x) for x in u])


class Source(NamedTuple):
    """Where a preset's statistics come from: title, url, how they were read."""
    title: str
    url: str | None = None
    notes: tuple[str, ...] = ()


class Points(NamedTuple):
    """A mix's joint representative points: token counts (bin means) and weights summing to 1."""
    prompt: np.ndarray
    output: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True, eq=False)
class Marginal:
    """One length's distribution: token counts at the `GRID` probability levels (ascending)."""
    values: np.ndarray
    stated: tuple[tuple[str, float], ...] = ()
    assumptions: tuple[str, ...] = ()

    def quantile(self, q: float) -> float:
        """The length at probability level q (0..1)."""
        return float(np.interp(q, _levels()[0], self.values))

    @property
    def fixed(self) -> bool:
        """Whether the length never varies."""
        return bool(self.values[0] == self.values[-1])

    @property
    def mean(self) -> float:
        return float(self.values.mean())

    @property
    def mean_sq(self) -> float:
        return float(np.mean(self.values ** 2))

    def bins(self) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
        """(bin means, bin probabilities, probability edges); one bin where the length is fixed."""
        edges = (0.0, 1.0) if self.fixed else BIN_EDGES
        idx = [round(e * GRID) for e in edges]
        means = np.array([self.values[a:b].mean() for a, b in zip(idx, idx[1:])])
        return means, np.diff(edges), edges


def _number(value, field: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ContractError(f"expected a number, got {value!r}", field=field)
    x = float(value)
    if not math.isfinite(x):
        raise ContractError(f"{x} is not a finite number", field=field)
    if x < 0 or (positive and x == 0):
        raise ContractError(f"{value} must be {'positive' if positive else 'zero or more'}", field=field)
    return x


def fixed_marginal(tokens, field: str) -> Marginal:
    """A length that never varies."""
    x = _number(tokens, field)
    return Marginal(np.full(GRID, x), (("fixed", x),))


def histogram(edges, counts, field: str) -> Marginal:
    """A length from a histogram: bin `edges` (ascending, n + 1) and `counts` (n), uniform within bins."""
    e = np.array([_number(v, f"{field}.edges[{i}]", positive=False) for i, v in enumerate(edges)])
    c = np.array([_number(v, f"{field}.counts[{i}]", positive=False) for i, v in enumerate(counts)])
    if len(e) < 2 or len(c) != len(e) - 1:
        raise ContractError(f"{len(e)} edges need {max(len(e) - 1, 1)} counts, got {len(c)}", field=f"{field}.counts")
    if np.any(np.diff(e) <= 0):
        raise ContractError("edges must increase", field=f"{field}.edges")
    if c.sum() <= 0:
        raise ContractError("counts are all zero", field=f"{field}.counts")
    cdf = np.concatenate([[0.0], np.cumsum(c) / c.sum()])
    keep = np.concatenate([[True], np.diff(cdf) > 0])   # empty bins add no probability
    values = np.interp(_levels()[0], cdf[keep], e[keep])
    return Marginal(values, (("mean", float(values.mean())),))


def _check(stats: Mapping, field: str) -> dict[str, float]:
    out = {}
    for key, value in stats.items():
        m = _PCT.match(str(key))
        if key not in ("mean", "std", "cv", "min", "max") and not (m and 0 < float(m.group(1)) < 100):
            raise ContractError(f"unknown key {key!r} (known: mean, std, cv, min, max, p1 .. p99.9)",
                                field=f"{field}.{key}")
        out[key] = _number(value, f"{field}.{key}", positive=key not in ("std", "cv", "min"))
    if "mean" not in out and not any(_PCT.match(k) for k in out):
        raise ContractError("needs a mean or a percentile (p50, p90, ...)", field=field)
    if ("std" in out or "cv" in out) and "mean" not in out:
        raise ContractError("a std or cv needs the mean", field=field)
    ordered = sorted(((float(k[1:]), k) for k in out if _PCT.match(k)))
    chain = [("min", out["min"])] if "min" in out else []
    chain += [(k, out[k]) for _, k in ordered] + ([("max", out["max"])] if "max" in out else [])
    for (ka, a), (kb, b) in zip(chain, chain[1:]):
        if a > b:
            raise ContractError(f"{ka} ({a:g}) > {kb} ({b:g}): percentiles out of order", field=f"{field}.{kb}")
    if "mean" in out and not out.get("min", 0) <= out["mean"] <= out.get("max", math.inf):
        raise ContractError(f"mean {out['mean']:g} lies outside min..max", field=f"{field}.mean")
    return out


def _bisect(f, lo: float, hi: float) -> float:
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def _table(zs: np.ndarray, vs: np.ndarray, s_lo: float, s_hi: float, lam: float, lo: float, hi: float):
    """Lengths at the grid's normal scores: through (zs, vs), interpolated linearly in the Box-Cox
    transform of power `lam` (0: log, so one percentile and a slope is a log-normal), log-linear
    tails of slopes s_lo / s_hi beyond the ends, clipped to lo..hi."""
    z = _levels()[1]
    t = np.log(vs) if lam == 0 else (vs ** lam - 1) / lam
    ti = np.interp(z, zs, t)
    y = np.log(np.maximum(1 + lam * ti, 1e-300)) / lam if lam != 0 else ti
    y = np.where(z < zs[0], math.log(vs[0]) + s_lo * (z - zs[0]), y)
    y = np.where(z > zs[-1], math.log(vs[-1]) + s_hi * (z - zs[-1]), y)
    return np.clip(np.exp(y), lo, hi)


def stats_marginal(stats: Mapping, field: str, which: str = "prompt") -> Marginal:
    """A length from stated statistics (module docstring), clipped to min..max."""
    s = _check(stats, field)
    lo, hi = s.get("min", 0.0), s.get("max", math.inf)
    spread_stated = "cv" in s or "std" in s
    cv = (s["cv"] if "cv" in s else s["std"] / s["mean"]) if spread_stated else ASSUMED_CV[which]
    sigma = math.sqrt(math.log1p(cv * cv))
    pct = sorted((_NORMAL.inv_cdf(float(k[1:]) / 100), v) for k, v in s.items() if _PCT.match(k))
    zs, vs = np.array([p[0] for p in pct]), np.array([p[1] for p in pct])
    notes = [] if spread_stated or len(pct) > 1 else [
        f"spread not stated: coefficient of variation {cv:g} assumed (ASSUMED_CV)"]
    done = lambda values, *more: Marginal(values, tuple(s.items()), tuple(notes) + more)  # noqa: E731
    target = s.get("mean")
    if not pct:                      # a mean alone: a log-normal of the stated or assumed spread
        m = _bisect(lambda mu: _table(np.zeros(1), np.array([math.exp(mu)]), sigma, sigma, 0, lo, hi).mean()
                    - target, math.log(target) - 20, math.log(target) + 20)
        return done(_table(np.zeros(1), np.array([math.exp(m)]), sigma, sigma, 0, lo, hi))
    if len(pct) > 1:
        s_lo = math.log(vs[1] / vs[0]) / (zs[1] - zs[0])
        s_hi = math.log(vs[-1] / vs[-2]) / (zs[-1] - zs[-2])
    else:
        s_lo = s_hi = sigma
    if target is None:
        return done(_table(zs, vs, s_lo, s_hi, 0, lo, hi))
    mean = lambda a, b, lam=0.0: _table(zs, vs, a, b, lam, lo, hi).mean()  # noqa: E731
    if len(pct) == 1 and not spread_stated and mean(0, 0) <= target <= mean(_SLOPE_MAX, _SLOPE_MAX):
        x = _bisect(lambda x: mean(x, x) - target, 0.0, _SLOPE_MAX)   # a log-normal through both
        notes.clear()  # its spread follows from the two: none assumed
        return done(_table(zs, vs, x, x, 0, lo, hi))
    # The mean decides the tails: the upper one first; then how the values between two stated
    # percentiles lean towards the upper (or lower) one; then the lower tail.
    if mean(s_lo, 0) <= target <= mean(s_lo, _SLOPE_MAX):
        x = _bisect(lambda x: mean(s_lo, x) - target, 0.0, _SLOPE_MAX)
        return done(_table(zs, vs, s_lo, x, 0, lo, hi))
    if target > mean(s_lo, _SLOPE_MAX):
        if len(pct) > 1 and mean(s_lo, _SLOPE_MAX, _LAMBDA_MAX) >= target:
            x = _bisect(lambda lam: mean(s_lo, _SLOPE_MAX, lam) - target, 0.0, _LAMBDA_MAX)
            return done(_table(zs, vs, s_lo, _SLOPE_MAX, x, lo, hi),
                        "values between stated percentiles lean towards the upper one to reach the mean")
        raise ContractError(f"mean {target:g} is above what the stated percentiles and max allow",
                            field=f"{field}.mean")
    if mean(_SLOPE_LOW_MAX, 0) <= target:
        x = _bisect(lambda x: target - mean(x, 0), s_lo, _SLOPE_LOW_MAX)
        return done(_table(zs, vs, x, 0, 0, lo, hi), "no upper tail beyond the last percentile")
    if len(pct) > 1 and mean(_SLOPE_LOW_MAX, 0, -_LAMBDA_MAX) <= target:
        x = _bisect(lambda lam: target - mean(_SLOPE_LOW_MAX, 0, lam), -_LAMBDA_MAX, 0.0)
        return done(_table(zs, vs, _SLOPE_LOW_MAX, 0, x, lo, hi), "no upper tail beyond the last percentile",
                    "values between stated percentiles lean towards the lower one to reach the mean")
    raise ContractError(f"mean {target:g} is below what the stated percentiles and min allow", field=f"{field}.mean")


def parse_stats(text: str, field: str) -> dict[str, float]:
    """Statistics from a short text: "mean=512,p90=2048"."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        try:
            out[key.strip()] = float(value) if eq else None
        except ValueError:
            raise ContractError(f"{value.strip()!r} is not a number", field=f"{field}.{key.strip()}") from None
        if not eq:
            raise ContractError(f"expected key=value, got {part!r}", field=field)
    return out


def marginal(value, field: str, which: str = "prompt") -> Marginal:
    """One marginal from what a user writes: a count, statistics, "mean=..,p90=.." or {edges, counts}."""
    if isinstance(value, Marginal):
        return value
    if isinstance(value, str):
        value = parse_stats(value, field)
    if isinstance(value, Mapping):
        if "edges" in value or "counts" in value:
            extra = set(value) - {"edges", "counts"}
            if extra:
                raise ContractError(f"unknown key {sorted(extra)[0]!r} in a histogram (edges, counts)", field=field)
            return histogram(value.get("edges", ()), value.get("counts", ()), field)
        return stats_marginal(value, field, which)
    return fixed_marginal(value, field)


@dataclass(frozen=True, eq=False)
class LengthMix:
    """Joint prompt/output lengths as a few weighted points (module docstring)."""
    prompt_dist: Marginal
    output_dist: Marginal
    name: str = "custom"
    source: Source | None = None
    rank_correlation: float = 0.0

    @cached_property
    def points(self) -> Points:
        """The representative points (prompt, output, weight); at most 16."""
        pv, pw, pe = self.prompt_dist.bins()
        ov, ow, oe = self.output_dist.bins()
        if self.rank_correlation == 0.0 or len(pw) == 1 or len(ow) == 1:
            w = np.outer(pw, ow)
        else:   # Gaussian copula: the normal correlation whose Spearman rank correlation is the one stated
            rho = float(np.clip(2 * math.sin(math.pi * self.rank_correlation / 6), -0.999, 0.999))
            u, z = _levels()
            sub, zs = u[::10], z[::10]
            cuts = np.array([_NORMAL.inv_cdf(e) if 0 < e < 1 else math.copysign(math.inf, e - 0.5) for e in oe])
            phi = np.vectorize(_NORMAL.cdf)
            cond = phi((cuts[None, :] - rho * zs[:, None]) / math.sqrt(1 - rho * rho))
            per_cell = np.diff(cond, axis=1)
            w = np.array([per_cell[(sub >= a) & (sub < b)].sum(axis=0) for a, b in zip(pe, pe[1:])]) / len(sub)
        p, o = np.meshgrid(pv, ov, indexing="ij")
        keep = w.ravel() > 0
        weight = w.ravel()[keep]
        return Points(p.ravel()[keep], o.ravel()[keep], weight / weight.sum())

    @property
    def mean_prompt(self) -> float:
        return self.prompt_dist.mean

    @property
    def mean_output(self) -> float:
        return self.output_dist.mean

    @property
    def mean_prompt_sq(self) -> float:
        """E[P^2] of the distribution (the points, bin means, understate it)."""
        return self.prompt_dist.mean_sq

    @property
    def mean_total(self) -> float:
        return self.mean_prompt + self.mean_output

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What the mix assumes beyond the stated figures, one line each."""
        out = [f"{w}: {a}" for w, d in (("prompt", self.prompt_dist), ("output", self.output_dist))
               for a in d.assumptions]
        if self.rank_correlation == 0.0 and len(self.points.weight) > 1:
            out.append("prompt and output lengths independent (rank correlation 0)")
        return tuple(out)

    def quantile(self, which: str, q: float) -> float:
        """The `which` ("prompt" or "output") length at probability level q (0..1)."""
        dist = {"prompt": self.prompt_dist, "output": self.output_dist}.get(which)
        if dist is None:
            raise ContractError(f"unknown length {which!r} (prompt, output)", field="which")
        if not 0 <= _number(q, "q", positive=False) <= 1:
            raise ContractError(f"{q} is not a probability level (0..1)", field="q")
        return dist.quantile(q)

    def latency_output(self, q: float) -> float:
        """The output length a whole request's latency at probability level q is read at: the
        q-quantile of the output lengths, NaN when they never vary (a fixed-length load's latency
        quantile comes from the tail factor instead)."""
        return np.nan if self.output_dist.fixed else self.quantile("output", q)

    def describe(self) -> str:
        """The mix in a few lines: source, stated vs fitted figures, points, assumptions."""
        lines = [f"length mix {self.name}"]
        if self.source:
            lines.append(f"  source: {self.source.title}" + (f" <{self.source.url}>" if self.source.url else ""))
        for which, d in (("prompt", self.prompt_dist), ("output", self.output_dist)):
            stated = ", ".join(f"{k} {v:g}" for k, v in d.stated)
            lines.append(f"  {which}: stated {stated}; mix mean {d.mean:.1f}, p50 {d.quantile(.5):.0f}, "
                         f"p90 {d.quantile(.9):.0f}, p99 {d.quantile(.99):.0f}")
        pts = self.points
        lines.append("  points (prompt, output, weight): " + "; ".join(
            f"({p:.0f}, {o:.0f}, {w:.4f})" for p, o, w in zip(pts.prompt, pts.output, pts.weight)))
        lines += [f"  assumes {a}" for a in self.assumptions]
        return "\n".join(lines)


def fixed(prompt, output, name: str | None = None) -> LengthMix:
    """One fixed (prompt, output) pair: one point of weight 1."""
    p, o = fixed_marginal(prompt, "prompt"), fixed_marginal(output, "output")
    return LengthMix(p, o, name or f"{p.mean:g}x{o.mean:g}")


def _correlation(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= float(value) <= 1:
        raise ContractError(f"{value!r} is not a rank correlation (-1..1)", field=field)
    return float(value)


def from_stats(prompt, output, *, rank_correlation=0.0, name: str = "custom", source: Source | None = None,
               field: str = "lengths") -> LengthMix:
    """A mix from per-marginal statistics ({"mean", "p50", "p90", "p99", "min", "max", ...}), counts,
    histograms or "mean=..,p90=.." texts."""
    return LengthMix(marginal(prompt, f"{field}.prompt", "prompt"), marginal(output, f"{field}.output", "output"),
                     name, source, _correlation(rank_correlation, f"{field}.rank_correlation"))


def from_histogram(prompt, output, *, name: str = "custom", field: str = "lengths") -> LengthMix:
    """A mix from per-marginal histograms: each {"edges": [...], "counts": [...]} or (edges, counts)."""
    as_map = lambda h: h if isinstance(h, Mapping) else dict(zip(("edges", "counts"), h))  # noqa: E731
    return from_stats(as_map(prompt), as_map(output), name=name, field=field)


def preset(name: str, field: str = "lengths") -> LengthMix:
    """A named mix of a common dataset, with its source (length_presets.PRESETS)."""
    if str(name).strip().lower() in PRESET_STATS:
        return _preset(str(name).strip().lower())
    raise ContractError(f"unknown length preset {name!r} (known: {', '.join(PRESET_STATS)})", field=field)


@cache   # a mix is immutable; a preset's fit is the same every time
def _preset(name: str) -> LengthMix:
    entry = PRESET_STATS[name]
    src = Source(entry["title"], entry.get("url"), tuple(entry.get("notes", ())))
    return from_stats(entry["prompt"], entry["output"], rank_correlation=entry.get("rank_correlation", 0.0),
                      name=name, source=src, field=f"preset {name}")


_PAIR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*[x,/]\s*(\d+(?:\.\d+)?)\s*$")
_SIDES = re.compile(r"^\s*prompt\s*:(?P<prompt>[^;]*);\s*output\s*:(?P<output>[^;]*)$", re.IGNORECASE)


def parse(value, field: str = "lengths") -> LengthMix:
    """A mix from what a user writes: a [prompt, output] pair, a preset name, "512x128", a table
    {prompt = {...}, output = {...}, rank_correlation = 0.3}, or "prompt: mean=512,p90=2048; output: mean=128"."""
    if isinstance(value, LengthMix):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in PRESET_STATS:
            return preset(text, field)
        if m := _PAIR.match(text):
            return fixed(float(m.group(1)), float(m.group(2)))
        if m := _SIDES.match(text):
            return from_stats(m.group("prompt"), m.group("output"), field=field)
        raise ContractError(f"unknown length preset {value!r} (known: {', '.join(PRESET_STATS)}); or write a "
                            "pair \"512x128\" or \"prompt: mean=..,p90=..; output: mean=..\"", field=field)
    if isinstance(value, Mapping):
        extra = set(value) - {"prompt", "output", "rank_correlation", "name"}
        if extra:
            raise ContractError(f"unknown key {sorted(extra)[0]!r} (prompt, output, rank_correlation, name)",
                                field=f"{field}.{sorted(extra)[0]}")
        for side in ("prompt", "output"):
            if side not in value:
                raise ContractError(f"missing {side}", field=f"{field}.{side}")
        return from_stats(value["prompt"], value["output"], rank_correlation=value.get("rank_correlation", 0.0),
                          name=str(value.get("name", "custom")), field=field)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        p, o = fixed_marginal(value[0], f"{field}[0]"), fixed_marginal(value[1], f"{field}[1]")
        return LengthMix(p, o, f"{p.mean:g}x{o.mean:g}")
    raise ContractError(f"expected a preset name, a [prompt, output] pair or a table, got {value!r}", field=field)
