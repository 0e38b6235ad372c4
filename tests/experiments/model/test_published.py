"""LLM projections state their error: published measurements (vendor-claim, with sources), a frozen
calibration / held-out split (records within sources, and whole frozen sources), a deterministic fit on
the first, the error measured on the second, bands from leave-one-source-out errors, and every LLM
answer (predict, explore, partner evaluation) carrying them."""

from __future__ import annotations

from luma.cli.states import parse_state

import hashlib
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from pathlib import Path

from luma.errors import ConfigError
from luma.experiments.model import llm_calibrate, llm_error, llm_published, predict, simulate, space
from luma.experiments.model.evaluate import Evaluator


ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def doc():
    return llm_published.read_shipped()


def _chat():
    from luma.cli.model.common import load_contract as _contract

    return _contract("llm-chat")


def test_every_published_figure_names_its_source(doc):
    assert doc["evidence_class"] == "vendor-claim"
    assert len(doc["records"]) >= 600 and len(doc["sources"]) >= 15
    for r in doc["records"]:
        src = doc["sources"][r["source"]]
        assert src["url"].startswith("https://") and src["read"] and src["title"]
        assert llm_published.engine(r, doc["sources"]) in llm_published.ENGINES, r["id"]
    # Hardware beyond one vendor and one generation, engines beyond one, MoE and open loops.
    assert {r["machine"] for r in doc["records"]} >= {"nvidia-h100-sxm5-80gb", "nvidia-h200-sxm-141gb",
                                                       "nvidia-a100-sxm4-80gb", "amd-instinct-mi300x",
                                                       "nvidia-l40s-48gb", "nvidia-gh200-96gb"}
    assert {llm_published.engine(r, doc["sources"]) for r in doc["records"]} >= {
        "tensorrt-llm", "vllm", "sglang", "lmdeploy", "tgi"}
    assert {r["model"] for r in doc["records"]} >= {"mixtral-8x7b", "llama-3.1-405b"}
    assert {r["scenario"] for r in doc["records"]} == set(llm_published.SCENARIOS)


def test_the_split_is_the_frozen_rule(doc):
    groups: dict = {}
    frozen = {k for k, s in doc["sources"].items() if s.get("holdout")}
    assert len(frozen) >= 4  # whole sources the fit never sees
    for r in doc["records"]:
        if r["source"] in frozen:
            assert r["set"] == "held-out", r["id"]
        else:
            groups.setdefault((r["source"], r["metric"]), []).append(r)
    for rows in groups.values():
        for i, r in enumerate(sorted(rows, key=lambda r: r["id"])):
            assert r["set"] == ("held-out" if i % 3 == 1 else "calibration"), r["id"]
    held = [r for r in doc["records"] if llm_published.held_out(r, doc["sources"])]
    assert {llm_published.METRICS[r["metric"]][0] for r in held} >= {"ttft", "tpot", "token_throughput", "latency"}


def test_the_shipped_calibration_describes_the_shipped_data():
    shipped = llm_calibrate.shipped()
    assert shipped["data_sha256"] == hashlib.sha256(llm_published.shipped_bytes()).hexdigest()
    assert shipped["records"]["calibration"] + shipped["records"]["held-out"] == len(llm_published.read_shipped()["records"])
    assert shipped["bands"] and shipped["unknown_engine"] and shipped["unknown_machine"] and shipped["loso_by_source"]


@pytest.mark.slow
def test_the_shipped_calibration_is_the_fit_on_the_shipped_data(doc):
    refit = llm_calibrate.calibrate(doc, llm_published.shipped_bytes(), honest=False)
    shipped = llm_calibrate.shipped()
    flat = lambda f: {k: v for k, v in f.items() if k != "engines"}  # noqa: E731
    assert flat(refit["fitted"]) == pytest.approx(flat(shipped["fitted"]), rel=1e-3) and refit["tail"] == shipped["tail"]
    assert set(refit["fitted"]["engines"]) == set(shipped["fitted"]["engines"])
    for engine, prof in shipped["fitted"]["engines"].items():
        assert refit["fitted"]["engines"][engine] == pytest.approx(prof, rel=1e-3), engine
    for which, metrics in shipped["errors"].items():
        for metric, e in metrics.items():
            assert refit["errors"][which][metric] == pytest.approx(e, abs=1e-9), (which, metric)


def test_held_out_figures_never_reach_the_fit(doc, monkeypatch):
    seen = []
    monkeypatch.setattr(llm_calibrate, "fit", lambda rows, *a, **k: seen.append(rows) or
                        dict(llm_calibrate.shipped()["fitted"]))
    llm_calibrate.calibrate(doc, b"x", honest=False)
    assert len(seen) == 1 and seen[0]
    assert not [r for r in seen[0] if llm_published.held_out(r, doc["sources"])]
    frozen = {k for k, s in doc["sources"].items() if s.get("holdout")}
    assert not {r["source"] for r in seen[0]} & frozen


def test_records_evaluated_together_get_the_figures_they_get_alone(doc):
    """One model call for many (records, figures) jobs: every record's figure exactly as its job's
    own call gives it, whatever the models, loops and figures beside it."""
    shipped = llm_calibrate.shipped()["fitted"]
    sets = [doc["records"][i::9] for i in range(3)] + [[r for r in doc["records"] if r["scenario"] == "poisson"]]
    sets[1] += [{**r, "statistic": "p99"} for r in sets[1] if r["metric"] in ("ttft", "tpot")]  # tails apply
    prepared = [llm_calibrate._prepare(rows, doc["sources"]) for rows in sets]
    figures = [shipped, {**shipped, "compute": 0.3, "_tail": {"ttft": 2.5}}, {**shipped, "engines": {}}, shipped]
    jobs = [(p, len(rows), f) for p, rows, f in zip(prepared, sets, figures)]
    together = llm_calibrate._evaluate_many(jobs)
    for job, got in zip(jobs, together):
        assert np.array_equal(got, llm_calibrate._evaluate(*job), equal_nan=True)
    assert not np.array_equal(together[0], llm_calibrate._evaluate(prepared[0], len(sets[0]), figures[1]))


@pytest.mark.slow
def test_fits_advancing_together_give_each_fit_its_own_figures(doc):
    """fit_many evaluates the chains of several fits in one model call: each fit's figures are
    exactly those it gets alone (different records, models, open and closed loops, tails)."""
    shipped = llm_calibrate.shipped()["fitted"]
    cal = [r for r in doc["records"] if not llm_published.held_out(r, doc["sources"])]
    jobs = [([r for r in cal if r["source"] == "datacrunch-h200-sglang"], doc["sources"], None, shipped),
            ([r for r in cal if r["source"].startswith("lmdeploy-")], doc["sources"], {"ttft": 1.5}, shipped)]
    assert {r["scenario"] for r in jobs[0][0]} >= {"poisson", "max-throughput"}
    assert len({r["model"] for r in jobs[1][0]}) > 1
    together = llm_calibrate.fit_many(jobs)
    assert together == [llm_calibrate.fit(*job) for job in jobs] and together[0] != together[1]
    assert together[0]["engines"]  # an engine profile fitted beside the other fit's chains


def test_leave_one_source_out_never_fits_the_source_it_predicts(doc, monkeypatch):
    small = {**doc, "records": [r for r in doc["records"] if r["source"].startswith(("nim-", "vllm-ci", "amd-rocm",
                                                                                       "trtllm-perf-v0.6"))]}
    fits = []
    real = llm_calibrate.fit_many

    def spy(jobs):  # the first fold fitted for real, the others given the shipped figures
        fits.extend({r["source"] for r in rows} for rows, *_ in jobs)
        return real(jobs[:1]) + [dict(llm_calibrate.shipped()["fitted"]) for _ in jobs[1:]]

    monkeypatch.setattr(llm_calibrate, "fit_many", spy)
    rows, per = llm_calibrate._leave_out(small["records"], small["sources"], {}, lambda r: r["source"], "source",
                                         llm_calibrate.shipped()["fitted"])
    assert set(per) == {r["source"] for r in small["records"] if not llm_published.held_out(r, small["sources"])}
    for held, sources in zip(sorted(per), fits):
        assert held not in sources
    assert {r["source"] for r in rows} == set(per)


def test_a_band_is_the_conformal_bound_of_the_errors():
    rng = np.random.default_rng(7)
    for n in (10, 37, 200):
        errs = rng.normal(0, 0.2, n)
        b = llm_error.band(errs)
        assert np.mean(np.abs(errs) <= b) >= 0.9 and b == pytest.approx(np.sort(np.abs(errs))[math.ceil(0.9 * (n + 1)) - 1], abs=1e-4)
    assert llm_error.band([0.1] * 9) is None  # too few to bound
    bands = {"ttft|*|*": 0.3, "ttft|static|light": 0.1, "*|*|*": 0.5}
    assert llm_error.band_for(bands, "ttft", "static", "light") == 0.1
    assert llm_error.band_for(bands, "ttft", "continuous", "heavy") == 0.3
    assert llm_error.band_for(bands, "latency", "continuous", "heavy") == 0.5


def test_an_engine_or_machine_without_records_gets_a_wider_band():
    cal = llm_calibrate.shipped()
    known = llm_error.prediction_band(cal, "ttft", "continuous", "heavy", "tensorrt-llm", "nvidia-h100-sxm5-80gb")
    assert llm_error.prediction_band(cal, "ttft", "continuous", "heavy", None, "nvidia-h100-sxm5-80gb") >= known
    assert llm_error.prediction_band(cal, "tpot", "continuous", "heavy", None, "nvidia-h100-sxm5-80gb") >= \
        cal["unknown_engine"]["tpot|*|*"]
    assert llm_error.prediction_band(cal, "tpot", "continuous", "heavy", "vllm", "intel-gaudi3") >= \
        cal["unknown_machine"]["tpot|*|*"]


def test_the_error_on_held_out_measurements_is_stated_and_bands_hold_it():
    cal = llm_calibrate.shipped()
    for which in ("held-out", "held-out-source"):
        held = cal["errors"][which]
        for metric in ("ttft", "tpot", "token_throughput", "latency"):
            e = held[metric]
            assert e["n"] >= 6 and 0 < e["median"] <= e["p90"] <= e["max"]
        # The stated bands hold at least 90 % of the figures the fit never saw.
        assert cal["coverage"][which]["share"] >= 0.9
    assert cal["errors"]["held-out-source"]["token_throughput"]["median"] < 0.2


def test_an_llm_prediction_states_its_band():
    c = _chat()
    state = space.from_state(parse_state("accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8,"
                                         "engine=vllm"), c, "llama-2-70b", None)
    p = predict.predict(c, state, None)
    assert p.errors and set(p.errors) >= {"ttft", "tpot", "throughput", "latency"}
    cal = llm_calibrate.shipped()
    want = llm_error.prediction_band(cal, "ttft", "continuous", "heavy", "vllm", "nvidia-h100-sxm5-80gb")
    assert p.errors["ttft"] == pytest.approx(want)
    assert next(r for r in p.clauses if r["check"] == "p95_ttft")["band"] == pytest.approx(want)
    assert p.error_detail["tpot"]["n"] >= 3 and p.calibrated
    assert any("held-out published measurements" in n for n in p.notes)
    assert any(n.startswith("error band:") for n in p.notes)
    bare = predict.predict(c, space.from_state(parse_state("accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,"
                                                           "precision=fp8"), c, "llama-2-70b", None), None)
    assert any("no engine named" in n for n in bare.notes) and bare.errors["tpot"] >= p.errors["tpot"]


def test_the_tail_has_a_stated_basis_not_a_fixed_ratio(doc):
    cal = llm_calibrate.shipped()
    for metric in ("ttft", "tpot"):
        pairs = [t for t in doc["tails"] if t["metric"] == metric and t["set"] == "calibration"]
        want = math.exp(np.mean([math.log(t["p99"] / t["p50"]) / math.log10(50) for t in pairs]))
        assert cal["tail"][metric] == pytest.approx(want, abs=1e-4) and cal["tail"][metric] != 1.2
    c = _chat()
    ev = Evaluator(c, space.from_state({"accelerator_type": "nvidia-h100-sxm5-80gb"}, c, "llama-2-70b", None))
    assert ev._tail()["ttft"] == cal["tail"]["ttft"]
    assert "p99" in cal["tail_basis"]


def test_explore_and_partner_evaluation_state_the_error():
    from luma.experiments.model import partner
    from luma.kb.trust.partners import read_partner_files

    c = _chat()
    sp = space.load("llm-70b", c)
    out = simulate.explore(c, sp, None, propose=1)
    assert out["errors"] and out["calibrated"] and "held-out published" in out["error_summary"]
    assert out["error_detail"]["token_throughput"]["n"] >= 10
    rec = read_partner_files([ROOT / "kb" / "examples" / "partner-kv-compression.toml"])[0].model
    ev = partner.evaluate(rec, c, parse_state("accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp16"),
                          base=sp)
    assert ev.model_error["held_out"]["ttft"]["n"] >= 3 and ev.model_error["p90"]
    assert any("held-out published measurements" in n for n in ev.notes)


def test_a_space_that_overrides_the_fitted_figures_says_the_error_no_longer_applies():
    c = _chat()
    base = space.load("llm-70b", c)
    base.efficiency["compute"] = 0.9
    p = predict.predict(c, space.from_state({"accelerator_type": "nvidia-h100-sxm5-80gb"}, c, "llama-2-70b", base), None)
    assert not p.calibrated and any("stated error was measured with the fitted figures" in n for n in p.notes)


def test_a_record_s_own_sequence_cap_replaces_the_engine_default(doc):
    r = next(r for r in doc["records"] if llm_published.engine(r, doc["sources"]) == "vllm"
             and r["scenario"] == "max-throughput" and r["concurrency"] > 256)
    stated = {**r, "max_batch": r["concurrency"]}
    default = {k: v for k, v in r.items() if k != "max_batch"}
    assert llm_calibrate.setting(default, doc["sources"])["max_batch"] == 256  # vLLM's max_num_seqs
    assert llm_calibrate.setting(stated, doc["sources"])["max_batch"] == r["concurrency"]
    p_default, p_stated = llm_calibrate.predict([default, stated], llm_calibrate.shipped()["fitted"], doc["sources"])
    assert p_stated > p_default


def test_the_fit_s_pull_grows_linearly_past_the_huber_miss():
    h = llm_calibrate.HUBER

    def loss(e):
        """_loss of one record whose prediction misses by a factor exp(e)."""
        return llm_calibrate._loss(np.array([math.exp(e)]), np.array([1.0]), np.array([1.0]))

    assert loss(h / 2) == pytest.approx((h / 2) ** 2)
    assert loss(4 * h) - loss(3 * h) == pytest.approx(loss(3 * h) - loss(2 * h)) == pytest.approx(2 * h * h)
    assert loss(-4 * h) == pytest.approx(loss(4 * h)) and loss(50.0) == pytest.approx(loss(2.0))  # clipped at e^2


@pytest.mark.parametrize("change, field", [
    (lambda d: d["records"][0].update(source="nowhere"), "records[0].source"),
    (lambda d: d["records"][0].update(unit="GB"), "records[0].unit"),
    (lambda d: d["records"][0].update(value=-1), "records[0].value"),
    (lambda d: d["records"][0].update(machine="h100x"), "records[0].machine"),
    (lambda d: d["records"][0].update(model="gpt-9"), "records[0].model"),
    (lambda d: d["records"][0].update(engine="fastllm"), "records[0].engine"),
    (lambda d: d["records"][0].update(scenario="poisson"), "records[0].rate"),
    (lambda d: d["records"][0].update(replicas=3), "records[0].count"),
    (lambda d: d["records"][0].update(dataset="nosuchset"), "records[0].dataset"),
    (lambda d: d["records"][0].update(statistic="p42"), "records[0].statistic"),
    (lambda d: d["records"][0].update(scheduler_steps=0), "records[0].scheduler_steps"),
    (lambda d: d["records"][0].update(max_batch=2.5), "records[0].max_batch"),
    (lambda d: d["records"][1].update(id=d["records"][0]["id"]), "records[1].id"),
    (lambda d: d["sources"][next(iter(d["sources"]))].update(url="ftp://x"), "url"),
])
def test_a_bad_published_file_is_a_clear_error(tmp_path, change, field):
    bad = json.loads(llm_published.shipped_paths()[0].read_text())
    change(bad)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ConfigError) as info:
        llm_published.read_published(path)
    assert field in (info.value.field or "") and "\n" not in info.value.one_line()


def test_calibrate_llm_refits_with_ones_own_figures_and_records_them(tmp_path, monkeypatch):
    from luma.cli.main import cli

    home = tmp_path / "home"
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
        monkeypatch.delenv(var, raising=False)
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    shipped = llm_published.read_shipped()
    mine = {"sources": {"my-lab": {"title": "our own runs", "url": "https://example.com/runs", "read": "2026-12-01",
                                   "engine": "vllm"}},
            "records": [{**r, "source": "my-lab", "id": "my-lab/" + r["id"]} for r in shipped["records"][:3]]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(mine))
    # The fit itself is covered above; here the command's plumbing (merge, write, KB) is.
    monkeypatch.setattr(llm_calibrate, "fit", lambda records, *a, **k: dict(llm_calibrate.shipped()["fitted"]))
    result = CliRunner().invoke(cli, ["model", "calibrate", "--llm", "--quick", "--published", str(path),
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["records"]["calibration"] + out["records"]["held-out"] == len(shipped["records"]) + 3
    assert llm_calibrate.path(home).is_file() and llm_calibrate.current(home)["data_sha256"] != \
        llm_calibrate.shipped()["data_sha256"]
    q = CliRunner().invoke(cli, ["kb", "query", "--format", "json",
                                 "SELECT ?m WHERE { ?m a luma:PublishedMeasurement }"])
    assert q.exit_code == 0, q.output
    assert len(json.loads(q.stdout)["results"]["bindings"]) == len(shipped["records"]) + 3
    table = CliRunner().invoke(cli, ["model", "calibrate", "--llm", "--quick", "--no-record"])
    assert table.exit_code == 0 and "Traceback" not in table.output, table.output
    assert "held-out-source" in table.output and "engine tensorrt-llm (" in table.output
    bad = CliRunner().invoke(cli, ["model", "calibrate", "--llm", "--published", str(tmp_path / "missing.json")])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    usage = CliRunner().invoke(cli, ["model", "calibrate", "--quick"])
    assert usage.exit_code == 2 and "--quick goes with --llm" in usage.output


def test_a_latency_quantile_over_varying_lengths_is_that_quantile_s_output_length():
    # Median end-to-end latency over ShareGPT: the median request generates far fewer tokens than
    # the mean one, so the median latency is the latency of the median output, not of the mean.
    r = {"metric": "latency", "statistic": "median", "dataset": "sharegpt", "context": 224, "new_tokens": 189}
    mix = llm_published.mix(r)
    assert llm_calibrate._output_at(r) == pytest.approx(mix.quantile("output", 0.5))
    assert llm_calibrate._output_at(r) < mix.mean_output
    # A mean, or fixed lengths, has no such quantile: the model's mean figure stands.
    assert np.isnan(llm_calibrate._output_at({**r, "statistic": "mean"}))
    assert np.isnan(llm_calibrate._output_at({"metric": "latency", "statistic": "median", "context": 128,
                                              "new_tokens": 128}))
