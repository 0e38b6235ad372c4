"""The project directory (`LUMA_HOME` / `--home`): a bad one is one line, never a traceback; a
command that reads a project says so where there is none (a mistyped LUMA_HOME, a command before
`luma kb init`) and creates nothing; a command that writes makes the project on first use."""

from __future__ import annotations

import json

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from luma.cli import project
from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "kb" / "examples" / "embedding-minilm.json"
PARTNER = ROOT / "kb" / "examples" / "partner-kv-compression.toml"

#: Commands that write the project (made on first use).
WRITERS = [
    ["kb", "init"], ["kb", "ingest", CHAIN], ["kb", "load", ROOT / "kb" / "examples" / "spec-sheets.ttl",
                                              "--evidence-class", "vendor-claim"],
    ["partner", "add", PARTNER], ["runner", "keygen"], ["kernels", "evaluate", "--model", "digits"],
    ["sprint", "run", "matvec-memory"], ["model", "calibrate", "matvec-memory"],
]
#: Commands that read a project and so need one (with valid arguments).
READERS = [
    ["kb", "query", "--name", "qualified-boundaries"], ["kb", "query", "ASK {}", "--format", "json"],
    ["kb", "stats"], ["kb", "export"], ["kb", "explain", "id:chain/0"], ["kb", "rebuild"], ["rules", "run"],
    ["report", "boundary", "--out", "{out}"], ["report", "design-in", "--out", "{out}"],
    ["partner", "list"], ["partner", "show", "kvzip"], ["partner", "remove", "kvzip-labs"],
    ["runner", "list"], ["runner", "revoke", "somebody"],
]


def luma(args, tmp_path: Path):
    args = [str(a).replace("{out}", str(tmp_path / "out")) for a in args]
    return CliRunner().invoke(cli, args, catch_exceptions=False)  # a traceback fails the test


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _leaves(group: click.Group, path=()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, (*path, name))
        else:
            yield " ".join((*path, name)), cmd


def test_every_command_declares_what_it_does_with_the_project():
    undeclared = [name for name, cmd in _leaves(cli) if not hasattr(cmd.callback, "luma_project")]
    assert undeclared == []
    uses = {name: cmd.callback.luma_project for name, cmd in _leaves(cli)}
    assert {" ".join(map(str, a[:2])) for a in READERS} <= {n for n, u in uses.items() if u == project.READ}
    assert {" ".join(map(str, a[:2])) for a in WRITERS} <= {n for n, u in uses.items() if u == project.WRITE}


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_RUNNER_KEY"):
        monkeypatch.delenv(var, raising=False)


def _bad_home(kind: str, tmp_path: Path, monkeypatch) -> tuple[Path, str]:
    """A bad LUMA_HOME of this kind, and what its error says."""
    if kind == "a file":
        home = tmp_path / "file"
        home.write_text("not a directory")
        return home, f"{home} is not a directory"
    if kind == "under a file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "project", "is not a directory"
    if kind == "under /proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc here")
        return Path("/proc/luma-no-such-project"), "/proc/luma-no-such-project"
    home = tmp_path / "read-only"
    home.mkdir()
    if os.geteuid() == 0:
        # root writes through permission bits: answer as access(2) does on a read-only file system
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == home else real(p, mode, **kw))
    else:
        home.chmod(0o555)
    return home, str(home)


BAD_HOMES = ["a file", "under a file", "under /proc", "read-only"]


@pytest.mark.parametrize("kind", BAD_HOMES)
@pytest.mark.parametrize("args", WRITERS + READERS, ids=lambda a: " ".join(map(str, a[:2])))
def test_a_bad_luma_home_is_one_line(kind, args, tmp_path, monkeypatch, clean_env):
    home, says = _bad_home(kind, tmp_path, monkeypatch)
    monkeypatch.setenv("LUMA_HOME", str(home))
    before = sorted(p.name for p in home.iterdir()) if home.is_dir() else None
    if args in READERS and kind != "a file":
        says = f"no LUMA project at {home}"  # a reader creates nothing, so that is all there is to say
    elif kind == "read-only":
        says = f"{home} is not writable"
    one_line_error(luma(args, tmp_path), "Error: LUMA_HOME: ", says)
    assert (sorted(p.name for p in home.iterdir()) if home.is_dir() else None) == before  # nothing written


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(map(str, a[:3])))
@pytest.mark.parametrize("where", ["mistyped", "empty directory", "default"])
def test_reading_where_there_is_no_project_says_so(args, where, tmp_path, monkeypatch, clean_env):
    """Not an empty project answering "0 rows" with exit 0."""
    if where == "default":
        monkeypatch.delenv("LUMA_HOME", raising=False)
        monkeypatch.chdir(tmp_path)
        home, named = tmp_path / ".luma", "the default project (./.luma)"
    else:
        home = tmp_path / ("projcet" if where == "mistyped" else "empty")
        if where == "empty directory":
            home.mkdir()
        monkeypatch.setenv("LUMA_HOME", str(home))
        named = "LUMA_HOME"
    one_line_error(luma(args, tmp_path), f"Error: {named}: no LUMA project at {home.absolute()}", "luma kb init")
    assert not home.exists() or not any(home.iterdir())  # nothing created


def test_home_option_is_named_in_the_error(tmp_path, clean_env):
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "nowhere"), "kb", "stats"])
    one_line_error(result, "Error: --home: no LUMA project at")


def test_a_writer_makes_the_project_and_says_so_even_in_a_log(tmp_path, monkeypatch, clean_env):
    home = tmp_path / "new" / "project"
    monkeypatch.setenv("LUMA_HOME", str(home))
    quiet = CliRunner().invoke(cli, ["kb", "ingest", str(CHAIN), "--format", "json"])  # no terminal
    assert quiet.exit_code == 0 and json.loads(quiet.stdout)  # stdout: the output alone
    assert quiet.stderr.splitlines()[-1] == f"note: created a new LUMA project at {home} (LUMA_HOME)"
    assert (home / "ledger.sqlite").is_file()
    again = CliRunner().invoke(cli, ["kb", "ingest", str(CHAIN)])
    assert "created a new LUMA project" not in again.stderr  # only the first time


def test_a_failed_first_write_leaves_no_directory(tmp_path, monkeypatch, clean_env):
    home = tmp_path / "new" / "project"
    monkeypatch.setenv("LUMA_HOME", str(home))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    one_line_error(CliRunner().invoke(cli, ["kb", "ingest", str(bad)]), f"{bad}: invalid JSON")
    assert not (tmp_path / "new").exists()


def test_an_os_error_is_one_line_naming_the_path(tmp_path, monkeypatch, clean_env):
    """A file a command cannot write (here `--out` under /proc) is `PATH: reason`, exit 1."""
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "project"))
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    result = CliRunner().invoke(cli, ["kb", "export", "--out", "/proc/luma-nope/kb.nq"], catch_exceptions=False)
    one_line_error(result, "Error: /proc/luma-nope/kb.nq: No such file or directory")
