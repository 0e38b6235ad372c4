"""Project data is private (luma/privacy.py): a project made by the CLI has no file or folder that
group or others may read, write or enter — the ledger, the RocksDB store, snapshots, locks,
sprint folders, partner records, keys — whatever the user's umask; `luma kb init` tightens an
older project and says so."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma import privacy
from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PARTNER = ROOT / "kb" / "examples" / "partner-cxl-expander.toml"


@pytest.fixture
def wide_umask():
    """The umask most users have (0022): what LUMA must not let through."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _open_to_others(home: Path) -> list[str]:
    found = []
    for path in [home, *home.rglob("*")]:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
            found.append(f"{path.relative_to(home)} {stat.S_IMODE(st.st_mode):04o}")
    return found


def _luma(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_a_fresh_project_is_owner_only(tmp_path, monkeypatch, wide_umask):
    home = tmp_path / "new" / "home"
    monkeypatch.setenv("LUMA_HOME", str(home))
    _luma("kb", "init")
    _luma("partner", "add", PARTNER)  # "Engineering samples under NDA"
    _luma("runner", "keygen", "--name", "lab-a")
    # A tiny real sprint: its folder, records, artifacts cache, the KB's new SST files.
    _luma("sprint", "run", "matvec-memory", "--levels", "4 MiB,8 MiB", "--repetitions", "1", "--format", "json")
    assert {p.name for p in home.iterdir()} >= {"ledger.sqlite", "kb", "kb.lock", "keys", "sprints"}
    assert any((home / "sprints").rglob("chain.json"))
    assert _open_to_others(home) == []
    assert stat.S_IMODE((home / "keys" / "lab-a.pub").stat().st_mode) == 0o600


def test_kb_init_tightens_an_older_project_and_says_so(tmp_path, monkeypatch, wide_umask):
    home = tmp_path / "home"
    monkeypatch.setenv("LUMA_HOME", str(home))
    _luma("kb", "init")
    _luma("partner", "add", PARTNER)
    outside = tmp_path / "shared.txt"  # a link in the project is not followed
    outside.write_text("x")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    for path in [home, *home.rglob("*")]:  # as LUMA made it before, or a copy with wide modes
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    wide = len(_open_to_others(home))
    out = _luma("kb", "init").stdout
    # Opening the KB may replace a few of its files (new ones are private already).
    said = re.search(r"tightened (\d+) file\(s\)/folder\(s\) to owner-only", out)
    assert said and 1 <= int(said.group(1)) <= wide, out
    assert _open_to_others(home) == []
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert "tightened" not in _luma("kb", "init").stdout  # nothing left to do: nothing said


def test_tighten_keeps_the_owners_bits_and_counts(tmp_path):
    (tmp_path / "d").mkdir(mode=0o775)
    (tmp_path / "d").chmod(0o775)
    (tmp_path / "d" / "run.sh").write_text("")
    (tmp_path / "d" / "run.sh").chmod(0o755)
    (tmp_path / "private").write_text("")
    (tmp_path / "private").chmod(0o600)
    tmp_path.chmod(0o700)
    done = privacy.tighten(tmp_path)
    assert done.changed == 2 and done.failed == 0 and "tightened 2" in done.describe()
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "d" / "run.sh").stat().st_mode) == 0o700
    assert privacy.tighten(tmp_path).describe() is None
    assert privacy.tighten(tmp_path / "missing").changed == 0


def test_the_private_umask_keeps_stricter_bits():
    old = os.umask(0o277)
    try:
        privacy.private_umask()
        assert os.umask(0o022) == 0o277
        privacy.private_umask()
        assert os.umask(0o022) == 0o077
    finally:
        os.umask(old)


def test_make_private_makes_the_home_0700(tmp_path, wide_umask):
    home = privacy.make_private(tmp_path / "a" / "home")
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.parent.stat().st_mode) == 0o700
