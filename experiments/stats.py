"""Statistics behind a trial verdict: how many requests a percentile needs, its bootstrap
confidence interval, and PASS / FAIL / INCONCLUSIVE against a clause.

**The request-count rule.** A (1 − α) confidence interval for the q-quantile that makes no
assumption about the latency distribution (an order-statistic interval) only exists once the
largest of n samples lies above the q-quantile with probability at least 1 − α/2, i.e.
q**n ≤ α/2, so n ≥ ln(α/2) / ln(q). At 95 % confidence: p50 needs 6 requests, p95 72, p99 368,
p99.9 3,688. A trial runs at least that many requests (more if the contract asks), and only
then is its interval meaningful. (MLPerf's tail-latency runs follow the same idea with a
margin term: far more queries, for a tighter interval than a PASS/FAIL verdict needs.)

**The verdict.** The percentile's bootstrap interval (percentile method, resampling requests)
either lies wholly on the passing side of the threshold (PASS), wholly on the failing side
(FAIL), or straddles it (INCONCLUSIVE: the trial is re-run with more requests before any
verdict is taken).
"""

from __future__ import annotations

import math
import re

import numpy as np

from luma.errors import ConfigError

#: Confidence of every interval a verdict rests on.
CONFIDENCE = 0.95
RESAMPLES = 2000
_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)_")


def quantile_of(metric: str) -> float | None:
    """0.99 for `p99_latency` / `p99_ttft`, None for a metric that is not a percentile."""
    m = _PERCENTILE.match(metric)
    if not m:
        return None
    q = float(m.group(1)) / 100
    if not 0 < q < 1:
        raise ConfigError(f"percentile {m.group(1)} is not between 0 and 100", field=metric)
    return q


def min_requests(q: float, confidence: float = CONFIDENCE) -> int:
    """Fewest samples for which a distribution-free (confidence) interval of the q-quantile exists."""
    if not 0 < q < 1:
        raise ConfigError(f"quantile must be in (0, 1), got {q}", field="quantile")
    alpha = 1 - confidence
    return max(1, math.ceil(math.log(alpha / 2) / math.log(q)))


def percentile(samples, q: float) -> float:
    """Nearest-rank q-quantile: the ⌈q·n⌉-th smallest sample (a value that was observed)."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    if x.size == 0:
        raise ValueError("no samples")
    return float(x[max(0, math.ceil(q * x.size) - 1)])


def bootstrap_ci(samples, q: float, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the nearest-rank q-quantile (vectorised resampling)."""
    x = np.asarray(samples, dtype=np.float64)
    n = x.size
    if n == 0:
        raise ValueError("no samples")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    boot = np.sort(x[idx], axis=1)[:, max(0, math.ceil(q * n) - 1)]
    tail = (1 - confidence) / 2
    return float(np.quantile(boot, tail)), float(np.quantile(boot, 1 - tail))


def _holds(value: float, op: str, threshold: float) -> bool:
    return {"<=": value <= threshold, "<": value < threshold, ">=": value >= threshold, ">": value > threshold}[op]


def interval_verdict(lo: float, hi: float, op: str, threshold: float) -> str:
    """PASS if the whole interval satisfies `op threshold`, FAIL if none of it does, else INCONCLUSIVE."""
    ok_lo, ok_hi = _holds(lo, op, threshold), _holds(hi, op, threshold)
    if ok_lo and ok_hi:
        return "PASS"
    if not ok_lo and not ok_hi:
        return "FAIL"
    return "INCONCLUSIVE"


def percentile_verdict(samples, q: float, op: str, threshold: float, seed: int = 0) -> dict:
    """Point estimate, interval and verdict of one percentile clause. Too few samples for the
    rule above is INCONCLUSIVE whatever the point estimate says."""
    n = len(samples)
    lo, hi = bootstrap_ci(samples, q, seed=seed)
    verdict = interval_verdict(lo, hi, op, threshold)
    if n < min_requests(q):
        verdict = "INCONCLUSIVE"
    return {"value": percentile(samples, q), "ci_low": lo, "ci_high": hi, "samples": n, "verdict": verdict}
