"""Tables written to a file or a pipe keep every cell whole (issue 32, first hour): without a
terminal rich assumed 80 columns and folded `trial` into `tria/l`, `luma sprint contracts` into one
word per line and `luma kb bench` cut `1,000` to `1,0…`. COLUMNS, when set, is still honoured."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from luma.cli.bench_report import print_bench
from luma.cli.main import cli
from luma.experiments.sprint import contract


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def _clauses() -> list[str]:
    return ["; ".join(f"{x.metric} {x.op} {x.value:g} {x.unit}" for x in contract.load(p).clauses)
            for p in contract.shipped().values()]


def test_a_table_to_a_pipe_keeps_every_cell_on_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"LUMA_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-m", "luma.cli.main", "sprint", "contracts"], env=env, text=True,
                         stdout=subprocess.PIPE, check=True).stdout
    for text in _clauses():
        assert text in out  # whole, on one row
    assert max(len(line) for line in out.splitlines()) > 80


def test_columns_is_still_honoured(tmp_path):
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "sprint", "contracts"], env={"COLUMNS": "90"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 90


def test_bench_figures_are_never_cut(capsys):
    row = {"records": 1000, "measured": 1000, "quads": 123456, "ingest_s": 1.5, "ungated_ingest_s": 1.2,
           "gate_overhead": 0.25, "records_per_s": 666.0, "quads_per_s": 82304.0, "raw_bulk_load_s": 0.4,
           "ratio_vs_raw": 3.75, "peak_rss_mb": 512.0, "phases_s": {"validate": 0.5, "ledger": 0.3, "store": 0.7},
           "queries": {"capabilities": {"rows": 12, "min_s": 0.001, "median_s": 0.002}},
           "rdflib": {"queries": {"capabilities": {"s": 0.01}}, "load_s": 2.0, "peak_rss_mb": 300.0}}
    print_bench([row])
    out = capsys.readouterr().out
    assert "…" not in out
    for text in ("1,000", "123,456", "validate 0.5, ledger 0.3, store 0.7", "without the gate s", "rdflib ms"):
        assert text in out


def test_progress_lines_in_a_log_are_never_folded(capsys):
    # `luma pilot run 2> log` folded each window's line at 80 columns ("… batch 8" / "p95 15 ms
    # PASS" on the next line): progress and messages on stderr now use the same consoles.
    from luma.cli.output import console

    line = "  hindsight-best  window   1/30    35.7/s  " + "1 core · 512 MiB · fp32 · batch 8".ljust(40) + " p95   15 ms  PASS"
    console(stderr=True).print(line)
    assert capsys.readouterr().err.rstrip("\n") == line


def test_every_console_of_the_cli_is_made_by_output_console():
    from pathlib import Path

    import luma.cli

    root = Path(luma.cli.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "output.py" and "Console(" in p.read_text()]
    assert offenders == []
