"""import_files end to end: signed measured records pass ingest (re-judged), summary-only files
become vendor-claim with the reason, failed requests FAIL with cause error, a tampered sample
refuses the whole file and leaves ledger and KB untouched, a file of another format says what it
looked like, and sequences continue a sprint already in the ledger."""

from __future__ import annotations

import json
import shutil

import pytest

from luma.errors import RecordError
from luma.experiments.imports.importer import import_files
from luma.kb.store.ledger import Ledger
from tests.experiments.imports.cases import DATA


def _ledger_count(settings) -> int:
    ledger = Ledger(settings.db_url)
    try:
        return len(ledger.rows_of_kinds(["pex-trial"], "content_hash"))
    finally:
        ledger.dispose()


def test_detailed_vllm_file_is_a_signed_measured_trial_ingested(project, where):
    res = import_files(project, "vllm-bench", [DATA / "vllm-bench/synthetic-detailed/result.json"], where,
                       key="runner-a", tool_version="0.32.0")
    (j,) = res.trials
    assert res.ingested == 1 and j.evidence_class == "measured" and j.verdict == "PASS"
    rec = j.record
    assert rec["attestation"]["key"]
    src = rec["provenance"]["source"]
    assert src["tool"] == "vllm bench serve" and src["version"] == "0.32.0" and len(src["files"][0]["sha256"]) == 64
    obs = {o["metric"]: o["value"] for o in rec["observations"]}
    assert obs["p90_ttft.samples"] == 60 and obs["p90_ttft.ci_low"] <= obs["p90_ttft"] <= obs["p90_ttft.ci_high"]


def test_summary_only_is_vendor_claim_with_its_reason_never_signed(project, where):
    res = import_files(project, "vllm-bench", [DATA / "vllm-bench/synthetic-summary-only/result.json"], where,
                       key="runner-a")
    (j,) = res.trials
    assert j.evidence_class == "vendor-claim" and "attestation" not in j.record
    assert "--save-detailed" in j.record["provenance"]["source"]["reason"]
    assert res.ingested == 1


def test_failed_requests_fail_with_cause_error(project, where):
    res = import_files(project, "vllm-bench", [DATA / "vllm-bench/synthetic-failed/result.json"], where, key="runner-a")
    (j,) = res.trials
    assert j.verdict == "FAIL" and j.record["failure_cause"] == "error" and j.evidence_class == "measured"
    assert not any(o["metric"].startswith("p90_") for o in j.record["observations"])


def test_few_llama_bench_repetitions_are_inconclusive(project, where_at):
    res = import_files(project, "llama-bench", [DATA / "llama-bench/synthetic-5-reps/bench.json"], where_at(1, 64),
                       key="runner-a")
    assert res.trials[0].verdict == "INCONCLUSIVE"


@pytest.mark.parametrize("edit", [
    lambda d: d["ttfts"].__setitem__(17, d["ttfts"][17] * 3),  # an edited sample: summary no longer agrees
    lambda d: d["ttfts"].__setitem__(17, -0.2),
    lambda d: d["ttfts"].pop(),
    lambda d: d["itls"][3].append(float("nan")),
])
def test_a_tampered_file_is_refused_whole_and_nothing_is_written(project, where, tmp_path, edit):
    good = DATA / "vllm-bench/synthetic-detailed/result.json"
    bad = tmp_path / "run.json"
    doc = json.loads(good.read_text())
    edit(doc)
    bad.write_text(json.dumps(doc))
    before = _ledger_count(project)
    with pytest.raises(RecordError) as exc:
        import_files(project, "vllm-bench", [good, bad], where, key="runner-a")
    assert exc.value.source == "run.json" and "\n" not in exc.value.one_line()
    assert _ledger_count(project) == before


def test_a_file_of_another_format_says_what_it_looked_like(project, where):
    with pytest.raises(RecordError, match="it is a sglang-bench file"):
        import_files(project, "vllm-bench", [DATA / "sglang-bench/synthetic-details/bench.jsonl"], where)



def test_a_file_lacking_a_mark_says_which(project, where, tmp_path):
    doc = json.loads((DATA / "llama-bench/synthetic-5-reps/bench.json").read_text())
    for t in doc:
        del t["samples_ns"]
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match="looked most like llama-bench but lacks samples_ns"):
        import_files(project, "llama-bench", [path], where)


def test_sequences_continue_the_sprint_in_the_ledger(project, where, tmp_path):
    files = [DATA / "aiperf/synthetic-records/profile_export.jsonl"]
    first = import_files(project, "aiperf", files, where, key="runner-a", sprint="lab-a")
    other = tmp_path / "run"
    shutil.copytree(DATA / "sglang-bench/synthetic-details", other)
    second = import_files(project, "sglang-bench", [other / "bench.jsonl"], where, key="runner-a", sprint="lab-a")
    assert [j.record["sequence"] for j in first.trials + second.trials] == [0, 1]


def test_no_ingest_writes_the_records_and_touches_nothing(project, where, tmp_path):
    out = tmp_path / "records.jsonl"
    res = import_files(project, "mlperf-loadgen", [DATA / "mlperf-loadgen/synthetic-trace/mlperf_log_summary.txt"],
                       where, key="runner-a", ingest=False, out=out)
    assert res.ingested == 0 and len(out.read_text().splitlines()) == 1 and _ledger_count(project) == 0
