"""The real cases (files the tools wrote on this host, case.json `real`: true) through
`import_files`: those with per-request samples of both clauses become signed measured trials,
summary-only ones vendor-claim with the reason; a copy with one sample edited is refused whole
with one line naming file and field, nothing written; a run at another load than the contract's
is refused naming both figures, unless the contract is held at the run's load."""

from __future__ import annotations

import json
import shutil

import pytest

from luma.errors import RecordError
from luma.experiments.imports.importer import import_files, read_runs
from luma.kb.store.ledger import Ledger
from tests.experiments.imports.cases import DATA, folders, main_file, meta

REAL = [f for f in folders() if meta(f).get("real")]
IDS = [f"{f.parent.name}/{f.name}" for f in REAL]
#: Every real case asked for 64 output tokens (tools/make_real_files.sh).
OUT = 64


def _count(settings) -> int:
    ledger = Ledger(settings.db_url)
    try:
        return len(ledger.rows_of_kinds(["pex-trial"], "content_hash"))
    finally:
        ledger.dispose()


def _run(folder):
    return read_runs(meta(folder)["format"], [main_file(folder)], tool_version=meta(folder)["version"])[0]


def test_there_are_real_cases_of_four_formats():
    assert len({f.parent.name for f in REAL}) >= 4


@pytest.mark.parametrize("folder", REAL, ids=IDS)
def test_a_real_case_imports_as_measured_or_vendor_claim_with_its_reason(project, where_at, folder):
    run = _run(folder)
    res = import_files(project, meta(folder)["format"], [main_file(folder)], where_at(run.concurrency, OUT),
                       key="runner-a", tool_version=meta(folder)["version"])
    (j,) = res.trials
    assert res.ingested == 1
    if run.has_samples("ttft") and run.has_samples("tpot"):
        assert j.evidence_class == "measured" and j.record["attestation"]["key"]
        obs = {o["metric"]: o["value"] for o in j.record["observations"]}
        assert obs["p90_ttft.samples"] == run.completed and obs["p90_ttft.ci_low"] <= obs["p90_ttft"]
        # 64 tokens at ≤ 4 streams: far inside 500 ms / 20 ms; llama-bench's 5 repetitions are too
        # few for a p90 by the request-count rule
        assert j.verdict == ("INCONCLUSIVE" if meta(folder)["format"] == "llama-bench" else "PASS")
    else:
        assert j.evidence_class == "vendor-claim" and "attestation" not in j.record
        assert "never measured" in j.record["provenance"]["source"]["reason"]
    assert j.record["contract"]["concurrency"] == (run.concurrency or 1)


def _edit_one_sample(folder, dest):
    """A copy of the case in `dest` with one per-request value tripled; (main file, what was edited)."""
    shutil.copytree(folder, dest)
    fmt, main = meta(folder)["format"], dest / main_file(folder).name
    if fmt in ("vllm-bench", "sglang-bench"):
        lines = main.read_text().splitlines()
        doc = json.loads(lines[-1])
        doc["ttfts" if "ttfts" in doc else "latencies"][5] *= 3
        main.write_text(json.dumps(doc) + "\n")
    elif fmt == "aiperf":
        lines = main.read_text().splitlines()
        doc = json.loads(lines[10])
        doc["metrics"]["time_to_first_token"]["value"] *= 3
        lines[10] = json.dumps(doc)
        main.write_text("\n".join(lines) + "\n")
    elif fmt == "llama-bench":
        doc = json.loads(main.read_text())
        doc[-1]["samples_ns"][1] *= 3
        main.write_text(json.dumps(doc))
    elif fmt == "mlperf-loadgen":
        trace = dest / "mlperf_log_trace.json"
        lines = trace.read_text().splitlines()
        i = next(k for k, ln in enumerate(lines) if ln.startswith('{"name":"Sample"') and '"ph":"b"' in ln)
        doc = json.loads(lines[i].rstrip(","))
        doc["args"]["complete_ns"] *= 3
        lines[i] = json.dumps(doc, separators=(",", ":")) + ","
        trace.write_text("\n".join(lines) + "\n")
    return main


SAMPLED = [f for f in REAL if _run(f).samples]


@pytest.mark.parametrize("folder", SAMPLED, ids=[f"{f.parent.name}/{f.name}" for f in SAMPLED])
def test_a_real_file_with_one_sample_edited_is_refused_whole(project, where_at, folder, tmp_path):
    run = _run(folder)
    good = main_file(folder)
    bad = _edit_one_sample(folder, tmp_path / "edited")
    with pytest.raises(RecordError) as exc:
        import_files(project, meta(folder)["format"], [good, bad], where_at(run.concurrency, OUT), key="runner-a",
                     tool_version=meta(folder)["version"])
    line = exc.value.one_line()
    assert exc.value.source and exc.value.field and "\n" not in line
    assert _count(project) == 0


def test_a_run_at_another_concurrency_is_refused_naming_both(project, where_at):
    c4 = DATA / "vllm-bench/c4-detailed/result.json"
    with pytest.raises(RecordError, match=r"concurrency 4, the contract's 1") as exc:
        import_files(project, "vllm-bench", [c4], where_at(None, OUT), key="runner-a")
    assert exc.value.source == "result.json" and exc.value.field == "load" and _count(project) == 0


def test_a_run_at_another_output_length_is_refused(project, where_at):
    c1 = DATA / "aiperf/c1-stream/profile_export.jsonl"
    with pytest.raises(RecordError, match=r"output length 64 tokens, the contract's 300"):
        import_files(project, "aiperf", [c1], where_at(), key="runner-a")


def test_held_at_the_runs_load_the_record_states_it(project, where_at):
    res = import_files(project, "vllm-bench", [DATA / "vllm-bench/c4-detailed/result.json"], where_at(4, OUT),
                       key="runner-a", tool_version="0.32.0")
    contract = res.trials[0].record["contract"]
    assert contract["concurrency"] == 4 and contract["name"] == "llamacpp-tinyllama-kv-c4-out64"


def test_streams_shorter_than_the_contract_fail_as_its_cause(project, where_at):
    # vLLM's file does not record the output length it asked for: judged at 300 tokens, its
    # 64-token streams are short outputs, which the contract names kv-capacity.
    res = import_files(project, "vllm-bench", [DATA / "vllm-bench/c1-detailed/result.json"], where_at(1, None),
                       key="runner-a", tool_version="0.32.0")
    (j,) = res.trials
    assert j.verdict == "FAIL" and j.record["failure_cause"] == "kv-capacity"
