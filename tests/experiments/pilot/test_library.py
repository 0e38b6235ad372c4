"""The qualified-state library: only attested, measured, non-stale states of this contract on
this machine, each with its measured capacity."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ConfigError
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.pilot import library as lib
from luma.experiments.sprint.records import architecture, provenance
from luma.experiments import prices


def _trial(contract, cores: int, verdict: str = "PASS", seq: int = 0, throughput: float = 400.0, **over) -> dict:
    p95 = 0.01 if verdict == "PASS" else 0.2
    rec = {"record_type": "pex-trial", "evidence_class": "measured", "sprint": "lib-test", "sequence": seq,
           "phase": "boundary", "workload": {"name": "matvec", "model": "dense-4096x256", "task": "matvec"},
           "architecture": architecture(), "contract": contract.record_contract(),
           "state": {"dimensions": {"compute": {"value": cores, "unit": "core"},
                                    "host_memory": {"value": 64, "unit": "MiB"}}},
           "variant": "fp32", "verdict": verdict, "attempts": 1,
           "observations": [{"metric": "throughput", "value": throughput, "unit": "1/s"},
                            {"metric": "quality", "value": 1.0, "unit": "dimensionless"},
                            {"metric": "completed_requests", "value": 100, "unit": "request"},
                            {"metric": "p95_latency", "value": p95, "unit": "s"},
                            {"metric": "p95_latency.ci_low", "value": p95 * 0.9, "unit": "s"},
                            {"metric": "p95_latency.ci_high", "value": p95 * 1.1, "unit": "s"},
                            {"metric": "p95_latency.samples", "value": 100, "unit": "request"}],
           "provenance": provenance(datetime.now(timezone.utc))}
    if verdict == "FAIL":
        rec["failure_cause"] = "slo-miss"
    for k, v in over.items():
        rec[k] = v
    return rec


def _ingest(paths):
    out = CliRunner().invoke(cli, ["kb", "ingest", *map(str, paths)])
    assert out.exit_code == 0, out.output


def test_library_holds_only_attested_measured_current_states(luma_home, signed, pilot_contract):
    from luma.settings import Settings

    c = contract_mod.load(pilot_contract)
    stale = _trial(c, 2, seq=5)
    stale["provenance"] = copy.deepcopy(stale["provenance"])
    stale["provenance"]["environment"]["numpy"] = "0.0.1"
    other_arch = _trial(c, 2, seq=6, architecture={"name": "Some Other CPU", "kind": "cpu", "vendor": "unknown"})
    records = [
        _trial(c, 1, seq=0, throughput=300), _trial(c, 1, seq=1, throughput=280),  # qualified: capacity 280
        _trial(c, 2, seq=2), _trial(c, 2, seq=3, verdict="FAIL"), _trial(c, 2, seq=4),  # a FAIL: out
        stale, other_arch,
    ]
    _ingest([signed(r) for r in records])
    project = Settings.from_env()
    states, notes = lib.build(project, c, prices.load())
    assert [s.label() for s in states] == ["1 core · 64 MiB · fp32 · batch 8"]
    (s,) = states
    assert s.capacity == 280 and s.trials == 2 and s.cost_per_hour == pytest.approx(0.04 + 0.005 / 16)
    text = " ".join(notes)
    assert "stale" in text and "another architecture" in text and "FAIL or INCONCLUSIVE" in text
    # A state outside the library is never applied: the lookup the pilot uses refuses it.
    with pytest.raises(ConfigError, match="not in the qualified-state library"):
        lib.find(states, "0" * 12)
    out = CliRunner().invoke(cli, ["pilot", "library", str(pilot_contract), "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert [r["key"] for r in rows] == [s.key] and rows[0]["energy_class"] == "simulated"


def test_an_empty_library_is_one_line_before_anything_starts(luma_home, pilot_contract):
    out = CliRunner().invoke(cli, ["pilot", "run", str(pilot_contract), "--trace", "step-burst"])
    assert out.exit_code == 1 and "library of matvec-pilot is empty" in out.output
    assert "Traceback" not in out.output and len(out.output.strip().splitlines()) == 1
    assert not (luma_home / "pilots").exists()
    # A clean sentence naming what to run, not a dangling "...or `luma sprint run`); ".
    assert out.output.strip().endswith(f"`luma sprint run {pilot_contract}`.") and "); " not in out.output


def _optimum_that_failed(contract, cores: int, throughput: float) -> dict:
    """An optimize-result record whose every trial missed the p95 (the issue's loaded host)."""
    trial = {"verdict": "FAIL", "failure_cause": "slo-miss",
             "observations": [{"metric": "throughput", "value": throughput, "unit": "1/s"},
                              {"metric": "quality", "value": 1.0, "unit": "dimensionless"},
                              {"metric": "p95_latency", "value": 0.2, "unit": "s"},
                              {"metric": "p95_latency.ci_low", "value": 0.18, "unit": "s"},
                              {"metric": "p95_latency.ci_high", "value": 0.22, "unit": "s"},
                              {"metric": "p95_latency.samples", "value": 80, "unit": "request"}]}
    return {"record_type": "optimize-result", "evidence_class": "measured", "sprint": f"opt-{cores}",
            "workload": {"name": "matvec", "model": "dense-4096x256", "task": "matvec"},
            "architecture": architecture(), "contract": contract.record_contract(),
            "load": {"mode": "closed", "concurrency": 4},
            "state": {"dimensions": {"compute": {"value": cores, "unit": "core"}}},
            "configurations": [{"software": {"service": "matvec", "variant": "fp32", "settings": {"max_batch": b}},
                                "concurrency": 4, "trials": [trial]} for b in (4, 8)],
            "provenance": provenance(datetime.now(timezone.utc))}


def test_an_empty_library_says_which_optimize_results_were_refused_and_why(luma_home, signed, pilot_contract):
    c = contract_mod.load(pilot_contract)
    _ingest([signed(_optimum_that_failed(c, 1, 60.0), "one.json"), signed(_optimum_that_failed(c, 2, 70.0), "two.json")])
    out = CliRunner().invoke(cli, ["pilot", "library", str(pilot_contract)])
    assert out.exit_code == 1, out.output  # nothing qualifies: a failure, not an empty success
    refused = [line for line in out.stderr.splitlines() if line.startswith("optimize-result ")]
    assert len(refused) == 2 and "compute=1 core" in refused[1] + refused[0]
    for line in refused:
        assert "refused — no configuration was accepted twice" in line and "FAIL (slo-miss)" in line
        assert "p95 200 ms against 50 ms" in line and "Little's law" in line  # 4 clients / 50 ms = 80/s
    assert "2 optimize result(s) refused" in out.stderr and out.stderr.strip().endswith(".")
    js = CliRunner().invoke(cli, ["pilot", "library", str(pilot_contract), "--format", "json"])
    assert js.exit_code == 1 and json.loads(js.stdout) == []


@pytest.mark.parametrize("body, words", [
    ('[core_hour]\nprice = 0.04\nsource = "x"\ndate = 2026-12-01\nevidence_class = "user-supplied"\n',
     "core_hour.currency"),
    ('[core_hour]\nprice = 0.04\ncurrency = "dollars"\nsource = "x"\ndate = 2026-12-01\n'
     'evidence_class = "user-supplied"\n', "ISO 4217"),
])
def test_price_tables_without_a_currency_are_refused(luma_home, pilot_contract, tmp_path, body, words):
    table = tmp_path / "prices.toml"
    table.write_text(body)
    out = CliRunner().invoke(cli, ["pilot", "run", str(pilot_contract), "--trace", "step-burst",
                                   "--price-table", str(table)])
    assert out.exit_code == 1 and words in out.output and "Traceback" not in out.output


def test_bad_trace_is_refused_before_anything_starts(luma_home, pilot_contract, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,rate\n0,10\n5,-3\n")
    out = CliRunner().invoke(cli, ["pilot", "run", str(pilot_contract), "--trace", str(bad)])
    assert out.exit_code == 1 and "line 3, rate" in out.output and "Traceback" not in out.output
    assert not (luma_home / "pilots").exists()


def test_resume_of_an_unknown_run_is_one_line(luma_home):
    out = CliRunner().invoke(cli, ["pilot", "run", "--resume", "pilot-nope"])
    assert out.exit_code == 1 and "no pilot run 'pilot-nope'" in out.output


@pytest.mark.parametrize("sub", [[], ["library"], ["run"]])
def test_help_everywhere(sub):
    out = CliRunner().invoke(cli, ["pilot", *sub, "--help"])
    assert out.exit_code == 0 and "Usage:" in out.output
