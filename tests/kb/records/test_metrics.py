"""The metric registry in the record layer: clauses name known metrics in units of their kind,
observations of known metrics too (unknown telemetry stays welcome), and the caps that keep one
chain or trial record from amplifying into millions of facts."""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from luma.errors import RecordError
from luma.kb.records import metrics, synthetic
from luma.kb.records.loader import iter_records, validate_document
from luma.kb.records.pex_chain import MAX_OBSERVATIONS, MAX_TRIALS, PexChain

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "kb" / "data"
CHAIN = json.loads((DATA / "full_chain.json").read_text())
KERNEL = json.loads((DATA / "kernel_result.json").read_text())
TRIAL = {
    "record_type": "pex-trial", "evidence_class": "measured", "sprint": "s-1", "sequence": 5, "phase": "boundary",
    "workload": CHAIN["workload"], "architecture": CHAIN["architecture"], "contract": CHAIN["contract"],
    "state": CHAIN["pass_state"], "variant": "fp32", "verdict": "PASS",
    "observations": [{"metric": "ttft_p99", "value": 0.4, "unit": "s"}], "provenance": {"tool": "pytest"},
}
#: Python sources that write metrics with literal units (`{"metric": ..., "value": ..., "unit": ...}`).
WRITERS = ("kernels/evidence.py", "experiments/sprint/records.py", "experiments/sprint/trial.py", "kb/records/synthetic.py")
_PAIR = re.compile(r"""["']metric["']\s*:\s*["']([A-Za-z][\w.-]*)["'][^{}]*?["']unit["']\s*:\s*["']([^"']+)["']""")


def _with(record: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(record)
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def _refused(doc: dict) -> RecordError:
    with pytest.raises(RecordError) as info:
        validate_document(doc, "r.json")
    assert "\n" not in info.value.one_line()
    return info.value


# --- the registry -------------------------------------------------------------------------------


def _shipped_pairs() -> list[tuple[str, str, str]]:
    """(where, metric, unit) of every clause and observation in the shipped and test records and
    of every metric the writers' sources spell out."""
    pairs = []
    for path in sorted((ROOT / "kb" / "examples").glob("*")) + sorted(DATA.glob("*")):
        if path.suffix not in (".json", ".yaml"):
            continue
        for rec in iter_records([path]):
            model = rec.model
            for c in getattr(getattr(model, "contract", None), "clauses", []):
                pairs.append((f"{path.name} clause", c.metric, c.unit))
            for t in getattr(model, "trials", []):
                pairs += [(f"{path.name} observation", o.metric, o.unit) for o in t.observations]
            pairs += [(f"{path.name} metric", o.metric, o.unit) for o in getattr(model, "metrics", [])]
    for source in WRITERS:
        pairs += [(source, m, u) for m, u in _PAIR.findall((ROOT / source).read_text(encoding="utf-8"))]
    return pairs


def test_every_shipped_clause_and_written_metric_is_registered_and_fits():
    pairs = _shipped_pairs()
    assert len(pairs) > 30
    unknown = [(w, m) for w, m, _ in pairs if "clause" in w and metrics.kind_of(m) is None]
    assert unknown == []
    assert [(w, m, u) for w, m, u in pairs if metrics.misfit(m, u)] == []
    written = {m for w, m, _ in pairs if w in WRITERS}
    assert {"throughput", "weight_memory", "time_min", "accuracy", "p99_latency", "quality"} <= written


def test_the_synthetic_records_and_a_sprint_trials_observations_fit_the_registry():
    from luma.experiments.sprint.trial import Trial

    from luma.kb.trust.attestation import generate
    from luma.kb.trust.runners import Signer

    # With a key to sign them, the measured synthetic chains carry trials: their observations too.
    chains = list(synthetic.records(50, signer=Signer("test-runner", generate())))
    assert any(rec.get("trials") for rec in chains)
    for rec in chains:
        PexChain.model_validate(rec)
    telemetry = {"throughput": 12.5, "quality": 0.99, "peak_rss_bytes": 2**20, "weight_bytes": 4096,
                 "runtime_footprint_bytes": 2**24, "token_throughput": 40.0, "completed": 96, "wall_s": 3.5}
    clauses = [{"metric": "p95_latency", "value": 0.02, "ci_low": 0.018, "ci_high": 0.023}]
    trial = Trial(None, "fp32", "boundary", "PASS", None, clauses, telemetry, 96)
    observed = trial.observations()
    assert {o["metric"] for o in observed} >= {"throughput", "p95_latency.ci_low", "completed_requests"}
    validate_document({**TRIAL, "observations": observed}, "t.json")


@pytest.mark.parametrize("metric, unit, kind", [
    ("p99_latency", "ms", metrics.TIME), ("p99.9_ttft", "us", metrics.TIME), ("ttft_p95", "s", metrics.TIME),
    ("p50_tpot", "ms", metrics.TIME), ("throughput", "request/s", metrics.REQUEST_RATE),
    ("throughput", "1/s", metrics.REQUEST_RATE), ("decode_rate", "token/s", metrics.TOKEN_RATE),
    ("token_throughput", "1/s", metrics.TOKEN_RATE), ("quality", "dimensionless", metrics.SCORE),
    ("accuracy", "percent", metrics.SCORE), ("peak_rss", "MiB", metrics.MEMORY), ("power", "W", metrics.POWER),
    ("energy_per_token", "J/token", metrics.ENERGY_PER_TOKEN),
    ("cost_per_request", "EUR/request", metrics.COST_PER_REQUEST),
])
def test_registered_metrics_take_units_of_their_kind(metric, unit, kind):
    assert metrics.kind_of(metric) is kind and metrics.misfit(metric, unit) is None


@pytest.mark.parametrize("name", ["anything", "p0_latency", "p100_latency", "p99_speed", "latency_p", "P99_latency"])
def test_names_outside_the_registry_are_unknown(name):
    assert metrics.kind_of(name) is None


def test_the_sprint_contracts_take_their_units_from_the_registry():
    from luma.experiments.sprint import contract

    assert not hasattr(contract, "METRIC_UNITS") and not hasattr(contract, "metric_unit")
    for name in contract.JUDGED + tuple(f"p95_{k}" for k in contract.PERCENTILE_KINDS):
        assert metrics.kind_of(name) is not None


# --- records: a known metric in the wrong unit, an unknown clause metric ------------------------


def test_a_clause_unit_of_the_wrong_dimension_is_refused_naming_the_field():
    doc = _with(CHAIN, ("contract", "clauses", 0), {"metric": "p99_latency", "op": "<=", "value": 200, "unit": "GiB"})
    exc = _refused(doc)
    assert exc.field == "contract.clauses[0].unit"
    assert exc.message == "'GiB' does not fit p99_latency (expects a time, e.g. ms)"


def test_an_observation_of_a_known_metric_in_the_wrong_unit_is_refused():
    exc = _refused(_with(CHAIN, ("trials", 2, "observations", 0), {"metric": "p99_latency", "value": 2, "unit": "GHz"}))
    assert exc.field == "trials[2].observations[0].unit" and "expects a time" in exc.message
    exc = _refused(_with(CHAIN, ("trials", 0, "observations", 1, "unit"), "ms"))  # decode_rate in ms
    assert exc.field == "trials[0].observations[1].unit" and "decode_rate" in exc.message
    exc = _refused(_with(CHAIN, ("trials", 0, "observations", 0), {"metric": "p95_latency.ci_low", "value": 2,
                                                                  "unit": "MiB"}))
    assert exc.field == "trials[0].observations[0].unit" and "p95_latency.ci_low" in exc.message


def test_a_negative_time_amount_or_rate_is_refused_a_negative_score_change_is_not():
    """Found by the fuzz suite: `p99_latency = -1 ms` was accepted as a measurement."""
    exc = _refused(_with(CHAIN, ("trials", 2, "observations", 0), {"metric": "p99_latency", "value": -1, "unit": "ms"}))
    assert exc.field == "trials[2].observations[0].value" and "cannot be negative" in exc.message
    exc = _refused(_with(CHAIN, ("contract", "clauses", 0), {"metric": "throughput", "op": ">=", "value": -5,
                                                            "unit": "request/s"}))
    assert exc.field == "contract.clauses[0].value"
    ok = _with(CHAIN, ("trials", 2, "observations", 0), {"metric": "accuracy_change", "value": -0.01,
                                                         "unit": "dimensionless"})
    validate_document(ok, "r.json")  # a score may drop


def test_an_unknown_clause_metric_is_refused_with_the_known_ones():
    exc = _refused(_with(CHAIN, ("contract", "clauses", 0, "metric"), "anything"))
    assert exc.field == "contract.clauses[0].metric"
    assert exc.message.startswith("unknown metric 'anything' (known: ")
    assert "pNN_latency" in exc.message and "throughput" in exc.message


def test_unknown_telemetry_in_observations_is_kept():
    doc = _with(CHAIN, ("trials", 0, "observations", 0), {"metric": "gpu_queue_depth", "value": 3, "unit": "request"})
    assert validate_document(doc, "r.json").model.trials[0].observations[0].metric == "gpu_queue_depth"


def test_pex_trial_and_kernel_result_records_check_metrics_too():
    exc = _refused(_with(TRIAL, ("observations", 0, "unit"), "GiB"))
    assert exc.field == "observations[0].unit" and "ttft_p99" in exc.message
    exc = _refused(_with(TRIAL, ("contract", "clauses", 1, "unit"), "W"))
    assert exc.field == "contract.clauses[1].unit" and "decode_rate" in exc.message
    exc = _refused(_with(KERNEL, ("metrics", 0), {"metric": "throughput", "value": 3, "unit": "GB/s"}))
    assert exc.field == "metrics[0].unit" and "rate of requests" in exc.message


def test_the_pex_trial_sequence_is_a_strict_integer():
    exc = _refused(_with(TRIAL, ("sequence",), "5"))
    assert exc.field == "sequence"
    assert validate_document(TRIAL, "t.json").model.sequence == 5


# --- caps -----------------------------------------------------------------------------------------


def test_a_chain_cites_at_most_so_many_trials():
    trial = {"state": "pass", "repetition": 1, "verdict": "PASS"}
    assert validate_document(_with(CHAIN, ("trials",), [trial] * MAX_TRIALS), "r.json")
    exc = _refused(_with(CHAIN, ("trials",), [trial] * (MAX_TRIALS + 1)))
    assert exc.field == "trials" and f"at most {MAX_TRIALS} trials" in exc.message
    assert MAX_TRIALS <= 1_000


def test_a_chain_carries_at_most_so_many_observations_in_all():
    obs = [{"metric": "p99_latency", "value": 1, "unit": "ms"}] * 200
    trial = {"state": "pass", "repetition": 1, "verdict": "PASS", "observations": obs}
    n = MAX_OBSERVATIONS // len(obs)
    assert validate_document(_with(CHAIN, ("trials",), [trial] * n), "r.json")
    exc = _refused(_with(CHAIN, ("trials",), [trial] * (n + 1)))
    assert exc.field == "trials" and f"at most {MAX_OBSERVATIONS} observations" in exc.message
    assert MAX_OBSERVATIONS <= 20_000


def test_a_small_yaml_file_of_aliases_never_becomes_a_big_record(tmp_path):
    # One trial of 256 observations cited 1,000 times by alias: 9 kB of text, 256,000 observations.
    doc = copy.deepcopy(CHAIN)
    doc["trials"] = []
    text = yaml.safe_dump(doc, sort_keys=False).replace("trials: []\n", "")
    obs = "[&o {metric: p99_latency, value: 1, unit: ms}" + ", *o" * 255 + "]"
    text += f"trials:\n  - &t {{state: pass, repetition: 1, verdict: PASS, observations: {obs}}}\n"
    text += "  - *t\n" * (MAX_TRIALS - 1)
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    assert path.stat().st_size < 16_000
    start = time.perf_counter()
    with pytest.raises(RecordError) as info:
        list(iter_records([path]))
    assert time.perf_counter() - start < 5 and "\n" not in info.value.one_line()
    # The reader may refuse aliases outright; if it expands them, the cap refuses the chain.
    assert info.value.field != "trials" or "observations in all" in info.value.message
