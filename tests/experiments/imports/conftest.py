"""Fixtures of the importers' tests: a writable copy of the shipped MLPerf sample."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from luma.experiments.imports import mlperf_results


@pytest.fixture
def mlperf_copy(tmp_path) -> Path:
    """The shipped MLPerf v4.1 sample, copied where a test may change it."""
    dest = tmp_path / "inference_results_v4.1"
    shutil.copytree(mlperf_results.sample_path(), dest)
    return dest
