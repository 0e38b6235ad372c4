"""Statistics behind a trial verdict: nearest-rank percentiles and their bootstrap confidence
intervals. The verdict rules themselves (how many requests a percentile needs, PASS / FAIL /
INCONCLUSIVE against a clause) live in `luma.kb.records.judge`, where ingest re-judges measured records
with the very same code; they are re-exported here for the sprint's callers.

The bootstrap interval (percentile method, resampling requests) is what a percentile clause is
judged on: wholly on the passing side of the threshold is PASS, wholly on the failing side FAIL,
straddling it INCONCLUSIVE (the trial is re-run with more requests before any verdict is taken).
"""

from __future__ import annotations

import math

import numpy as np

from luma.kb.records.judge import CONFIDENCE, interval_verdict, min_requests, quantile_of, sampled_verdict

__all__ = ["CONFIDENCE", "RESAMPLES", "bootstrap_ci", "interval_verdict", "min_requests", "percentile",
           "percentile_verdict", "quantile_of"]

RESAMPLES = 2000


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


def percentile_verdict(samples, q: float, op: str, threshold: float, seed: int = 0) -> dict:
    """Point estimate, interval and verdict of one percentile clause. Too few samples for the
    request-count rule (`luma.kb.records.judge`) is INCONCLUSIVE whatever the point estimate says."""
    n = len(samples)
    lo, hi = bootstrap_ci(samples, q, seed=seed)
    verdict = sampled_verdict(lo, hi, n, q, op, threshold)
    return {"value": percentile(samples, q), "ci_low": lo, "ci_high": hi, "samples": n, "verdict": verdict}
