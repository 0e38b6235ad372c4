"""One CLI (issue 15, item 19): every --format help names exactly the formats the command offers,
a bad `--param` is a usage error (exit 2, as the README says), every error line starts the same
way (`Error: `; the demo's own refused record too: tests/reports/test_reports.py), and
`.luma-demo/` — where `luma demo` writes — is ignored by git."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.cli.output import ERROR_PREFIX, format_help

ROOT = Path(__file__).resolve().parents[2]


def _commands(group: click.Group, path=()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_every_format_help_names_only_the_formats_offered():
    checked = 0
    for path, cmd in _commands(cli):
        for p in cmd.params:
            if p.name == "fmt" and isinstance(p.type, click.Choice) and "table" in p.type.choices:
                offered = set(p.type.choices)
                for fmt in ("json", "csv"):
                    assert (fmt in p.help) == (fmt in offered), (" ".join(path), p.help)
                checked += 1
    assert checked > 20
    assert format_help(("table", "json")) == "table for people, json for machines."
    assert format_help(("table", "json", "csv")) == "table for people, json/csv for machines."


@pytest.mark.parametrize("param, message", [
    ("min_workloads=abc", "min_workloads: 'abc' is not an integer"),
    ("no_such_parameter=3", "no rule has a parameter 'no_such_parameter'"),
    ("min_workloads=1", "below its floor"),
    ("=3", "expected name=value"),
])
def test_a_bad_param_is_a_usage_error(luma_home, param, message):
    result = CliRunner().invoke(cli, ["rules", "run", "--param", param])
    assert result.exit_code == 2, result.output
    assert message in result.output and f"{ERROR_PREFIX}Invalid value for --param" in result.output
    assert not (luma_home / "kb").exists()  # refused before the KB is opened


def test_errors_start_the_same_way(luma_home, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    runner = CliRunner()
    for args in (["kb", "ingest", str(bad)], ["rules", "run", "--param", "x=1"], ["model", "predict", "nope"],
                 ["report", "boundary", "--out", str(tmp_path / "r")]):
        result = runner.invoke(cli, args)
        assert result.exit_code in (1, 2), (args, result.output)
        last = result.output.strip().splitlines()[-1]
        assert last.startswith(ERROR_PREFIX), (args, last)


def test_the_demo_folder_is_ignored_by_git():
    assert ".luma-demo/" in (ROOT / ".gitignore").read_text().split()
