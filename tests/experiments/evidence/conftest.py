"""Fixtures of the shipped evidence set's tests: a copy of the set to tamper with, a project to load it into."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from luma.experiments.evidence import shipped
from luma.settings import Settings


@pytest.fixture
def evidence_copy(tmp_path) -> Path:
    """A copy of the shipped evidence folder (manifest, keys, records) that a test may edit."""
    root, out = shipped.default_root(), tmp_path / "evidence"
    out.mkdir()
    shutil.copy(root / "manifest.json", out / "manifest.json")
    for sub in ("keys", "records"):
        shutil.copytree(root / sub, out / sub)
    return out


@pytest.fixture
def project(luma_home) -> Settings:
    """The settings of an empty project (nothing written yet)."""
    return Settings.from_env(home=luma_home)
