"""The head's side of a sprint without a cluster: the files a runner sends back are ingested all
at once when they are signed by a key the head trusts and bear out their verdicts, and refused
whole otherwise -- an untrusted key, a tampered figure, a file name that is not a record's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from luma.errors import ConfigError, LumaError
from luma.experiments.fleet import campaign
from luma.experiments.fleet.head import Head, done_units

LUMA = str(Path(sys.executable).parent / "luma")
pytestmark = pytest.mark.slow  # the runner's sprint takes ~7 s


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """A runner machine's project: its own key, one matvec sprint measured and signed there."""
    home = tmp_path_factory.mktemp("runner")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUMA_")}
    env["LUMA_HOME"] = str(home)
    subprocess.run([LUMA, "runner", "keygen", "--name", "lab-b-01"], env=env, check=True, capture_output=True)
    subprocess.run([LUMA, "sprint", "run", "matvec-memory", "--no-record", "--format", "json"], env=env, check=True,
                   capture_output=True)
    folder = next((home / "sprints").iterdir())
    return home, {p.name: p.read_text() for p in folder.glob("*.json")}


def _head(luma_home, tmp_path) -> tuple[Head, campaign.Unit]:
    from luma.settings import Settings

    path = tmp_path / "c.toml"
    path.write_text('name = "one"\ntrial_budget = 100\n[[contracts]]\ncontract = "matvec-memory"\n'
                    '[architectures.b]\nlabels = { "lab" = "b" }\n')
    c = campaign.load(path)
    return Head(c, Settings.from_env(), "127.0.0.1:1"), c.units[0]


def _ledger_count(home: Path) -> int:
    import sqlite3

    if not (home / "ledger.sqlite").is_file():
        return 0
    with sqlite3.connect(home / "ledger.sqlite") as db:
        return db.execute("select count(*) from ledger_record where kind like 'pex-%'").fetchone()[0]


def _trust(runner_home: Path) -> None:
    from click.testing import CliRunner

    from luma.cli.main import cli

    pub = next((runner_home / "keys").glob("*.pub"))
    assert CliRunner().invoke(cli, ["runner", "trust", str(pub), "--name", "lab-b-01"]).exit_code == 0


def test_a_trusted_runners_sprint_is_taken_in_whole(runner, luma_home, tmp_path):
    home, files = runner
    _trust(home)
    head, unit = _head(luma_home, tmp_path)
    n = head._take_in(unit, {"files": files})
    assert n == len(files) - 1 == _ledger_count(luma_home)  # every record but sprint.json
    assert done_units(head.settings, head.campaign) == {unit.key}


def test_an_untrusted_runners_sprint_is_refused_whole(runner, luma_home, tmp_path):
    head, unit = _head(luma_home, tmp_path)
    with pytest.raises(LumaError, match="not trusted|no runner key|trust"):
        head._take_in(unit, {"files": runner[1]})
    assert _ledger_count(luma_home) == 0 and done_units(head.settings, head.campaign) == set()


def test_a_tampered_figure_refuses_the_sprint(runner, luma_home, tmp_path):
    home, files = runner
    _trust(home)
    doc = json.loads(files["trial-000.json"])
    obs = doc["observations"][0]
    obs["value"] = obs["value"] * 0.5 if isinstance(obs["value"], (int, float)) and obs["value"] else 1.0
    head, unit = _head(luma_home, tmp_path)
    with pytest.raises(LumaError, match="signature|attestation|content"):
        head._take_in(unit, {"files": {**files, "trial-000.json": json.dumps(doc)}})
    assert _ledger_count(luma_home) == 0


@pytest.mark.parametrize("name", ["../../evil.json", "chain.json.sh", "notes.txt"])
def test_a_file_that_is_no_record_is_refused(runner, luma_home, tmp_path, name):
    head, unit = _head(luma_home, tmp_path)
    with pytest.raises(ConfigError, match="unexpected files"):
        head._take_in(unit, {"files": {**runner[1], name: "{}"}})
    assert not (luma_home / "evil.json").exists() and _ledger_count(luma_home) == 0
