"""Calibration: the fit recovers known efficiency figures from synthetic trials, the error per
metric is reported, the error facts land in the KB as simulated evidence, and a real (tiny)
calibration of matvec runs end to end."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.model import calibrate, facts, services
from luma.settings import Settings

HOST = {"flops_per_core": 5e10, "bandwidth_per_core": 1e10, "bandwidth": 2e10, "cores": 2}


def _rows(service: str, truth: services.ServiceParams, design: list[dict], contract: str = "fixture") -> list[dict]:
    svc = services.get(service)
    rows = [{"contract": contract, "service": service, "context": 128 if service == "embedding" else 64,
             "max_new_tokens": 32, **d} for d in design]
    m = services.evaluate(svc, truth, HOST, calibrate._arrays(svc, rows))
    for i, r in enumerate(rows):
        r["memory_need"] = float(np.broadcast_to(m["memory_need"], (len(rows),))[i])
        r["peak_rss"] = r["memory_need"] + truth.rss_runtime
        for k in ("latency", "ttft", "tpot") if svc.generative else ("latency",):
            r[f"p50_{k}"] = float(np.broadcast_to(m[k], (len(rows),))[i])
            r[f"p95_{k}"] = r[f"p50_{k}"] * 1.25
    return rows


DESIGN = [{"variant": v, "compute": c, "concurrency": n, "max_batch": 8}
          for v in ("fp32", "int8-weights") for c, n in ((1, 4), (1, 1), (2, 4))]


@pytest.mark.parametrize("service", ["matvec", "embedding"])
def test_the_fit_recovers_known_figures(service):
    truth = services.ServiceParams(**{**services.get(service).defaults, "overhead": {"fp32": 4e-4, "int8-weights": 9e-4},
                                      "efficiency": 0.42, "memory_slope": 1.1, "memory_overhead": 3e6,
                                      "rss_runtime": 5e7})
    rows = _rows(service, truth, DESIGN)
    p = calibrate.fit(service, rows, HOST)
    assert p.overhead == pytest.approx({"fp32": 4e-4, "int8-weights": 9e-4}, rel=1e-3)
    assert p.efficiency == pytest.approx(0.42, rel=1e-3) and p.request_overhead == 0
    assert p.memory_slope == pytest.approx(1.1, rel=1e-3) and p.memory_overhead == pytest.approx(3e6, rel=1e-3)
    assert p.rss_runtime == pytest.approx(5e7, rel=1e-3) and p.tail["latency"] == pytest.approx(1.25)
    errors = calibrate.errors(service, rows, HOST)
    assert set(errors) == {"peak_rss", "memory_need", "p50_latency"}
    assert all(e["max"] < 1e-6 and e["held_out_max"] < 1e-3 for e in errors.values())


def test_the_decoder_fits_first_token_and_per_token_times():
    truth = services.ServiceParams(**{**services.get("decoder").defaults, "overhead": {"fp32": 2e-3, "int8-kv": 5e-3},
                                      "request_overhead": 1e-4, "efficiency": 0.2})
    design = [{"variant": v, "compute": 1, "concurrency": n, "max_batch": 8} for v in ("fp32", "int8-kv") for n in (1, 8)]
    p = calibrate.fit("decoder", _rows("decoder", truth, design), HOST)
    assert p.overhead == pytest.approx({"fp32": 2e-3, "int8-kv": 5e-3}, rel=1e-3)
    assert p.request_overhead == pytest.approx(1e-4, rel=1e-3) and p.efficiency == pytest.approx(0.2, rel=1e-3)


def test_errors_are_honest_about_a_noisy_trial():
    truth = services.ServiceParams(**services.get("matvec").defaults)
    rows = _rows("matvec", truth, DESIGN)
    rows[2]["p50_latency"] *= 3  # one trial on a busy machine
    e = calibrate.errors("matvec", rows, HOST)["p50_latency"]
    assert e["max"] > 0.3 and e["held_out_max"] >= e["max"] * 0.5


def test_error_facts_are_simulated_evidence_in_the_kb(luma_home):
    truth = services.ServiceParams(**services.get("matvec").defaults)
    rows = _rows("matvec", truth, DESIGN, contract="matvec-memory")
    cal = calibrate.calibrate([], Settings.from_env(home=luma_home), trials=rows, host=HOST)
    assert calibrate.load(luma_home)["services"]["matvec"]["overhead"]["fp32"] == pytest.approx(truth.step_overhead)
    assert cal["errors_by_metric"]["matvec"]["memory"] < 1e-3 and cal["errors_by_metric"]["matvec"]["latency"] < 1e-3
    text = facts.turtle(cal)
    assert "luma:ModelError" in text and '"matvec-memory"' in text
    facts.record(Settings.from_env(home=luma_home), cal)
    query = ("PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?metric ?e WHERE { ?x a luma:ModelError ; "
             "luma:contractName 'matvec-memory' ; luma:metric ?metric ; luma:heldOutMaxRelativeError ?e }")
    result = CliRunner().invoke(cli, ["kb", "query", query, "--format", "json"])
    assert result.exit_code == 0, result.output
    metrics = {b["metric"]["value"] for b in json.loads(result.stdout)["results"]["bindings"]}
    assert metrics == {"peak_rss", "memory_need", "p50_latency"}
    stats = CliRunner().invoke(cli, ["kb", "stats", "--format", "json"])
    assert "simulated" in stats.output


def test_a_second_calibration_reports_how_well_the_first_predicted_it(luma_home):
    truth = services.ServiceParams(**services.get("matvec").defaults)
    rows = _rows("matvec", truth, DESIGN, contract="matvec-memory")
    first = calibrate.calibrate([], Settings.from_env(home=luma_home), trials=rows, host=HOST)
    assert first["validation"] == {} and first["previous"] is None
    slower = [{**r, "p50_latency": r["p50_latency"] * 1.5} for r in rows]  # the host got busier
    second = calibrate.calibrate([], Settings.from_env(home=luma_home), trials=slower, host=HOST)
    assert second["previous"] == first["created"]
    assert second["validation"]["matvec-memory"]["p50_latency"]["median"] == pytest.approx(1 / 3, rel=1e-3)


def test_params_round_trip_through_the_calibration_file(luma_home):
    p = services.ServiceParams(**services.get("matvec").defaults)
    cal = {"services": {"matvec": {k: v for k, v in asdict(p).items() if k != "calibrated"}}}
    assert services.get("matvec").params(cal).calibrated and not services.get("matvec").params(None).calibrated


@pytest.mark.slow
def test_calibrate_matvec_on_this_host(luma_home):
    result = CliRunner().invoke(cli, ["model", "calibrate", "matvec-memory", "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    errors = out["errors"]["matvec-memory"]
    assert errors["peak_rss"]["n"] >= 4 and errors["memory_need"]["median"] < 0.25
    assert (luma_home / "model" / "calibration.json").is_file() and out["facts"].endswith(".ttl")
    # A calibrated model says so, and a sprint benchmark then starts from its prediction by default.
    predicted = CliRunner().invoke(cli, ["model", "predict", "matvec-memory", "--state", "host_memory=16 MiB",
                                         "--format", "json"])
    assert json.loads(predicted.stdout)["calibrated"] is True


def test_the_limit_margin_comes_from_sprint_trials_that_ran_out_of_memory(monkeypatch, tmp_path):
    def record(level_mib, verdict, cause=None, variant="fp32"):
        return {"contract": {"name": "matvec-memory"}, "phase": "boundary", "variant": variant, "verdict": verdict,
                "failure_cause": cause, "state": {"dimensions": {"compute": {"value": 1, "unit": "core"},
                                                                 "host_memory": {"value": level_mib, "unit": "MiB"}}}}

    cal = {"services": {"matvec": {"memory_overhead": 2.5 * 2**20, "memory_slope": 1.0}}, "host": HOST}
    need = facts.limit_margin  # fp32 need = 4 MiB weights + activations + 2.5 MiB overhead, about 6.6 MiB
    monkeypatch.setattr(facts, "_trials", lambda home: [record(6, "FAIL", "oom"), record(7, "FAIL", "oom"),
                                                        record(8, "PASS")])
    m = need(tmp_path, "matvec", cal)
    low, high = m["bracket"]
    assert m["trials"] == 3 and m["consistent"] and 0 < low < m["bytes"] < high
    monkeypatch.setattr(facts, "_trials", lambda home: [record(4, "FAIL", "oom"), record(8, "PASS")])
    assert need(tmp_path, "matvec", cal)["bytes"] == 0  # 4 MiB is already predicted to fail
    monkeypatch.setattr(facts, "_trials", lambda home: [])
    assert need(tmp_path, "matvec", cal) is None
