"""Metric names and the units their values take, declared once for every layer.

A record's contract clause must name a metric registered here, in a unit of its kind
(`p99_latency <= 200 GiB` is refused); an observation may carry telemetry of any name, but a
registered one must be in a unit of its kind too. The names are those LUMA's tools write
(sprints, `luma kernels`, the model) and its example records use; percentiles match a pattern
(`p99_latency`, `p99.9_ttft`, or `ttft_p99`). `luma.experiments.sprint.contract` takes the units of the
metrics a sprint judges from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from luma.kb.records import units


@dataclass(frozen=True)
class Kind:
    """What a metric measures: the canonical units (`units.CANONICAL_UNITS`) its values convert to."""

    description: str  # "a time"
    canonical: tuple[str, ...]
    example: str  # a unit to suggest
    #: Whether a value below zero is impossible (a time, an amount, a rate); scores may be negative.
    nonnegative: bool = True

    def fits(self, unit: str) -> bool:
        """True when `unit` (already known to convert) is a unit of this kind."""
        return units.normalise(1, unit)[1] in self.canonical


TIME = Kind("a time", ("second",), "ms")
SCORE = Kind("a dimensionless score", ("dimensionless",), "dimensionless", nonnegative=False)
REQUEST_RATE = Kind("a rate of requests", ("request / second", "hertz"), "request/s or 1/s")
TOKEN_RATE = Kind("a rate of tokens", ("token / second", "hertz"), "token/s or 1/s")
MEMORY = Kind("an amount of memory", ("byte",), "MiB")
BANDWIDTH = Kind("a bandwidth", ("byte / second",), "GB/s")
POWER = Kind("a power", ("watt",), "W")
ENERGY = Kind("an energy", ("joule",), "J")
ENERGY_PER_TOKEN = Kind("an energy per token", ("joule / token",), "J/token")
ENERGY_PER_REQUEST = Kind("an energy per request", ("joule / request",), "J/request")
COST = Kind("a cost", ("euro", *units.CURRENCIES), "USD")
COST_PER_REQUEST = Kind("a cost per request", ("euro / request", *(f"{c} / request" for c in units.CURRENCIES)),
                        "USD/request")
#: An accepted output is a request (embeddings, classes) or a token (generation).
COST_PER_OUTPUT = Kind("a cost per accepted output",
                       tuple(f"{c} / {o}" for c in ("euro", *units.CURRENCIES) for o in ("request", "token")),
                       "USD/request or USD/token")
ENERGY_PER_OUTPUT = Kind("an energy per accepted output", ("joule / request", "joule / token"), "J/request")
REQUESTS = Kind("a number of requests", ("request",), "request")

#: Metrics by exact name.
METRICS: dict[str, Kind] = {
    # Quality of the service's answers, and the scores `luma kernels` reports.
    **dict.fromkeys(("quality", "accuracy", "agreement", "cosine_similarity", "quality_cosine", "accuracy_change",
                     "mean_cosine_to_fp32", "min_cosine_to_fp32", "fraction_of_copy_bandwidth", "speedup_vs_fp32",
                     "relative_error_vs_fp64"), SCORE),
    "throughput": REQUEST_RATE,
    **dict.fromkeys(("token_throughput", "decode_throughput", "decode_rate"), TOKEN_RATE),
    # Mean times (the model's predictions) and the timings of sprints and kernel benchmarks.
    **dict.fromkeys(("latency", "ttft", "tpot", "wall_time", "time_min", "time_median"), TIME),
    **dict.fromkeys(("peak_rss", "weight_memory", "weight_memory_fp32", "weight_bytes", "runtime_footprint",
                     "memory_need"), MEMORY),
    "effective_bandwidth": BANDWIDTH,
    "completed_requests": REQUESTS,
    # Reliability and economics of an accepted service (contract clauses the pilot judges).
    **dict.fromkeys(("error_rate", "availability"), SCORE),
    "cost_per_accepted": COST_PER_OUTPUT,
    "energy_per_accepted": ENERGY_PER_OUTPUT,
    **dict.fromkeys(("rate", "capacity"), REQUEST_RATE),
    "power": POWER,
    "energy": ENERGY,
    "energy_per_token": ENERGY_PER_TOKEN,
    "energy_per_request": ENERGY_PER_REQUEST,
    "cost": COST,
    "cost_per_request": COST_PER_REQUEST,
    # The host's contention over a trial's serve phase (experiments/sprint/contention.py): shares
    # of the trial's cores' time (percent), mean runnable tasks, other tenants' CPU time.
    **dict.fromkeys(("host_steal", "host_cotenant", "host_cpu_pressure", "host_runqueue"), SCORE),
    **dict.fromkeys(("host_cotenant_cpu_time", "host_contention_window"), TIME),
}
#: Timed phases whose percentiles are metrics (`pNN_<phase>` or `<phase>_pNN`), all times.
PERCENTILE_OF = ("latency", "ttft", "tpot")
_PERCENTILE = re.compile(rf"p(\d{{1,2}}(?:\.\d{{1,3}})?)_(?:{'|'.join(PERCENTILE_OF)})"
                         rf"|(?:{'|'.join(PERCENTILE_OF)})_p(\d{{1,2}}(?:\.\d{{1,3}})?)")
#: An observation's confidence bounds (`p95_latency.ci_low`) take their metric's unit.
BOUNDS = (".ci_low", ".ci_high")


@lru_cache(maxsize=4096)
def kind_of(metric: str) -> Kind | None:
    """The kind of a registered metric; None for an unknown name."""
    # Cached: every observation of every trial asks, a batch names a few dozen metrics.
    if metric in METRICS:
        return METRICS[metric]
    m = _PERCENTILE.fullmatch(metric)
    if m and 0 < float(m.group(1) or m.group(2)) < 100:
        return TIME
    return None


def known() -> str:
    """The registered names, for an error message."""
    return ", ".join(sorted(METRICS) + [f"pNN_{p}" for p in PERCENTILE_OF] + [f"{p}_pNN" for p in PERCENTILE_OF])


def impossible(metric: str, value: float) -> str | None:
    """Why `value` cannot be a value of `metric` (a negative time, memory or rate); None when it
    can or the metric is unknown."""
    base = metric
    for suffix in BOUNDS:
        base = base.removesuffix(suffix)
    kind = kind_of(base)
    if kind is None or not kind.nonnegative or value >= 0:
        return None
    return f"{metric} is {kind.description}: it cannot be negative, got {value:g}"


@lru_cache(maxsize=4096)
def misfit(metric: str, unit: str) -> str | None:
    """Why `unit` (one that converts) does not fit `metric` or the metric whose confidence bound it
    is; None when it fits or the metric is unknown."""
    base = metric
    for suffix in BOUNDS:
        base = base.removesuffix(suffix)
    kind = kind_of(base)
    if kind is None or kind.fits(unit):
        return None
    return f"{unit!r} does not fit {metric} (expects {kind.description}, e.g. {kind.example})"
