"""Every command of the README's "Using it", driven as a new user meets it: without the kernels
extra, with a bad LUMA_HOME and with a bad argument. Each either works or ends in one line naming
what to do; never a traceback. The commands are read from the README, so a new one must be
added here (with its bad argument) or this test fails."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CHAIN = ROOT / "kb" / "examples" / "embedding-minilm.json"


def readme_commands() -> list[str]:
    """The `luma …` lines of "Using it" (comments, redirections and `list | check` unfolded)."""
    section = README.split("\n## Using it\n", 1)[1].split("\n#", 1)[0]
    out = []
    for line in section.splitlines():
        if not line.startswith("    luma "):
            continue
        words = shlex.split(line, comments=True)[1:]
        if ">" in words:
            words = words[:words.index(">")]
        if "|" in words:  # `luma rules list | check`: two commands of one group
            bar = words.index("|")
            out += [shlex.join(words[:bar]), shlex.join([*words[:bar - 1], *words[bar + 1:]])]
        else:
            out.append(shlex.join(words))
    return out


COMMANDS = readme_commands()
#: Files the commands name, relative to the checkout (the tests run them from elsewhere).
PATHS = r"\b(kb/examples/|kb/queries/|experiments/contracts/)"

#: The README commands that run torch: without the kernels extra, one line naming it.
NEEDS_KERNELS = {
    "kernels evaluate --model digits --bits 8,6,4,3,2", "kernels evaluate --model minilm --bits 8,4 --mode weight-only",
    "kernels bench", "kernels pareto --model minilm --out docs/figures/minilm-pareto", "kernels tune",
    "sprint run minilm-memory", "sprint run decoder-kv", "sprint bench minilm-memory",
    "sprint optimize minilm-memory --state 'compute=2 core'",
}
#: Commands whose README sizes take minutes: the extra-less run uses a small size instead.
SMALLER = {"kb bench --records 1000,10000,100000": "kb bench --records 100 --repeat 1",
           # (its default adds 1,000 chains five times: 30 s of ingest for a 100-chain bench)
           "rules bench --records 1000,10000": "rules bench --records 100 --incremental 50 --repeat 2 --rdflib-max 0"}
#: Commands that never use the project directory, and run for minutes: not run with a bad LUMA_HOME.
#: (`kernels tune` over every shape took 440 s on a 2-vCPU AVX2 host; tests/cli/test_kernels_cli.py
#: runs it on one small shape with a bad LUMA_HOME instead.)
NO_PROJECT_AND_SLOW = {"kb bench --records 1000,10000,100000", "rules bench --records 1000,10000", "kernels tune"}

#: A bad argument for every command ({bad} a malformed record, {ttl} broken Turtle, {rq} a query file, {tmp}).
BAD_ARGUMENT = {
    "kb init": "kb init --force",
    "kb ingest kb/examples/embedding-minilm.json kb/examples/digits-mlp.yaml": "kb ingest {bad}",
    "kb load kb/examples/spec-sheets.ttl --evidence-class vendor-claim": "kb load {ttl} --evidence-class vendor-claim",
    "rules run": "rules run --param min_repetitions=one",
    "kb query --name qualified-boundaries --limit 100": "kb query --name qualified-boundary --limit 100",
    "kb query --name qualified-boundaries --format csv": "kb query --name qualified-boundaries --format csv --limit -1",
    "kb query 'SELECT ?c WHERE { ?c a luma:BoundaryQualification }' --format json --limit 10 --offset 20":
        "kb query 'SELECT ?c WHERE { ?c a lum:BoundaryQualification }' --format json --limit 10 --offset 20",
    "kb query --file kb/queries/frontier-shifts.rq --format csv --timeout 10 --memory 1GiB":
        "kb query --file {rq} --format csv --timeout 10 --memory '1 gigabyte'",
    "--wait 120 kb ingest kb/examples/tiny-decoder.yaml": "--wait -1 kb ingest {bad}",
    "kb query --list": "kb query --list --format xml",
    "kb explain IRI": "kb explain id:chain/no-such-chain",
    "kb export --format nquads": "kb export --format rdfxml",
    "kb stats": "kb stats --format yaml",
    "kb rebuild": "kb rebuild everything",
    "kb schema": "kb schema --record-type chain",
    "kb bench --records 1000,10000,100000": "kb bench --records 1000,ten",
    "kb schema --record-type kernel-result": "kb schema --record-type kernel-results",
    "kernels evaluate --model digits --bits 8,6,4,3,2": "kernels evaluate --model digits --bits 8,6,1",
    "kernels evaluate --model minilm --bits 8,4 --mode weight-only":
        "kernels evaluate --model minilm --bits 8,4 --mode weights",
    "kernels bench": "kernels bench --threads 0",
    "kernels tune": "kernels tune --shapes 64",
    "kernels pareto --model minilm --out docs/figures/minilm-pareto": "kernels pareto --model minilm --bits 9 --out {tmp}/p",
    "rules list": "rules list --format xml",
    "rules check": "rules check all",
    "rules run --param min_workloads=4": "rules run --param min_workloads=four",
    "rules run --exploratory --param min_workloads=1": "rules run --exploratory --param min_workloads",
    "rules bench --records 1000,10000": "rules bench --records 1000,x",
    "sprint contracts": "sprint contracts --format csv",
    "sprint run matvec-memory": "sprint run matvec-memory --levels '8 MiB'",
    "sprint run minilm-memory": "sprint run minilm-memory --dimension gpu",
    "sprint run decoder-kv": "sprint run decoder-kv --repetitions 0",
    "sprint run experiments/contracts/digits-compute.toml --dimension compute --levels '1 core,2 core' "
    "--intervention int8-dynamic":
        "sprint run my.toml --dimension compute --levels '1 core,2 core' --intervention int8-dynamic",
    "sprint bench minilm-memory": "sprint bench minilm-memory --levels '64 MiB'",
    "sprint list": "sprint list --format xml",
    "sprint optimize minilm-memory --state 'compute=2 core'": "sprint optimize minilm-memory --state 'compute 2 core'",
    "model predict matvec-memory --state 'host_memory=6 MiB' --record":
        "model predict matvec-memory --state 'host_memory=6 parsecs' --record",
    "sprint plan matvec-memory --out matrix.json": "sprint plan matvec-memory --levels '8 MiB' --out matrix.json",
    "sprint run --matrix matrix.json": "sprint run --matrix {bad}",
    "kb query --name model-vs-pex": "kb query --name model-vs-pexx",
    "kb query --name stale-boundaries": "kb query --name stale-boundary",
    "sprint requalify --stale": "sprint requalify --stale 0000000000000000",
}


def test_the_commands_run_as_written_in_a_fresh_shell():
    """Issue 32: the venv is activated (or luma called by its path), LUMA_HOME is absolute (a
    later `cd` must not make a second project), and every file the commands name exists."""
    section = README.split("\n## Using it\n", 1)[1].split("\n#", 1)[0]
    lines = [ln.strip() for ln in section.splitlines() if ln.startswith("    ")]
    assert lines[0].startswith(". .venv/bin/activate")
    home = next(ln for ln in lines if ln.startswith("export LUMA_HOME="))
    assert shlex.split(home)[1].split("=", 1)[1].startswith("$PWD/")
    named = [w for cmd in COMMANDS for w in shlex.split(cmd) if re.search(r"\.(json|ya?ml|ttl|rq|toml|jsonl)$", w)
             and not w.startswith("-") and w not in ("matrix.json",)]
    assert named and all((ROOT / w).is_file() for w in named), [w for w in named if not (ROOT / w).is_file()]


def test_every_readme_command_is_covered():
    assert set(COMMANDS) == set(BAD_ARGUMENT), set(COMMANDS) ^ set(BAD_ARGUMENT)
    assert NEEDS_KERNELS <= set(COMMANDS) and set(SMALLER) <= set(COMMANDS)


def test_the_readme_says_which_commands_need_the_kernels_extra():
    said = " ".join(README.split("need the `kernels` extra", 1)[1].split("\n\n", 1)[0].split())
    for command in ("luma kernels", "luma sprint run", "luma sprint bench", "luma sprint optimize",
                    "luma model calibrate", "luma machine characterize", "pip install -e '.[kernels]'"):
        assert command in said, command


def _no_traceback(result_text: str, what: str) -> None:
    assert "Traceback" not in result_text, what


def _last_line_is_an_error(stderr: str, what: str) -> str:
    lines = stderr.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), (what, stderr)
    return lines[-1]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with one example chain in it, and the files the bad arguments name."""
    home = tmp_path_factory.mktemp("readme") / "project"
    runner = CliRunner()
    result = runner.invoke(cli, ["--home", str(home), "kb", "ingest", str(CHAIN)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return home


def _files(tmp: Path) -> dict:
    bad = tmp / "bad-record.json"
    bad.write_text(CHAIN.read_text().replace('"GiB"', '"GHz"'))  # a unit that does not fit its dimension
    ttl = tmp / "broken.ttl"
    ttl.write_text("@prefix ex: <urn:ex#> .\nex:a ex:b ")
    rq = tmp / "q.rq"
    rq.write_text("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    return {"bad": bad, "ttl": ttl, "rq": rq, "tmp": tmp}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_argument_is_one_line(command, project, tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_HOME", str(project))
    for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    files = _files(tmp_path)
    args = [str(files[w[1:-1]]) if w in ("{bad}", "{ttl}", "{rq}") else w.replace("{tmp}", str(tmp_path))
            for w in shlex.split(BAD_ARGUMENT[command])]
    stats = CliRunner().invoke(cli, ["kb", "stats", "--format", "json"], catch_exceptions=False)
    result = CliRunner().invoke(cli, args, catch_exceptions=False)  # a traceback fails the test
    assert result.exit_code in (1, 2), (args, result.exit_code, result.output)
    _no_traceback(result.output, command)
    line = _last_line_is_an_error(result.stderr, command)
    if result.exit_code == 1:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "\n" not in line
    after = CliRunner().invoke(cli, ["kb", "stats", "--format", "json"], catch_exceptions=False)
    assert json.loads(after.stdout) == json.loads(stats.stdout)  # bad input changes nothing


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in NO_PROJECT_AND_SLOW])
def test_a_bad_luma_home_is_one_line(command, tmp_path, monkeypatch):
    from luma.cli.project import NONE

    home = tmp_path / "not-a-directory"
    home.write_text("LUMA_HOME names this file by mistake")
    monkeypatch.setenv("LUMA_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    args = shlex.split(command)
    leaf = cli
    for word in args:  # the command the words name (option values skipped)
        if isinstance(leaf, click.Group) and word in leaf.commands:
            leaf = leaf.commands[word]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    _no_traceback(result.output, command)
    if leaf.callback.luma_project == NONE:
        assert result.exit_code == 0, (command, result.output)  # it never touches the project
        return
    if result.exit_code == 0:
        assert command == "kb query --list", command  # a reader that did not need the project
        return
    assert result.exit_code == 1, (command, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    placeholder = re.search(PATHS, command)
    if not placeholder:  # else the missing file may be named first: either is one line
        assert lines[0] == f"Error: LUMA_HOME: {home} is not a directory", lines[0]


@pytest.mark.slow
def test_without_the_kernels_extra(luma_without_kernels, project, tmp_path):
    """Each README command as after `pip install -e .`: the commands that run torch name the
    extra; the others run (the benches at a small size)."""
    import shutil

    home = tmp_path / "project"
    shutil.copytree(project, home)
    for command in COMMANDS:
        args = shlex.split(SMALLER.get(command, command))
        proc = luma_without_kernels(args, home, cwd=tmp_path)
        _no_traceback(proc.stderr, command)
        if command in NEEDS_KERNELS:
            assert proc.returncode == 1, (command, proc.stderr)
            assert proc.stderr == (f"Error: luma {args[0]} {args[1]} needs the kernels extra (torch is not "
                                   "installed): pip install -e '.[kernels]'\n"), proc.stderr
        elif proc.returncode != 0:  # a placeholder file of the README that is not here
            assert re.search(PATHS + r"|IRI", command), (command, proc.stderr)
            _last_line_is_an_error(proc.stderr, command)
