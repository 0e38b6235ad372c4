"""`luma sprint list` (issue 32, first hour): the sprints of a project, each with its trials and
its chain or why it has none, as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from luma.cli.main import cli


def _sprint(home, name, trials, summary=None, chain=False, optimize=None):
    folder = home / "sprints" / name
    folder.mkdir(parents=True)
    for i in range(trials):
        (folder / f"trial-{i:03d}.json").write_text(json.dumps({
            "contract": {"name": name.rsplit("-", 2)[0]},
            "provenance": {"started": f"2026-12-{name[-10:-8]}T10:00:00+00:00"}}))
    if summary is not None:
        (folder / "sprint.json").write_text(json.dumps(summary))
    if chain:
        (folder / "chain.json").write_text("{}")
    if optimize is not None:
        (folder / "optimize.json").write_text(json.dumps(optimize))
    return folder


def test_sprint_list_says_what_each_sprint_kept(luma_home):
    ok = _sprint(luma_home, "matvec-memory-host_memory-20261201T100000Z", 13, chain=True, summary={
        "contract": "matvec-memory", "dimension": "host_memory", "min_pass": "8 MiB", "adjacent_fail": "6 MiB",
        "binding": "host_memory", "intervention": "int8-weights", "recovered": True, "problems": []})
    _sprint(luma_home, "decoder-kv-kv_cache-20261202T100000Z", 11)  # interrupted: trials, no summary
    _sprint(luma_home, "digits-compute-compute-20261203T100000Z", 4, summary={
        "contract": "digits-compute", "dimension": "compute", "min_pass": None, "adjacent_fail": None, "problems": []})
    _sprint(luma_home, "minilm-pilot-optimize-20261204T100000Z", 2,
            optimize={"contract": "minilm-pilot", "best": {"variant": "fp32", "threads": 1, "replicas": 2,
                                                           "max_batch": 8, "throughput": 195.94}})
    runner = CliRunner()
    rows = json.loads(runner.invoke(cli, ["sprint", "list", "--format", "json"]).stdout)
    assert [r["sprint"][:12] for r in rows] == ["matvec-memor", "decoder-kv-k", "digits-compu", "minilm-pilot"]
    by = {r["contract"]: r for r in rows}
    assert by["matvec-memory"] | {"outcome": None} == {
        "sprint": ok.name, "kind": "sprint", "contract": "matvec-memory", "dimension": "host_memory",
        "started": "2026-12-01T10:00:00+00:00", "trials": 13, "chain": True, "outcome": None, "path": str(ok)}
    assert "minimum PASS 8 MiB, adjacent FAIL 6 MiB" in by["matvec-memory"]["outcome"]
    assert by["decoder-kv"]["trials"] == 11 and not by["decoder-kv"]["chain"]
    assert by["decoder-kv"]["outcome"] == "no chain: interrupted or still running (no summary)"
    assert by["digits-compute"]["outcome"] == "no chain: no level passed"
    assert by["minilm-pilot"]["kind"] == "optimize" and "195.9 requests/s" in by["minilm-pilot"]["outcome"]
    table = runner.invoke(cli, ["sprint", "list"]).output
    for r in rows:
        assert r["sprint"] in table and r["outcome"] in table  # whole cells: no terminal here, no width limit
    got = list(csv.DictReader(io.StringIO(runner.invoke(cli, ["sprint", "list", "--format", "csv"]).output)))
    assert [g["sprint"] for g in got] == [r["sprint"] for r in rows] and got[1]["trials"] == "11"


def test_a_project_without_sprints_says_how_to_run_one(luma_home):
    result = CliRunner().invoke(cli, ["sprint", "list"])
    assert result.exit_code == 0 and "luma sprint run CONTRACT" in result.output
    assert json.loads(CliRunner().invoke(cli, ["sprint", "list", "--format", "json"]).stdout) == []
