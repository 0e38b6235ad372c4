"""Model-guided PEX: bisection started at the model's predicted boundary needs fewer physical
trials than plain bisection on the same levels (fake oracle), and `luma sprint bench --model`
reports both counts from real trials."""

from __future__ import annotations

import json

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from luma.cli.main import cli
from luma.experiments.sprint import contract, search, pex as sprint
from luma.experiments.model import guide


def _oracle(boundary):
    return lambda i: "PASS" if i >= boundary else "FAIL"


@given(st.integers(4, 40), st.integers(1, 3), st.data())
def test_a_right_prediction_never_costs_more_trials(levels, reps, data):
    boundary = data.draw(st.integers(1, levels - 1))
    plain = search.find(levels, _oracle(boundary), reps)
    guided = search.find(levels, _oracle(boundary), reps, start=boundary)
    assert (guided.min_pass, guided.adjacent_fail) == (plain.min_pass, plain.adjacent_fail) == (boundary, boundary - 1)
    assert guided.trials == 2 + reps - 1 <= plain.trials


def test_over_every_boundary_the_model_start_saves_trials():
    levels, reps = 8, 3  # the shipped memory contracts: 8 levels, 3 repetitions
    plain = sum(search.find(levels, _oracle(b), reps).trials for b in range(1, levels))
    guided = sum(search.find(levels, _oracle(b), reps, start=b).trials for b in range(1, levels))
    assert guided < plain
    # A prediction one level off still finds the same boundary.
    for b in range(1, levels - 1):
        assert search.find(levels, _oracle(b), reps, start=b + 1).min_pass == b


def test_the_model_predicts_a_start_for_the_matvec_memory_sprint():
    plan = sprint.plan(contract.load("matvec-memory"))
    verdicts = guide.predicted_levels(plan, None)
    assert len(verdicts) == len(plan.levels) and verdicts[-1] == "PASS" and verdicts[0] == "FAIL"
    start = guide.predicted_start(plan, None)
    assert verdicts[start] == "PASS" and all(v == "FAIL" for v in verdicts[:start])  # monotone


def test_runtime_levels_are_not_modelled():
    plan = sprint.plan(contract.load("digits-compute"), "runtime", ["default", "avx2"])
    assert guide.predicted_start(plan, None) is None


def test_sprint_bench_reports_trials_with_and_without_the_model(luma_home):
    result = CliRunner().invoke(cli, ["sprint", "bench", "matvec-memory", "--model", "--no-sweep", "--repetitions", "1",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["model"]["trials"] <= out["bisection"]["trials"]
    assert out["model"]["min_pass"] == out["bisection"]["min_pass"] and "sweep" not in out
