"""Judging a control window of live traffic."""

from __future__ import annotations

import pytest

from luma.experiments.sprint import contract as contract_mod
from luma.experiments.pilot import window as win
from luma.experiments.pilot.serving import Request


@pytest.fixture(scope="module")
def contract():
    return contract_mod.load("minilm-pilot")


def _reqs(latencies, errors=0, at=100.0):
    out = [Request(i, 0.0, at, 0, "k", done=at + x) for i, x in enumerate(latencies)]
    out += [Request(len(out) + i, 0.0, at, 0, "k", error="error") for i in range(errors)]
    return out


def test_a_fast_window_passes_and_its_outputs_are_accepted(contract):
    fig = win.judge(contract, _reqs([0.02] * 300), 200.0, 1.0, 1e-4, 10.0, 6.0, 5.0)
    assert fig["verdict"] == "PASS" and fig["accepted"] == 300 and fig["outside_contract"] == 0
    assert fig["cost_per_accepted"] == pytest.approx(1e-4 / 300)


def test_a_slow_window_fails_and_delivers_no_accepted_output(contract):
    fig = win.judge(contract, _reqs([0.5] * 300), 200.0, 1.0, 1e-4, 10.0, 6.0, 5.0)
    assert fig["verdict"] == "FAIL" and fig["accepted"] == 0 and fig["outside_contract"] == 300


def test_errors_above_the_clause_fail_and_unanswered_requests_count_as_waited(contract):
    fig = win.judge(contract, _reqs([0.02] * 200, errors=10), 200.0, 1.0, 1e-4, 10.0, 6.0, 5.0)
    assert fig["errors"] == 10 and fig["verdict"] == "FAIL"
    waiting = [Request(0, 0.0, 199.0, 0, "k")]  # asked 1 s ago, no answer yet: at least 1 s
    lat, errors = win.samples_of(waiting, 200.0, 5.0)
    assert lat == [pytest.approx(1.0)] and errors == 0
    assert win.samples_of(waiting, 210.0, 5.0) == ([], 1)  # past the time-out: an error


def test_too_few_samples_is_inconclusive_and_an_empty_window_too(contract):
    assert win.judge(contract, _reqs([0.02] * 5), 200.0, 1.0, 1e-6, 1.0, 6.0, 5.0)["verdict"] == "INCONCLUSIVE"
    assert win.judge(contract, [], 200.0, 1.0, 0.0, 0.0, 6.0, 5.0)["verdict"] == "INCONCLUSIVE"


def test_cost_clause_judges_the_projected_cost(contract):
    fig = win.judge(contract, _reqs([0.02] * 300), 200.0, 1.0, 1.0, 10.0, 6.0, 5.0)  # 1 USD for 300 outputs
    assert fig["verdict"] == "FAIL"
    assert any(r["metric"] == "cost_per_accepted" and r["verdict"] == "FAIL" for r in fig["clauses"])


def test_ratio_interval_brackets_the_ratio():
    ci = win.ratio_ci([1.0, 2.0, 3.0, 4.0], [10, 20, 30, 41])
    assert ci["ci_low"] <= ci["value"] <= ci["ci_high"]
    assert win.ratio_ci([1.0], [0]) is None
