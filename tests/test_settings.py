"""Settings are read from the environment once per command and passed explicitly from there on:
the CLI never writes `LUMA_*` back into `os.environ`, no module but `luma/settings.py` reads a
`LUMA_*` variable, and the endpoint URLs, input-file limits and sandbox switch travel in
`Settings` like the rest (issue 15, item 22)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ConfigError
from luma.kb.records.input_files import CONFIG_FILE, RECORD_FILE
from luma.kb.store import open_store
from luma.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "kb", "experiments", "kernels", "reports", "rules", "ontology", "luma")
#: Where `Settings.from_env` may be called: the CLI's one place, and the Python entry point `open_kb`.
#: ... and the one entry point that is not the CLI: a campaign unit starting in a Ray worker on a
#: runner node, whose project is that node's (the LUMA_HOME `luma runner join` started it with).
#: luma/api.py names it only in its docstring's example of a program that uses the public API.
FROM_ENV_CALLERS = {"luma/settings.py", "cli/project.py", "kb/knowledge_base.py", "experiments/fleet/node.py",
                    "luma/api.py"}


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def _reads_luma_variable(node: ast.AST) -> bool:
    """`os.environ[...]`, `os.environ.get(...)`, `os.getenv(...)` or `environ.setdefault(...)`
    with a literal `LUMA_...` name; and any write to `os.environ`."""
    if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
        key = node.slice
        return isinstance(key, ast.Constant) and str(key.value).startswith("LUMA_")
    if isinstance(node, ast.Call):
        fn = ast.unparse(node.func)
        if fn.endswith(("environ.get", "getenv", "environ.setdefault", "environ.pop")) and node.args:
            first = node.args[0]
            return isinstance(first, ast.Constant) and str(first.value).startswith("LUMA_")
    return False


def test_only_settings_reads_luma_variables():
    offenders = []
    for rel, text in _sources():
        if rel == "luma/settings.py":
            continue
        for node in ast.walk(ast.parse(text)):
            if _reads_luma_variable(node):
                offenders.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert offenders == [], "\n".join(offenders)


def test_nothing_writes_the_environment_for_later_code_to_read():
    offenders = []
    for rel, text in _sources():
        for node in ast.walk(ast.parse(text)):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ":
                    offenders.append(f"{rel}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert offenders == [], "\n".join(offenders)


def test_settings_are_built_in_one_place():
    callers = sorted({rel for rel, text in _sources() if "Settings.from_env(" in text})
    assert set(callers) <= FROM_ENV_CALLERS, callers


def test_the_cli_leaves_the_environment_as_it_found_it(tmp_path, monkeypatch):
    monkeypatch.delenv("LUMA_HOME", raising=False)
    monkeypatch.delenv("LUMA_WAIT", raising=False)
    before = dict(os.environ)
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "p"), "--wait", "3", "kb", "init"])
    assert result.exit_code == 0, result.output
    assert dict(os.environ) == before  # was: LUMA_HOME and LUMA_WAIT written back
    assert (tmp_path / "p" / "ledger.sqlite").is_file()


def test_home_option_wins_over_luma_home_and_is_read_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "from-env"))
    calls = []
    real = Settings.from_env.__func__

    def counted(cls, **kwargs):
        calls.append(kwargs)
        return real(cls, **kwargs)

    monkeypatch.setattr(Settings, "from_env", classmethod(counted))
    runner = CliRunner()
    for args in (["kb", "init"], ["kb", "stats"], ["machine", "list"], ["rules", "list"]):
        calls.clear()
        result = runner.invoke(cli, ["--home", str(tmp_path / "given"), *args])
        assert result.exit_code == 0, (args, result.output)
        assert len(calls) == 1 and calls[0]["home"] == str(tmp_path / "given"), (args, calls)
    assert not (tmp_path / "from-env").exists()


def test_a_bad_variable_is_one_line_only_when_a_command_needs_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_WAIT", "soon")
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "--help"]).exit_code == 0
    result = runner.invoke(cli, ["--home", str(tmp_path), "kb", "init"])
    assert result.exit_code == 1 and "LUMA_WAIT" in result.output and "Traceback" not in result.output
    assert runner.invoke(cli, ["--home", str(tmp_path), "--wait", "1", "kb", "init"]).exit_code == 0  # the flag wins


def test_every_variable_lands_in_settings():
    env = {"LUMA_HOME": "/srv/p", "LUMA_DB_URL": "postgresql+psycopg://u@h/db", "LUMA_KB_URL": "http://kb:7878",
           "LUMA_KB_QUERY_URL": "http://kb/sparql", "LUMA_KB_UPDATE_URL": "http://kb/update",
           "LUMA_KB_STORE_URL": "http://kb/data", "LUMA_WAIT": "2.5", "LUMA_QUERY_MEMORY": "1GiB",
           "LUMA_QUERY_MAX_ANSWER_BYTES": "1MiB", "LUMA_QUERY_REQUIRE_SANDBOX": "1", "LUMA_RUNNER_KEY": "lab",
           "LUMA_MAX_CONFIG_FILE_BYTES": "10", "LUMA_MAX_RECORD_FILE_BYTES": "99"}
    s = Settings.from_env(environ=env)
    assert (s.home, s.db_url, s.kb_url, s.wait) == (Path("/srv/p"), env["LUMA_DB_URL"], env["LUMA_KB_URL"], 2.5)
    assert (s.query_memory, s.query_answer_bytes, s.require_sandbox, s.runner_key) == (2**30, 2**20, True, "lab")
    assert (CONFIG_FILE.under(s).bytes(), RECORD_FILE.under(s).bytes()) == (10, 99)
    store = open_store(s.kb_url, s)
    assert (store.query_url, store.update_url, store.store_url) == ("http://kb/sparql", "http://kb/update", "http://kb/data")
    plain = open_store("http://kb:7878", Settings.from_env(environ={}))
    assert (plain.query_url, plain.store_url) == ("http://kb:7878/query", "http://kb:7878/store")
    assert Settings.from_env(environ=env, home="/elsewhere", wait=0).home == Path("/elsewhere")
    assert Settings.from_env(environ=env, home="/elsewhere", wait=0).wait == 0
    with pytest.raises(ConfigError, match="LUMA_MAX_RECORD_FILE_BYTES"):
        Settings.from_env(environ={"LUMA_MAX_RECORD_FILE_BYTES": "lots"})


def test_moving_settings_moves_only_the_embedded_stores(tmp_path):
    local = Settings.local(tmp_path / "a").at(tmp_path / "b")
    assert local.db_url == f"sqlite:///{tmp_path / 'b' / 'ledger.sqlite'}" and local.kb_url == f"oxigraph:{tmp_path / 'b' / 'kb'}"
    served = Settings.from_env(environ={"LUMA_DB_URL": "postgresql+psycopg://u@h/db"}, home=tmp_path / "a")
    assert served.at(tmp_path / "b").db_url == "postgresql+psycopg://u@h/db"


def test_the_rules_cache_is_the_machine_s_and_follows_its_variables(tmp_path):
    from luma.settings import rules_cache

    assert rules_cache({"LUMA_RULES_CACHE": str(tmp_path / "r")}) == tmp_path / "r"
    assert rules_cache({"XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "luma" / "rules"
    assert rules_cache({}) == Path.home() / ".cache" / "luma" / "rules"
