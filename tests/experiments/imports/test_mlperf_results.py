"""experiments/imports/mlperf_results.py on the shipped MLPerf Inference v4.1 sample (real files,
byte-identical, experiments/imports/published/mlperf/SOURCES.md) and on broken copies of it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from luma.errors import RecordError
from luma.experiments.imports import mlperf_results
from luma.kb.records.machine_catalog import load_machine
from luma.kb.store.ledger_read import payloads_of_kind
from luma.settings import Settings

SAMPLE = mlperf_results.sample_path()


def _systems(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/systems/*.json"))


def _valid_summaries(root: Path) -> list[Path]:
    return [p for p in root.glob("*/*/results/*/*/*/performance/run_1/mlperf_log_summary.txt")
            if "Result is : VALID" in p.read_text()]


def test_every_system_of_the_sample_becomes_a_machine_record():
    result = mlperf_results.read_results(SAMPLE)
    files = _systems(SAMPLE)
    assert files and len(result.machines) == len(files)
    names = {json.loads(p.read_text())["system_name"] for p in files}
    assert {m.model.notes[0].split(": ", 1)[1].rsplit(" (status", 1)[0] for m in result.machines} == names
    for m in result.machines:
        assert m.model.evidence_class == "vendor-claim"
        src = m.model.provenance.source
        assert src.tool == "MLPerf Inference results" and src.version == "v4.1"
        path = src.citation.rsplit(", ", 1)[1]
        assert src.files[0].sha256 == hashlib.sha256((SAMPLE / path).read_bytes()).hexdigest()


def test_accelerators_the_catalogue_lacked_are_known_after_import(luma_home):
    assert load_machine("nvidia-b200-sxm-180gb").memory_capacity("hbm") == 180e9  # the catalogue learnt it
    result = mlperf_results.read_results(SAMPLE)
    mlperf_results.ingest(Settings.from_env(), result)
    accels = {m.model.architecture.name for m in result.machines}
    assert any("B200" in a for a in accels) and any("MI300X" in a for a in accels)
    for m in result.machines:  # every imported machine is known by its name afterwards
        assert load_machine(m.model.name, Settings.from_env()).name == m.model.name
    b200 = load_machine("nvidia-b200-sxm-180gbx1_trt", Settings.from_env())
    assert b200.memory_capacity("hbm") == 180e9 and b200.evidence_class == "vendor-claim"
    assert b200.compute_flops("fp8") == 4.5e15  # the catalogue's datasheet figure, named in its method
    assert "catalogue nvidia-b200-sxm-180gb" in next(c.method for c in b200.compute if c.precision == "fp8")


def test_valid_results_become_vendor_claim_pass_trials_with_citations():
    result = mlperf_results.read_results(SAMPLE)
    assert len(result.trials) == len(_valid_summaries(SAMPLE)) > 0
    for t in result.trials:
        m = t.model
        assert (m.evidence_class, m.verdict) == ("vendor-claim", "PASS")
        src = m.provenance.source
        assert src.version == "v4.1" and "vendor-claim" in src.reason
        submitter, *_, scenario, path = [p.strip() for p in src.citation.split(",")]
        assert (SAMPLE / path).is_file() and f"/{scenario}/" in path and path.split("/")[1] == submitter
        assert [f.name for f in src.files][-1] == "mlperf_log_summary.txt"
    server = next(t.model for t in result.trials if t.model.contract.name == "mlperf-v4.1-llama2-70b-99-server")
    clauses = {c.metric: (c.op, c.value, c.unit) for c in server.contract.clauses}
    assert clauses["p99_ttft"] == ("<=", 2000.0, "ms") and clauses["p99_tpot"] == ("<=", 200.0, "ms")
    obs = {o.metric: o for o in server.observations}
    assert obs["token_throughput"].unit == "token/s" and obs["p99_ttft"].unit == "ns"
    assert obs["p99_ttft"].value <= 2e9 and obs["p99_tpot"].value <= 2e8  # the summary's own figures meet them
    resnet = next(t.model for t in result.trials if t.model.workload.name == "resnet50"
                  and t.model.contract.name.endswith("server"))
    assert {c.metric: c.value for c in resnet.contract.clauses}["p99_latency"] == 15.0
    state = server.state.dimensions
    assert {"accelerator_type", "accelerator_count", "hbm_capacity", "host_memory"} <= set(state)


def test_invalid_results_are_skipped_with_a_count(mlperf_copy):
    victim = _valid_summaries(mlperf_copy)[0]
    victim.write_text(victim.read_text().replace("Result is : VALID", "Result is : INVALID"))
    result = mlperf_results.read_results(mlperf_copy)
    assert result.skipped["invalid"] == 1
    assert len(result.trials) == len(_valid_summaries(mlperf_copy))
    assert "1 invalid" in result.summary()


@pytest.mark.parametrize("breaks, message", [
    (lambda root: [p.unlink() for p in _systems(root)], "is not an MLPerf Inference results tree"),
    (lambda root: _systems(root)[0].write_text("{not json"), "is not JSON"),
    (lambda root: _valid_summaries(root)[0].write_text("hello"), "is not an MLPerf loadgen summary"),
])
def test_a_broken_tree_is_one_line_and_nothing_is_written(mlperf_copy, luma_home, breaks, message):
    breaks(mlperf_copy)
    with pytest.raises(RecordError) as err:
        mlperf_results.read_results(mlperf_copy)
    assert message in err.value.one_line() and "\n" not in err.value.one_line()
    assert not payloads_of_kind(Settings.from_env(), "pex-trial")


def test_the_round_comes_from_the_folder_or_is_asked_for(tmp_path, mlperf_copy):
    plain = tmp_path / "results"
    mlperf_copy.rename(plain)
    with pytest.raises(RecordError, match="cannot tell the round"):
        mlperf_results.read_results(plain)
    assert mlperf_results.read_results(plain, "v4.1").round == "v4.1"


def test_ingest_is_all_or_nothing_and_idempotent(luma_home):
    result = mlperf_results.read_results(SAMPLE)
    first = mlperf_results.ingest(Settings.from_env(), result)
    assert len(first.added) == len(result.records)
    again = mlperf_results.ingest(Settings.from_env(), result)
    assert not again.added and len(again.duplicates) == len(result.records)
    assert len(payloads_of_kind(Settings.from_env(), "machine")) == len(result.machines)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", m.model.name) for m in result.machines)
