"""The Design-In Report's "Published third-party results (vendor-claim)" section
(reports/design_in_published.py): the imported MLPerf results, apart from measured evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from luma.experiments.imports import mlperf_results
from luma.experiments.model import mlperf_calibrate
from luma.reports import design_in_published as published
from luma.reports.render import Report, render_html, render_markdown
from luma.settings import Settings

pytest.importorskip("matplotlib")


@pytest.fixture
def imported(luma_home) -> Settings:
    settings = Settings.from_env()
    mlperf_results.ingest(settings, mlperf_results.read_results(mlperf_results.sample_path()))
    return settings


def _md(section) -> str:
    return render_markdown(Report("design-in", "Design-In Report", "test", [], [section]))


def test_the_section_lists_every_imported_result(imported):
    sec = published.section(imported, limit=100)
    assert sec.title == "Published third-party results (vendor-claim)"
    table = sec.blocks[0]
    assert table.columns[:6] == ["system", "accelerator", "count", "benchmark", "scenario", "throughput"]
    assert len(table.rows) == len(mlperf_results.read_results(mlperf_results.sample_path()).trials)
    md = _md(sec)
    assert "## Published third-party results (vendor-claim)" in md
    assert "nvidia-b200-sxm-180gb" in md and "amd-instinct-mi300x" in md and "v4.1" in md
    assert "p99_ttft <= 2000 ms" in md and "never count as measured" in md
    assert "Published third-party results" in render_html(Report("design-in", "D", "t", [], [sec]))


def test_rows_are_capped_with_a_note(imported):
    sec = published.section(imported, limit=3)
    assert len(sec.blocks[0].rows) == 3 and "more not shown" in sec.blocks[0].note


def test_the_calibration_error_is_stated_when_it_was_run(imported):
    cal = {"pooled": {"n": 14, "median": 0.1, "p90": 0.3, "max": 0.4, "bias": -0.1}, "submitters": ["A", "B"],
           "figures": 14}
    path = Path(imported.home) / mlperf_calibrate.FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal))
    assert "each submitter held out in turn" in _md(published.section(imported, limit=100))


def test_nothing_imported_says_so(luma_home):
    sec = published.section(Settings.from_env(), limit=10)
    assert not sec.blocks and "luma import mlperf-results" in sec.empty
