"""The `luma` command line: help everywhere, machine-readable output, --home, and lean imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import click
import pytest
from click.testing import CliRunner

from luma import __version__
from luma.cli.main import cli

KB = cli.commands["kb"]
KB_COMMANDS = sorted(KB.commands)
#: Commands that print results, and so must offer `--format` for machines.
PRINTING = ["query", "stats", "ingest", "bench"]


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_the_kb_group_has_the_documented_commands():
    assert isinstance(KB, click.Group)
    assert set(KB_COMMANDS) >= {"init", "ingest", "load", "query", "export", "stats", "rebuild", "bench"}


@pytest.mark.parametrize("args", [[], ["kb"]] + [["kb", name] for name in KB_COMMANDS],
                         ids=lambda a: " ".join(["luma", *a]))
def test_help_works_everywhere(args, luma_home):
    for flag in ("--help", "-h"):
        result = invoke(*args, flag)
        assert result.exit_code == 0, result.output
        assert "Usage: " in result.stdout and "Traceback" not in result.output
    assert not any(luma_home.iterdir())  # asking for help creates nothing


def test_group_help_lists_every_command():
    top = invoke("--help").stdout
    assert "kb" in top and "--home" in top and "--version" in top
    kb_help = invoke("kb", "--help").stdout
    for name in KB_COMMANDS:
        assert name in kb_help


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"luma, version {__version__}"


@pytest.mark.parametrize("name", PRINTING)
def test_printing_commands_offer_format(name):
    options = {opt for param in KB.commands[name].params for opt in getattr(param, "opts", [])}
    assert "--format" in options
    param = next(p for p in KB.commands[name].params if "--format" in p.opts)
    assert isinstance(param.type, click.Choice) and {"table", "json"} <= set(param.type.choices)
    assert "--format" in invoke("kb", name, "--help").stdout


def test_home_option_creates_the_project(luma_home, tmp_path):
    home = tmp_path / "nested" / "project"
    result = invoke("--home", home, "kb", "init")
    assert result.exit_code == 0, result.output
    assert home.is_dir() and (home / "ledger.sqlite").is_file() and (home / "kb").is_dir()
    assert str(home) in result.stdout
    assert not any(luma_home.iterdir())  # --home wins over LUMA_HOME
    again = invoke("--home", home, "kb", "init")  # idempotent
    assert again.exit_code == 0, again.output
    stats = invoke("--home", home, "kb", "stats", "--format", "json")
    assert stats.exit_code == 0 and json.loads(stats.stdout)["ledger_records"] == 0


def test_home_that_is_a_file_is_a_usage_error(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    result = invoke("--home", afile, "kb", "init")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_unknown_command_and_option_exit_2():
    assert invoke("nope").exit_code == 2
    assert invoke("kb", "stats", "--no-such-option").exit_code == 2


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_importing_the_kb_and_cli_does_not_import_torch():
    proc = _run_python(
        """
        import sys
        import luma.kb, luma.kb.knowledge_base, luma.cli.main
        heavy = sorted(m for m in sys.modules if m.split(".")[0] == "torch")
        print("HEAVY", heavy)
        assert not heavy, heavy
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_help_does_not_import_the_rdf_stack():
    proc = _run_python(
        """
        import sys
        from luma.cli.main import cli
        for args in (["--help"], ["kb", "--help"], ["kb", "query", "--help"], ["--version"]):
            try:
                cli.main(args, prog_name="luma", standalone_mode=False)
            except SystemExit as exc:
                assert not exc.code, exc.code
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("rdflib", "pyoxigraph", "oxrdflib", "pyshacl", "torch"))
        print("HEAVY", heavy)
        assert not heavy, heavy
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Usage: luma" in proc.stdout


def test_entry_point_prints_one_line_errors(tmp_path):
    """The installed `python -m luma.cli.main` path: a LumaError is one line, exit code 1."""
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    proc = subprocess.run(
        [sys.executable, "-m", "luma.cli.main", "--home", str(tmp_path / "home"), "kb", "ingest", str(bad)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith(f"Error: {bad}: invalid JSON") and proc.stderr.count("\n") == 1
    usage = subprocess.run([sys.executable, "-m", "luma.cli.main", "kb", "query"], capture_output=True, text=True,
                           timeout=120)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_query_knows_the_usual_prefixes_and_keeps_error_positions(luma_home):
    from luma.cli.main import cli as main_cli

    runner = CliRunner()
    assert runner.invoke(main_cli, ["kb", "init"]).exit_code == 0
    ok = runner.invoke(main_cli, ["kb", "query", "--format", "json",
                                  "SELECT (COUNT(*) AS ?n) WHERE { ?c a luma:BoundaryQualification }"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["results"]["bindings"][0]["n"]["value"] == "0"
    own = runner.invoke(main_cli, ["kb", "query", "--format", "json",
                                   "PREFIX luma: <urn:other#> SELECT ?c WHERE { ?c a luma:X }"])
    assert own.exit_code == 0 and json.loads(own.stdout)["results"]["bindings"] == []
    bad = runner.invoke(main_cli, ["kb", "query", "SELECT ?c WHERE {\n ?c a luma:X ."])
    assert bad.exit_code == 1 and "line 2" in bad.output


@pytest.mark.parametrize("sparql, where", [
    ("SELECT ?x WHERE { ?x a foo:Bar }", "line 1, column 24"),
    ("SELECT ?x WHERE {\n  ?x a luma:Chain .\n  ?x  foo:bar  ?y }", "line 3, column 7"),
    ("PREFIX foo: <urn:foo#>\nSELECT ?x WHERE { ?x foo:a ?y . ?y ex:b 'foo:bar' }", "line 2, column 36"),
])
def test_an_unknown_prefix_is_named_at_its_position(sparql, where, luma_home):
    """Not the engine's grammar dump at a column of the text with LUMA's prefixes in front."""
    assert invoke("kb", "init").exit_code == 0
    result = CliRunner().invoke(cli, ["kb", "query", sparql])
    assert result.exit_code == 1 and result.stdout == ""
    line = result.stderr.strip()
    prefix = "ex" if "ex:b" in sparql else "foo"
    assert line.startswith(f"Error: query: invalid SPARQL at {where}: unknown prefix {prefix}: (known: ")
    assert "luma:" in line and "xsd:" in line and "\n" not in line and "expected one of" not in line
    if prefix == "ex":
        assert "foo:" in line  # the query's own declarations are known too


def test_read_commands_do_not_import_the_write_path(tmp_path):
    """`luma kb stats` on a SQLite project loads neither SQLAlchemy, pydantic's record models, pint,
    the projection nor the shapes (issue 33: a read command answers at once)."""
    home = tmp_path / "home"
    assert CliRunner().invoke(cli, ["--home", str(home), "kb", "init"]).exit_code == 0  # a writer: loads them all
    proc = _run_python(
        f"""
        import sys
        from luma.cli.main import cli
        home = {str(home)!r}
        for args in (["--home", home, "kb", "stats"], ["--home", home, "kb", "stats", "--format", "json"]):
            try:
                cli.main(args, prog_name="luma", standalone_mode=False)
            except SystemExit as exc:
                assert not exc.code, exc.code
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "sqlmodel", "pint", "rdflib", "torch")
                       or m in ("luma.kb.ingest.write", "luma.kb.ingest.projection", "luma.kb.ingest.shacl",
                                "luma.kb.records.pex_chain", "luma.kb.store.ledger", "luma.kb.records.loader"))
        print("HEAVY", heavy)
        assert not heavy, heavy
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"ledger_records": 0' in proc.stdout


def test_a_prediction_does_not_build_the_unit_registry_or_the_ledger(tmp_path):
    """`luma model predict` reads a contract and the machine catalogue through the unit table and
    answers without pint, SQLAlchemy or the write path (issue 31: under 0.5 s for one state)."""
    proc = _run_python(
        f"""
        import sys
        from luma.cli.main import cli
        args = ["--home", {str(tmp_path / "home")!r}, "model", "predict", "llm-chat", "--llm", "mixtral-8x7b",
                "--state", "accelerator_type=H200,accelerator_count=8,tp=2,replicas=4,precision=fp8,engine=sglang"]
        try:
            cli.main(args, prog_name="luma", standalone_mode=False)
        except SystemExit as exc:
            assert not exc.code, exc.code
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "sqlmodel", "pint", "rdflib", "torch")
                       or m in ("luma.kb.ingest.write", "luma.kb.store.ledger"))
        print("HEAVY", heavy)
        assert not heavy, heavy
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "binding resource" in proc.stdout
