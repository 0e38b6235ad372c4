"""experiments/model/mlperf_calibrate.py: the LLM model fitted on imported MLPerf results, each
submitter held out in turn, on the shipped sample."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ContractError
from luma.experiments.imports import mlperf_results
from luma.experiments.model import llm_calibrate, mlperf_calibrate


@pytest.fixture(scope="module")
def trials():
    return [t.model for t in mlperf_results.read_results(mlperf_results.sample_path()).trials]


def test_llm_results_on_catalogued_devices_become_figures(trials):
    figures = mlperf_calibrate.records(trials)
    llm = [t for t in trials if t.workload.name.startswith("llama2-70b")]
    assert len(figures) == len(llm) > 0  # resnet50 has no LLM preset: left out
    for f in figures:
        assert f["unit"] == "token/s" and f["metric"] == "token_throughput_per_device"
        assert 250 <= f["new_tokens"] <= 300  # tokens/s / samples/s: the dataset's ~294 output tokens
        assert f["count"] % f["tp"] == 0
    assert {f["machine"] for f in figures} >= {"nvidia-b200-sxm-180gb", "amd-instinct-mi300x"}


def test_each_submitter_is_held_out_of_its_own_fit(trials, monkeypatch):
    seen = []
    real = llm_calibrate.fit_many
    monkeypatch.setattr(llm_calibrate, "fit_many",
                        lambda jobs: seen.extend({r["source"] for r in rows} for rows, *_ in jobs) or real(jobs))
    cal = mlperf_calibrate.leave_one_source_out(mlperf_calibrate.records(trials), with_published=False)
    assert cal["submitters"] == sorted(cal["held_out"]) and len(seen) == len(cal["submitters"]) >= 3
    for held, sources in zip(cal["submitters"], seen):
        assert held not in sources and sources == set(cal["submitters"]) - {held}
    for e in cal["held_out"].values():
        assert e["n"] > 0 and 0 <= e["median"] <= e["max"]
    assert cal["pooled"]["n"] == len(cal["predictions"]) and cal["evidence_class"] == "projected"
    line = mlperf_calibrate.summary_line(cal)
    assert "held out" in line and f"{cal['pooled']['median']:.0%}" in line
    assert set(cal["assumed"]) == {"precision", "tp", "context", "scenario"}


def test_one_submitter_is_not_enough(trials):
    one = [f for f in mlperf_calibrate.records(trials) if f["source"] == "NVIDIA"]
    with pytest.raises(ContractError, match="2 submitters or more"):
        mlperf_calibrate.leave_one_source_out(one, with_published=False)


def test_the_cli_says_when_nothing_was_imported(luma_home):
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    out = CliRunner().invoke(cli, ["model", "calibrate", "--mlperf"])
    assert out.exit_code == 1 and "luma import mlperf-results" in out.output and out.output.count("\n") == 1


@pytest.mark.slow
def test_the_cli_calibrates_on_the_imported_results(luma_home):
    assert CliRunner().invoke(cli, ["import", "mlperf-results", "--sample"]).exit_code == 0
    out = CliRunner().invoke(cli, ["model", "calibrate", "--mlperf", "--format", "json"])
    assert out.exit_code == 0, out.output
    cal = json.loads(out.stdout)
    assert (luma_home / mlperf_calibrate.FILE).is_file() and cal["with_published"] is True
    assert set(cal["held_out"]) == set(cal["submitters"])
