"""`luma evidence list|verify|load` through the CLI: the shipped set, a tampered copy (one
`Error:` line, exit 1, nothing written), and a load that says what it trusted."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.evidence import shipped


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_list_names_every_machine_and_contract():
    out = run("evidence", "list", "--format", "json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    data = shipped.verify().manifest
    assert {(r["machine"], r["contract"]) for r in rows} == {(m["id"], c["name"]) for m in data["machines"]
                                                             for c in m["contracts"]}
    assert run("evidence", "list", "--format", "csv").output.startswith("machine,cpu,isa")


def test_verify_and_load_twice(luma_home):
    out = run("evidence", "verify")
    assert out.exit_code == 0 and out.output.startswith("verified "), out.output
    first = run("evidence", "load", "--format", "json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["added"] == shipped.verify().count() and doc["trusted"]
    assert all("shipped with LUMA" in t["purpose"] for t in doc["trusted"])
    again = run("evidence", "load")
    assert again.exit_code == 0 and "loaded 0 record(s)" in again.output and "already trusted" in again.output
    keys = json.loads(run("runner", "list", "--format", "json").stdout)
    assert all(k["scope"].endswith(" records") for k in keys)


def test_a_tampered_copy_fails_with_one_line_and_writes_nothing(luma_home, tmp_path):
    copy = tmp_path / "set"
    shutil.copytree(shipped.default_root(), copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = next((copy / "records").rglob("*.jsonl"))
    path.write_text(path.read_text() + path.read_text().splitlines()[0] + "\n")  # one record twice
    out = run("evidence", "verify", "--from", copy)
    assert out.exit_code == 1 and out.output.strip().splitlines() == [
        f"Error: {path}: holds {len(path.read_text().splitlines())} record(s), the manifest lists "
        f"{len(path.read_text().splitlines()) - 1}"]
    load = run("evidence", "load", "--from", copy)
    assert load.exit_code == 1 and load.output.count("Error:") == 1 and "nothing was loaded" in load.output
    assert not (luma_home / "ledger.sqlite").exists()
