"""`luma report partner`: the Partner Evaluation Report of the shipped 2:1 KV codec on the shipped
KV-bound contract — the partner's stated figures, the projected frontier change after the
codec's own costs, and the frozen experiment matrix (also as matrix.json); Markdown and HTML
(opened in headless Chromium) hold every section, table and plot; a partner scope never shows
another partner's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
ARGS = ["--contract", "llm-long-context", "--space", "llm-70b",
        "--state", "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=2,precision=fp16"]


def _run(home: Path, *args):
    return CliRunner().invoke(cli, ["--home", str(home), *args])


@pytest.fixture
def rendered(tmp_path, monkeypatch):
    for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    assert _run(home, "partner", "add", str(RECORD)).exit_code == 0
    out = tmp_path / "report"
    result = _run(home, "report", "partner", "kvzip", *ARGS, "--out", str(out))
    assert result.exit_code == 0, result.output
    return home, out


def test_the_report_has_every_section_table_and_the_plot(rendered):
    _, out = rendered
    md = (out / "report.md").read_text()
    for heading in ("## The partner's record", "## Frontier change after the intervention's own costs",
                    "## Qualification plan: the frozen experiment matrix", "## Evidence"):
        assert heading in md
    assert "**Verdict: gain.**" in md and "(4.0 -> 2.0 accelerators)" in md
    assert "Model error on held-out published measurements" in md  # the projection states its error
    for caption in ("What the partner states (vendor claim)", "Baseline vs intervention configurations",
                    "Accepted-service metrics", "Candidate boundary"):
        assert caption in md
    assert (out / "plots" / "plot-frontier-change.svg").exists()
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["frozen"] and matrix["evidence_class"] == "projected"
    assert [c["name"] for c in matrix["configurations"]] == ["baseline", "intervention"]
    assert matrix["sha256"][:16] in md
    html = (out / "report.html").read_text()
    assert "<script" not in html and "<svg" in html


def test_chromium_sees_every_section_table_and_plot(rendered, tmp_path):
    from tests.reports.test_reports import _dom  # noqa: PLC0415 - the shared Chromium helper

    _, out = rendered
    dom = _dom(out / "report.html", tmp_path)
    assert {"record", "frontier", "matrix", "evidence"} <= dom.ids
    assert {"table-record", "table-frontier", "table-effects", "table-matrix", "table-accepted-service",
            "table-candidate-boundary"} <= dom.ids
    assert "plot-frontier-change" in dom.figures_with_svg
    assert dom.repeated == []


def test_a_partner_scope_refuses_another_partners_record(rendered, tmp_path):
    home, _ = rendered
    result = _run(home, "report", "partner", "kvzip", *ARGS, "--scope", "partner:memfabric",
                  "--out", str(tmp_path / "x"))
    assert result.exit_code == 1 and "not memfabric's" in result.output
    assert not (tmp_path / "x").exists()
