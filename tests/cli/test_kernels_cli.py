"""`luma kernels`: help, usage errors, machine-readable output, and results recorded in the KB."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from luma.cli.main import cli  # noqa: E402


def _run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("sub", [[], ["evaluate"], ["bench"], ["pareto"], ["tune"]])
def test_help_everywhere(sub):
    result = _run("kernels", *sub, "--help")
    assert result.exit_code == 0 and "Usage:" in result.output


@pytest.mark.parametrize("args,message", [
    (["evaluate", "--model", "digits", "--bits", "9"], "bit widths must be from 2 to 8"),
    (["evaluate", "--model", "digits", "--bits", "eight"], "comma-separated whole numbers"),
    (["evaluate", "--model", "resnet"], "'resnet' is not one of"),
    (["evaluate"], "Missing option '--model'"),
])
def test_usage_errors_exit_2(args, message):
    result = _run("kernels", *args)
    assert result.exit_code == 2 and message in result.output


@pytest.mark.slow
def test_evaluate_digits_json_and_its_records_in_the_kb(luma_home):
    result = CliRunner().invoke(cli, ["kernels", "evaluate", "--model", "digits", "--bits", "8",
                                      "--granularity", "per-channel", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["method"] for r in rows] == ["fp32", "int8"]
    assert "recorded 2 measured kernel results" in result.stderr
    answer = _run("kb", "query", "--format", "json",
                  "PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?r WHERE { ?r a luma:KernelResult ; "
                  "luma:evidenceClass luma:Measured }")
    assert len(json.loads(answer.stdout)["results"]["bindings"]) == 2
    assert list((luma_home / "results").glob("*-evaluate-digits.jsonl"))


def test_quick_bench_json(luma_home):
    result = CliRunner().invoke(cli, ["kernels", "bench", "--quick", "--no-record", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["environment"]["torch"] and data["threads"] == 1
    assert {r["case"] for r in data["quantize"]} >= {"float32 copy_ (baseline)"}
    assert all(r["rel_error_vs_fp64"] < 0.2 for r in data["linear"])
    cases = {r["case"] for r in data["linear"]}
    assert any(c.startswith("luma Int8Linear dynamic auto (") for c in cases)
    assert any(c.startswith("luma Int8Linear weight-only (") for c in cases)
    assert data["peak"] == {"skipped": "--quick"}
    rows = [r for r in data["summary"] if r["k"] == 512]
    assert [r["m"] for r in rows] == [1, 256] and all(r["auto_over_best_engine"] > 0 for r in rows)


def test_tune_measures_and_keeps_the_choices_in_the_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_KERNEL_CACHE", str(tmp_path))
    from luma.kernels import gemm_tuning

    monkeypatch.setattr(gemm_tuning, "TABLE", gemm_tuning.ChoiceTable())
    result = CliRunner().invoke(cli, ["kernels", "tune", "--shapes", "32,16", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 2 * len(gemm_tuning.M_BUCKETS) and all(r["choice"] for r in rows)
    kept = json.loads((tmp_path / gemm_tuning.FILE_NAME).read_text())["choices"]
    assert len(kept) == len(rows)


def test_tune_never_touches_the_project(tmp_path, monkeypatch):
    # Its choices live in the kernel cache, per host: a LUMA_HOME that is no directory is no matter.
    from luma.cli.project import NONE
    from luma.kernels import gemm_tuning

    home = tmp_path / "not-a-directory"
    home.write_text("LUMA_HOME names this file by mistake")
    monkeypatch.setenv("LUMA_HOME", str(home))
    monkeypatch.setenv("LUMA_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gemm_tuning, "TABLE", gemm_tuning.ChoiceTable())
    assert cli.commands["kernels"].commands["tune"].callback.luma_project == NONE
    result = _run("kernels", "tune", "--shapes", "32,16", "--format", "json")
    assert result.exit_code == 0, result.output
    assert home.read_text() == "LUMA_HOME names this file by mistake"


def test_tune_refuses_a_bad_shape():
    result = _run("kernels", "tune", "--shapes", "32")
    assert result.exit_code == 2 and "expected K,N" in result.output


def test_the_bench_table_shows_times_in_ms_and_bandwidth_as_a_rate():
    # `luma kernels bench` printed the quantize table's GB/s as "36535.630 ms" (every column ending
    # in `_s` was read as seconds).
    from luma.cli.kernels import _fmt

    row = _fmt({"min_s": 0.003674, "median_s": 0.003732, "gb_per_s": 36.53563, "fraction_of_copy": 1.0,
                "rel_error_vs_fp64": 5.863e-07, "case": "float32 copy_ (baseline)"})
    assert row == {"min_s": "3.674 ms", "median_s": "3.732 ms", "gb_per_s": "36.54", "fraction_of_copy": "1.00",
                   "rel_error_vs_fp64": "5.863e-07", "case": "float32 copy_ (baseline)"}
