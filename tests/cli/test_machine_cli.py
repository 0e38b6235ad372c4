"""`luma machine list|show|characterize`: formats, the KB path, and bad input that writes nothing."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.records.machine_catalog import catalog, load_machine
from luma.settings import Settings


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _one_line_error(result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("sub", [[], ["list"], ["show"], ["characterize"]])
def test_help_everywhere(sub, luma_home):
    result = _run("machine", *sub, "--help")
    assert result.exit_code == 0 and "Usage:" in result.output
    assert not any(luma_home.iterdir())


def test_list_json_and_csv_show_the_catalog(luma_home):
    rows = json.loads(_run("machine", "list", "--format", "json").stdout)
    assert {r["name"] for r in rows} == set(catalog())
    h100 = next(r for r in rows if r["name"] == "nvidia-h100-sxm5-80gb")
    assert h100["evidence_class"] == "vendor-claim" and h100["where"] == "catalog"
    assert h100["bf16_tflops"] == 989.5 and h100["memory_gb"] == 85.5208 and h100["memory_bw_gbs"] == 3350
    table = list(csv.DictReader(io.StringIO(_run("machine", "list", "--format", "csv").stdout)))
    assert len(table) == len(rows) and "source" in table[0]
    assert "nvidia-h200-sxm-141gb" in _run("machine", "list").stdout
    assert not any(luma_home.iterdir())  # listing creates nothing


def test_show_json_is_the_record(luma_home):
    result = _run("machine", "show", "amd-instinct-mi300x", "--format", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown == load_machine("amd-instinct-mi300x").model_dump(mode="json", exclude_none=True)
    assert shown["source"]["url"].startswith("https://www.amd.com/")
    table = _run("machine", "show", "amd-instinct-mi300x").stdout
    assert "vendor-claim" in table and "5.3 TB/s" in table


def test_show_takes_a_short_name(luma_home):
    shown = json.loads(_run("machine", "show", "B200", "--format", "json").stdout)
    assert shown["name"] == "nvidia-b200-sxm-180gb"
    assert not any(luma_home.iterdir())


@pytest.mark.parametrize("args,message", [
    (["show", "h100x"], "unknown machine 'h100x'; did you mean nvidia-h100"),
    (["show", "tpu-v9"], "known: amd-epyc-7763, amd-epyc-9654"),
])
def test_unknown_machine_is_one_line_and_writes_nothing(args, message, luma_home):
    line = _one_line_error(_run("machine", *args), 2)  # a name given that does not exist: a usage mistake
    assert message in line
    assert not any(luma_home.iterdir())


@pytest.mark.parametrize("args,message", [
    (["--cores", "0"], "core counts must be from 1"),
    (["--cores", "999"], "core counts must be from 1"),
    (["--cores", "one"], "comma-separated whole numbers"),
    (["--name", "My Host"], "a slug"),
    (["--format", "xml"], "'xml' is not one of"),
])
def test_characterize_usage_errors_exit_2_before_measuring(args, message, luma_home):
    result = _run("machine", "characterize", "--quick", *args)
    assert result.exit_code == 2 and message in result.output
    assert not any(luma_home.iterdir())


@pytest.mark.parametrize("quantity,message", [
    ({"bandwidth": {"value": 3.35, "unit": "TB"}}, "memory[0].bandwidth: unit 'TB' is not a bandwidth"),
    ({"capacity": {"value": -80, "unit": "GB"}}, "memory[0].capacity: value must be positive, got -80"),
])
def test_bad_machine_file_is_refused_whole(quantity, message, luma_home, tmp_path):
    doc = json.loads(catalog()["nvidia-h100-sxm5-80gb"].read_text())
    doc["memory"] = [{"tier": "hbm", **quantity}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert message in _one_line_error(_run("machine", "show", str(path)))
    assert message in _one_line_error(_run("kb", "ingest", str(path)))
    from luma.kb.records.machine_catalog import stored_machines

    assert stored_machines(Settings.from_env(home=luma_home)) == []


def test_no_ingest_writes_only_the_out_file(luma_home, tmp_path, monkeypatch):
    from luma.experiments import characterize as ch

    canned = json.loads(catalog()["amd-epyc-9654"].read_text())
    canned.update(evidence_class="measured", name="canned-host")
    canned.pop("source")
    monkeypatch.setattr(ch, "characterize", lambda **kw: canned)
    out = tmp_path / "sub" / "host.json"
    result = _run("machine", "characterize", "--no-ingest", "--out", out, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == canned and json.loads(result.stdout)["name"] == "canned-host"
    assert not any(luma_home.iterdir())


@pytest.mark.slow
def test_characterize_quick_records_the_host_in_the_kb(luma_home, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "host.json"
    # --allow-contended: the figures are what this test checks, whatever the CI host's neighbours do
    result = _run("machine", "characterize", "--quick", "--cores", "1", "--name", "test-host", "--out", out,
                  "--allow-contended", "--format", "json")
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["evidence_class"] == "measured" and rec["name"] == "test-host"
    assert {c["cores"] for c in rec["compute"]} == {1} and {c["precision"] for c in rec["compute"]} == {"fp32", "bf16", "int8"}
    assert json.loads(out.read_text())["name"] == "test-host"
    assert "recorded measured machine test-host" in result.stderr
    assert len(list((luma_home / "machines").glob("*-test-host.json"))) == 1
    rows = json.loads(_run("machine", "list", "--format", "json").stdout)
    mine = next(r for r in rows if r["name"] == "test-host")
    assert mine["evidence_class"] == "measured" and mine["where"].startswith("kb:") and mine["fp32_tflops"] > 0
    shown = json.loads(_run("machine", "show", "test-host", "--format", "json").stdout)
    assert shown["compute"] == rec["compute"]
    answer = _run("kb", "query", "--format", "json",
                  "SELECT ?f WHERE { ?m a luma:MachineParameters ; luma:machineName 'test-host' ; luma:figure ?f . "
                  "?f luma:evidenceClass luma:Measured }")
    assert len(json.loads(answer.stdout)["results"]["bindings"]) == len(rec["compute"]) + len(rec["memory"])
