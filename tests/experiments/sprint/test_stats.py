"""The verdict statistics: the request-count rule, nearest-rank percentiles, bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import ConfigError
from luma.experiments.sprint import stats


@pytest.mark.parametrize("q, n", [(0.5, 6), (0.95, 72), (0.99, 368), (0.999, 3688)])
def test_request_rule_matches_the_stated_figures(q, n):
    # q**n <= alpha/2 first holds at n (the docstring's table)
    assert stats.min_requests(q) == n
    assert q ** n <= 0.025 < q ** (n - 1)


def test_percentile_metric_names():
    assert stats.quantile_of("p99_latency") == 0.99
    assert stats.quantile_of("p99.9_ttft") == pytest.approx(0.999)
    assert stats.quantile_of("throughput") is None
    with pytest.raises(ConfigError):
        stats.quantile_of("p0_latency")


@given(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=1, max_size=300), st.floats(0.01, 0.99))
def test_nearest_rank_is_an_observed_value_with_the_right_rank(xs, q):
    v = stats.percentile(xs, q)
    assert v in xs
    assert sum(x <= v for x in xs) >= math.ceil(q * len(xs))


@settings(deadline=None, max_examples=30)
@given(st.lists(st.floats(0, 1e3, allow_nan=False), min_size=5, max_size=200), st.floats(0.05, 0.99))
def test_bootstrap_interval_brackets_the_estimate_within_the_sample_range(xs, q):
    lo, hi = stats.bootstrap_ci(xs, q, resamples=300)
    assert min(xs) <= lo <= hi <= max(xs)


def test_verdicts_pass_fail_and_straddle():
    rng = np.random.default_rng(1)
    fast = rng.exponential(0.010, 400)  # p95 ~ 30 ms
    assert stats.percentile_verdict(fast, 0.95, "<=", 0.100)["verdict"] == "PASS"
    assert stats.percentile_verdict(fast, 0.95, "<=", 0.005)["verdict"] == "FAIL"
    mid = stats.percentile(fast, 0.95)
    assert stats.percentile_verdict(fast, 0.95, "<=", mid)["verdict"] == "INCONCLUSIVE"


def test_too_few_requests_for_the_percentile_is_inconclusive():
    # 50 requests cannot support a p99 (the rule asks for 368), however clear the point estimate
    assert stats.percentile_verdict([0.001] * 50, 0.99, "<=", 1.0)["verdict"] == "INCONCLUSIVE"
    assert stats.percentile_verdict([0.001] * 400, 0.99, "<=", 1.0)["verdict"] == "PASS"
