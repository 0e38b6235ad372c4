"""`luma kb rebuild` recreates the KB from the ledger alone, so the rules' derived facts go
(issue 32, first hour): it says so, and what to run to derive them again."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from luma.cli.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "kb" / "examples" / "digits-mlp.yaml"


def test_rebuild_says_the_derived_facts_need_the_rules_again(luma_home):
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "ingest", str(EXAMPLE)]).exit_code == 0
    first = runner.invoke(cli, ["kb", "rebuild"])
    assert first.exit_code == 0 and "luma rules run" not in first.output  # nothing derived yet: nothing to say
    assert runner.invoke(cli, ["rules", "run"]).exit_code == 0
    result = runner.invoke(cli, ["kb", "rebuild"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "luma rules run" in line]
    assert len(lines) == 1 and "derived" in lines[0], result.output
    again = runner.invoke(cli, ["kb", "rebuild"])  # the derived facts already went
    assert "luma rules run" not in again.output
