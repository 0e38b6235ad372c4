"""Names from files stay inside the project (luma/names.py): a contract, campaign, pilot run or
runner key name that could reach outside `$LUMA_HOME` is refused, in one line naming the file and
field, before anything is written; a path built from a name is checked again where it is used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma import names
from luma.cli.main import cli
from luma.errors import ConfigError

HOSTILE = ["../../x", "/abs", "a/b", "..", "", "a" * 500, ".hidden", "-option", "a..b", "a b", "x\n", "é"]
CONTRACT = ('name = {name}\nservice = "matvec"\n[[clauses]]\nmetric = "quality"\nop = ">="\nvalue = 0.9\n'
            'unit = "dimensionless"\n')


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("name", ["matvec-memory", "A.b_c-9", "a" * 64, "v1.2"])
def test_good_names_pass(name):
    assert names.check_name(name) == name and names.problem(name) is None


@pytest.mark.parametrize("name", HOSTILE + [None, 7, "a" * 65])
def test_hostile_names_are_refused_naming_file_and_field(name):
    with pytest.raises(ConfigError) as err:
        names.check_name(name, source="c.toml", field="name")
    assert err.value.source == "c.toml" and err.value.field == "name"
    assert len(err.value.one_line()) < 300  # a 500-character name is not echoed whole


def test_an_id_may_be_longer_than_a_name():
    assert names.check_name("a" * 150, longest=names.MAX_ID)
    with pytest.raises(ConfigError):
        names.check_name("a" * 201, longest=names.MAX_ID)


def test_inside_refuses_what_resolves_outside_or_to_the_home_itself(tmp_path):
    home = tmp_path / "home"
    (home / "sprints").mkdir(parents=True)
    assert names.inside(home, home / "sprints" / "s1") == home / "sprints" / "s1"
    for path in (home / "sprints" / ".." / ".." / "x", Path("/etc/passwd"), home, home / "sprints" / "..",
                 tmp_path / "home-sibling"):
        with pytest.raises(ConfigError, match="not inside the project"):
            names.inside(home, path, field="sprint")


def test_a_symbolic_link_inside_the_project_that_points_out_is_refused(tmp_path):
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "sprints").symlink_to(outside)
    with pytest.raises(ConfigError, match="not inside the project"):
        names.child(home, home / "sprints", "s1")
    linked = tmp_path / "linked-home"  # the home itself may be a link: resolved too
    linked.symlink_to(home)
    assert names.child(linked, linked / "runs", "r1") == linked / "runs" / "r1"


@pytest.mark.parametrize("name", ["../../x", "/abs", "a/b", "..", "", "a" * 500])
def test_sprint_run_refuses_a_contract_name_that_leaves_the_project(tmp_path, monkeypatch, name):
    home = tmp_path / "a" / "b" / "home"  # made by the command, removed again when it fails
    monkeypatch.setenv("LUMA_HOME", str(home))
    path = tmp_path / "c.toml"
    path.write_text(CONTRACT.format(name=json.dumps(name)))
    before, root_before = _tree(tmp_path), set(os.listdir("/"))
    result = CliRunner().invoke(cli, ["sprint", "run", str(path), "--dimension", "host_memory",
                                      "--levels", "1 MiB,2 MiB"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and f"{path}: name:" in lines[0], result.stderr
    assert _tree(tmp_path) == before and set(os.listdir("/")) == root_before


def test_a_dumped_contract_is_checked_too():
    """A sprint folder's contract_spec (`luma sprint requalify`) and a campaign unit's contract
    (re-read on the runner node) go through the same model."""
    from luma.experiments.sprint import contract

    spec = contract.load("matvec-memory").model_dump(mode="json")
    with pytest.raises(ValueError, match="a name is"):
        contract.Contract.model_validate({**spec, "name": "../../x"})


def test_the_recorder_refuses_a_sprint_id_that_leaves_the_project(tmp_path):
    from luma.experiments.sprint import contract, pex as sprint
    from luma.experiments.sprint.records import Recorder
    from luma.settings import Settings

    plan = sprint.plan(contract.load("matvec-memory"))
    project = Settings.local(tmp_path / "home")
    for sprint_id in ("../../x", "/abs", "a/b", ".."):
        with pytest.raises(ConfigError):
            Recorder(project, plan, sprint_id)
    assert _tree(tmp_path) == set()


@pytest.mark.parametrize("name", ["a..b", "../k"])
def test_runner_keygen_refuses_a_key_name_that_is_no_file_name(luma_home, name):
    result = CliRunner().invoke(cli, ["runner", "keygen", "--name", name])
    assert result.exit_code in (1, 2) and not (luma_home / "keys").exists()


def test_pilot_resume_refuses_a_run_outside_the_project(luma_home, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "run.json").write_text("{}")
    result = CliRunner().invoke(cli, ["pilot", "run", "--resume", "../../x"])
    assert result.exit_code == 1 and "resume" in result.stderr and "a name is" in result.stderr, result.output
    assert _tree(tmp_path / "x") == {"run.json"}
