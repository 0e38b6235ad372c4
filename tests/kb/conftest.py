"""Fixtures of the kb tests: a seeded project copied per test, and a read-only query project (built
with the helpers of tests/kb/projects.py)."""

import shutil

import pytest

from luma.rules.engine import Engine
from tests.kb.projects import _build_project, open_kb, snapshot, use_home


@pytest.fixture(scope="module")
def seeded_template(tmp_path_factory, evidence):
    """A small closed project (valid chain + 20 synthetic), its snapshot and its runner key,
    copied per test."""
    home = tmp_path_factory.mktemp("seeded") / "home"
    key = _build_project(home, evidence, 20)
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        return home, snapshot(), key


@pytest.fixture
def seeded_key(seeded_template):
    """The runner key the seeded project (and every copy of it) trusts."""
    return seeded_template[2]


@pytest.fixture
def seeded(seeded_template, tmp_path, monkeypatch):
    """A fresh copy of the seeded project as LUMA_HOME; yields its snapshot before the test."""
    template, snap, _key = seeded_template
    home = tmp_path / "home"
    shutil.copytree(template, home)
    use_home(monkeypatch, home)
    return snap


@pytest.fixture(scope="module")
def query_home(tmp_path_factory, evidence):
    """A read-only project for the query tests: the valid chain and 200 synthetic chains
    (QUERY_CHAINS), and the trust record of the runner key that signed them; the rules run (the
    named queries read what they derive)."""
    home = tmp_path_factory.mktemp("query") / "home"
    _build_project(home, evidence, 200)
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        with open_kb() as kb:
            Engine(kb).run()
    return home


@pytest.fixture
def in_query_home(query_home, monkeypatch):
    return use_home(monkeypatch, query_home)
