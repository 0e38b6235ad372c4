"""`luma rules bench` needs qualified boundaries at scale, so it opts in (issue 28): its child makes
its own throwaway project, marks it (kb/records/synthetic.py) so that the synthetic chains are signed as
measured, and every result, and the table, says so."""

from __future__ import annotations

from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.records import synthetic
from luma.rules import engine_bench


def test_the_bench_project_is_marked_and_its_chains_qualify(tmp_path):
    out = engine_bench.child_luma(40, 0, tmp_path, dump=False, repeat=1)
    assert out["note"] == synthetic.BENCH_NOTE
    assert synthetic.is_bench_project(tmp_path / "project")
    assert out["full"]["qualified-boundary"]["facts"] > 0


def test_the_table_says_the_synthetic_chains_were_counted_as_measured(monkeypatch):
    monkeypatch.setattr(engine_bench, "run_bench",
                        lambda *a, **k: [{"records": 40, "error": "stub", "note": synthetic.BENCH_NOTE}])
    result = CliRunner().invoke(cli, ["rules", "bench", "--records", "40", "--rdflib-max", "0"])
    assert result.exit_code == 0, result.output
    assert result.output.count(synthetic.BENCH_NOTE) == 1
