"""The campaign head's folders (campaigns/ID/, sprints/SPRINT/ and its .incoming twin) stay inside
the project: a campaign file whose names could lead out is refused when it is loaded, and a head
handed such a name anyway (or a project whose sprints/ links out) refuses before it removes or
writes anything. No cluster needed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from luma.errors import ConfigError
from luma.experiments.fleet import campaign, head
from luma.settings import Settings

CAMPAIGN = ('name = "one"\ntrial_budget = 100\n[[contracts]]\ncontract = "{contract}"\n'
            '[architectures.b]\nlabels = {{ "lab" = "b" }}\n')


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return victim


def test_head_folders_are_inside_the_project(tmp_path):
    home = tmp_path / "home"
    assert head.folder(home, "one-0123abcd") == home / "campaigns" / "one-0123abcd"
    target, incoming = head.sprint_folder(home, "one-0123abcd--u")
    assert (target, incoming) == (home / "sprints" / "one-0123abcd--u", home / "sprints" / "one-0123abcd--u.incoming")
    for bad in ("../../victim", "/abs", "a/b", "..", "", "x" * 500):
        with pytest.raises(ConfigError):
            head.folder(home, bad)
        with pytest.raises(ConfigError):
            head.sprint_folder(home, bad)
    assert not home.exists()


def test_a_campaign_file_with_an_escaping_contract_name_is_refused(tmp_path):
    (tmp_path / "evil.toml").write_text('name = "../../victim"\nservice = "matvec"\n[[clauses]]\nmetric = "quality"\n'
                                        'op = ">="\nvalue = 0.9\nunit = "dimensionless"\n')
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(contract="evil.toml"))
    with pytest.raises(ConfigError) as err:
        campaign.load(path)
    assert err.value.field == "contracts[0].contract" and "a name is" in err.value.message


@pytest.mark.parametrize("edit", [('name = "one"', 'name = "a..b"'), ("architectures.b", 'architectures."a..b"')])
def test_campaign_and_class_names_are_file_names(tmp_path, edit):
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(contract="matvec-memory").replace(*edit))
    with pytest.raises(ConfigError, match="no '..'"):
        campaign.load(path)


def _forged(tmp_path: Path, contract_name: str, campaign_name: str = "one"):
    """A campaign as if a loader had let an escaping name through."""
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.format(contract="matvec-memory"))
    c = campaign.load(path)
    c.spec = c.spec.model_copy(update={"name": campaign_name})
    unit = c.units[0]
    forged = campaign.Unit(SimpleNamespace(name=contract_name), unit.dimension, unit.machine_class, unit.levels,
                           unit.repetitions, unit.intervention, unit.trial_seconds)
    return c, forged


def test_the_head_refuses_an_escaping_campaign_id_before_making_its_folder(tmp_path, luma_home):
    victim = _victim(tmp_path)
    c, _ = _forged(tmp_path, "matvec-memory", campaign_name="../../victim")
    with pytest.raises(ConfigError):
        head.Head(c, Settings.from_env(), "127.0.0.1:1")
    assert list(luma_home.iterdir()) == [] and [p.name for p in victim.iterdir()] == ["precious.txt"]


def test_the_head_refuses_an_escaping_unit_without_removing_anything(tmp_path, luma_home):
    victim = _victim(tmp_path)
    c, unit = _forged(tmp_path, "/../../../victim")
    h = head.Head(c, Settings.from_env(), "127.0.0.1:1")
    with pytest.raises(ConfigError):
        h._take_in(unit, {"files": {"chain.json": "{}"}})
    assert list(luma_home.iterdir()) == [] and [p.name for p in victim.iterdir()] == ["precious.txt"]


def test_the_head_does_not_follow_a_sprints_link_out_of_the_project(tmp_path, luma_home):
    victim = _victim(tmp_path)
    c, _ = _forged(tmp_path, "matvec-memory")
    unit = c.units[0]
    (victim / f"{unit.sprint_id(c.id)}").mkdir()  # what rmtree would have removed
    (luma_home / "sprints").symlink_to(victim)
    h = head.Head(c, Settings.from_env(), "127.0.0.1:1")
    with pytest.raises(ConfigError, match="not inside the project"):
        h._take_in(unit, {"files": {"chain.json": "{}"}})
    assert sorted(p.name for p in victim.iterdir()) == sorted(["precious.txt", unit.sprint_id(c.id)])
