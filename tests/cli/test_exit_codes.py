"""One exit code per kind of mistake across commands (issue 32, first hour): a usage mistake —
a bad option value, a name given on the command line that does not exist, a `--param` typo —
exits 2, as click's own usage errors do; a failure exits 1. `luma kb query --name nope` exited 1
while a `--param` typo exited 2."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

USAGE = [
    (["kb", "query", "--name", "nope"], "no named query 'nope'"),
    (["rules", "run", "--param", "nope=1"], "no rule has a parameter 'nope'"),
    (["sprint", "run", "nope"], "no contract file or shipped contract named 'nope'"),
    (["sprint", "plan", "nope"], "no contract file or shipped contract named 'nope'"),
    (["sprint", "optimize", "nope"], "no contract file or shipped contract named 'nope'"),
    (["pilot", "run", "nope"], "no contract file or shipped contract named 'nope'"),
    (["model", "predict", "nope"], "no contract file or shipped contract named 'nope'"),
    (["machine", "show", "nope"], "unknown machine 'nope'"),
    (["partner", "evaluate", "nope", "--contract", "llm-chat"], "no record file 'nope'"),
    (["engine", "install", "nope"], "'nope' is not one of"),
    (["model", "predict", "llm-chat", "--state", "accelerator_type=nvidia-h100-sxm5-80gb"], "--llm"),
]


@pytest.mark.parametrize("args, message", USAGE, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(USAGE)])
def test_a_usage_mistake_exits_2_with_one_error_line(luma_home, args, message):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert "Traceback" not in result.output


def test_a_failure_exits_1(luma_home, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = not [toml")
    for args in (["sprint", "run", str(bad)], ["kb", "ingest", str(bad)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.count("Error:") == 1
