"""`luma import FORMAT FILE…` as a user runs it: json rows, one `Error:` line on a refusal."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import run_luma

DATA = Path(__file__).parents[1] / "experiments/imports/data"


def _run(args, home):
    return run_luma([str(a) for a in args], home)


def test_import_writes_records_with_no_ingest(tmp_path):
    out = tmp_path / "r.jsonl"
    res = _run(["import", "vllm-bench", str(DATA / "vllm-bench/synthetic-summary-only/result.json"), "--contract",
                "llamacpp-tinyllama-kv", "--state", "kv_cache=256MiB", "--architecture", "H100 SXM",
                "--architecture-kind", "gpu", "--vendor", "NVIDIA", "--no-ingest", "--out", str(out),
                "--format", "json"], tmp_path / "home")
    assert res.returncode == 0, (res.stdout + res.stderr)
    rows = json.loads(res.stdout)
    assert rows[0]["evidence_class"] == "vendor-claim"
    assert json.loads(out.read_text())["architecture"]["name"] == "H100 SXM"


def test_import_refusal_is_one_error_line(tmp_path):
    res = _run(["import", "llama-bench", str(DATA / "vllm-bench/synthetic-detailed/result.json"), "--contract",
                "llamacpp-tinyllama-kv", "--state", "kv_cache=256MiB", "--here", "--no-ingest", "--out",
                str(tmp_path / "r.jsonl")], tmp_path / "home")
    assert res.returncode == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: result.json:") and "vllm-bench" in lines[0]
    assert not (tmp_path / "r.jsonl").exists()
