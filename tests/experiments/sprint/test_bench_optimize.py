"""`luma sprint bench` and `luma sprint optimize` on the tiny matvec service."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from luma.cli.main import cli


def _run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("sub", [[], ["run"], ["bench"], ["optimize"], ["contracts"]])
def test_help_everywhere(sub):
    result = _run("sprint", *sub, "--help")
    assert result.exit_code == 0 and "Usage:" in result.output


@pytest.mark.slow
def test_bench_counts_trials_of_bisection_and_sweep(luma_home):
    levels = "2 MiB,4 MiB,8 MiB,16 MiB"
    result = _run("sprint", "bench", "matvec-memory", "--levels", levels, "--repetitions", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["sweep"]["trials"] == 4 * 2
    assert out["bisection"]["trials"] <= math.ceil(math.log2(4)) + 2 == out["budget"]
    assert out["within_budget"] and out["same_boundary"] and out["sweep"]["monotone"]
    assert not (luma_home / "ledger.sqlite").exists()  # a benchmark records nothing


@pytest.mark.slow
def test_optimize_reports_the_best_accepted_configuration_and_records_its_trials(luma_home):
    result = _run("sprint", "optimize", "matvec-memory", "--batches", "1,4", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    finalists = out["finalists"]
    assert out["trials"] == len(out["configurations"]) + len(finalists) and 1 <= len(finalists) <= 2
    for f in finalists:  # each finalist ran twice and counts with its lower throughput
        assert len(f["throughputs"]) == 2 and f["throughput"] == min(f["throughputs"])
    assert out["best"] == max((f for f in finalists if f["verdict"] == "PASS"), key=lambda f: f["throughput"])
    assert {c["variant"] for c in out["configurations"]} == {"fp32", "int8-weights"}
    q = _run("kb", "query", "--format", "json", "PREFIX luma: <https://w3id.org/luma/ns#> SELECT (COUNT(*) AS ?n) "
             "WHERE { ?t a luma:SprintTrial ; luma:trialPhase \"optimize\" }")
    assert int(json.loads(q.stdout)["results"]["bindings"][0]["n"]["value"]) == out["trials"]


def test_optimize_refuses_a_bad_state(luma_home):
    result = _run("sprint", "optimize", "matvec-memory", "--state", "compute")
    assert result.exit_code == 2 and "DIMENSION=LEVEL" in result.output
    result = _run("sprint", "optimize", "matvec-memory", "--state", "compute=64 core")
    assert result.exit_code == 1 and "64 cores asked" in result.output


def test_optimize_refuses_a_layout_that_cannot_run_and_writes_nothing(luma_home):
    result = _run("sprint", "optimize", "matvec-memory", "--replicas", "2")
    assert result.exit_code == 2 and "matvec service's engine cannot be replicated" in result.output
    result = _run("sprint", "optimize", "digits-compute", "--state", "compute=1 core", "--threads", "1",
                  "--replicas", "2")
    assert result.exit_code == 2 and "threads x replicas exceeds the state's 1 core(s)" in result.output
    assert not (luma_home / "sprints").exists() and not (luma_home / "ledger.sqlite").exists()


def test_optimize_refuses_an_unknown_variant_and_writes_nothing(luma_home):
    result = _run("sprint", "optimize", "matvec-memory", "--variants", "fp32,int4-magic")
    assert result.exit_code == 1 and "no variant 'int4-magic'" in result.output
    assert not (luma_home / "sprints").exists()
