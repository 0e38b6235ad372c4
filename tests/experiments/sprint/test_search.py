"""Bisection over levels: the boundary, the trial budget, and contradictions of monotonicity."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from luma.experiments.sprint import search


def oracle(boundary: int, log: list):
    def probe(i):
        log.append(i)
        return "PASS" if i >= boundary else "FAIL"
    return probe


@given(st.integers(2, 40), st.data(), st.integers(1, 5))
def test_finds_the_boundary_within_the_budget(levels, data, reps):
    boundary = data.draw(st.integers(1, levels - 1))
    log: list = []
    b = search.find(levels, oracle(boundary, log), reps)
    assert (b.min_pass, b.adjacent_fail) == (boundary, boundary - 1)
    assert b.trials == len(log) <= math.ceil(math.log2(levels)) + reps
    assert b.verdicts[boundary].count("PASS") == reps
    assert b.contradictions == []


@given(st.integers(2, 40), st.data())
def test_a_predicted_start_finds_the_same_boundary(levels, data):
    boundary = data.draw(st.integers(1, levels - 1))
    start = data.draw(st.integers(0, levels - 1))
    b = search.find(levels, oracle(boundary, []), 2, start=start)
    assert (b.min_pass, b.adjacent_fail) == (boundary, boundary - 1)
    if start in (boundary, boundary - 1):
        assert b.trials <= 3  # the prediction and its neighbour, plus one repetition


def test_nothing_passes_and_everything_passes():
    b = search.find(8, lambda i: "FAIL", 3)
    assert b.min_pass is None and not b.found and b.trials == 4  # ceil(log2(9))
    b = search.find(8, lambda i: "PASS", 3)
    assert b.min_pass == 0 and b.adjacent_fail is None and not b.found


def test_a_pass_that_does_not_reproduce_moves_the_boundary_up():
    calls = {}

    def flaky(i):
        calls[i] = calls.get(i, 0) + 1
        if i == 4:  # passes once, then fails: not a reproducible PASS
            return "PASS" if calls[i] == 1 else "FAIL"
        return "PASS" if i >= 4 else "FAIL"

    b = search.find(8, flaky, 3)
    assert b.min_pass == 5 and b.adjacent_fail == 4
    assert any("level 4" in c for c in b.contradictions)


def test_inconclusive_counts_as_not_passing():
    b = search.find(6, lambda i: "PASS" if i >= 3 else ("INCONCLUSIVE" if i == 2 else "FAIL"), 1)
    assert b.min_pass == 3 and b.verdicts[2] == ["INCONCLUSIVE"]


def test_known_verdicts_are_not_re_measured():
    log: list = []
    b = search.find(6, oracle(2, log), 1, known={5: "PASS"})
    assert 5 not in log and b.min_pass == 2
