"""Acceptance, on real files: `vllm bench serve --save-detailed` runs against llama.cpp's server
launched as llamacpp-tinyllama-kv launches it (data/chain/, tools/make_chain_files.sh) -- three at
the minimum PASS kv_cache 256 KiB, three at the adjacent FAIL 192 KiB (its streams shortened to
~224 of 300 tokens: kv-capacity), three of the kv-q8_0 intervention at 192 KiB -- imported signed,
assembled into a chain, and the rules qualify it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from luma.cli.main import cli
from tests.experiments.imports.cases import DATA

CHAIN = DATA / "chain"
WHERE = ["--contract", "llamacpp-tinyllama-kv", "--architecture", "AMD EPYC (AVX2, 2 vCPUs)",
         "--architecture-kind", "cpu", "--vendor", "AMD", "--key", "lab-a", "--tool-version", "0.32.0"]


def _ok(runner, args):
    res = runner.invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_real_runs_import_assemble_and_qualify(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()
    _ok(runner, ["runner", "keygen", "--name", "lab-a"])
    for folder, state, variant in (("pass-256kib", "kv_cache=256KiB", []), ("fail-192kib", "kv_cache=192KiB", []),
                                   ("q8-192kib", "kv_cache=192KiB", ["--variant", "kv-q8_0"])):
        files = [str(p) for p in sorted((CHAIN / folder).glob("rep*/result.json"))]
        out = json.loads(_ok(runner, ["import", "vllm-bench", *files, "--state", state, *variant, *WHERE,
                                      "--format", "json"]))
        assert len(out) == 3 and {r["evidence_class"] for r in out} == {"measured"}
        want = ("FAIL", "kv-capacity") if folder.startswith("fail") else ("PASS", None)
        assert {(r["verdict"], r["failure_cause"]) for r in out} == {want}
    said = _ok(runner, ["chain", "assemble", "--contract", "llamacpp-tinyllama-kv", "--key", "lab-a"])
    assert "minimum PASS 256 KiB, adjacent FAIL 192 KiB" in said and "int8-kv recovered PASS" in said
    _ok(runner, ["rules", "run"])
    rows = json.loads(_ok(runner, ["kb", "query", "--name", "qualified-boundaries", "--format", "json"]))
    (row,) = rows["results"]["bindings"]
    assert row["crossed"]["value"].endswith("kv_cache") and row["repetitions"]["value"] == "3"
