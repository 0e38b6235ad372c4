"""An empty named query says why, from the KB's counts: which rule derived nothing, what it rests
on, the records it had by evidence class and the parameters it ran with — on stderr, so that
`--format json|csv` stays the answer alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import luma.kb.examples
from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.settings import Settings

CHAINS = sorted(Path(luma.kb.examples.__file__).parent.glob("*.json"))  # vendor-claim pex-chains


@pytest.fixture
def vendor_kb(luma_home):
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    assert runner.invoke(cli, ["kb", "ingest", *map(str, CHAINS)]).exit_code == 0
    assert runner.invoke(cli, ["rules", "run"]).exit_code == 0
    return runner


def test_an_empty_named_query_says_why_on_stderr(vendor_kb):
    out = vendor_kb.invoke(cli, ["kb", "query", "--name", "qualified-boundaries", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["results"]["bindings"] == []  # machine output untouched
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("note: no rows: rule qualified-boundary derived 0")
    assert f"from {len(CHAINS)} pex-chain record(s) ({len(CHAINS)} vendor-claim)" in out.stderr
    assert "only measured evidence counts" in out.stderr and "0 are measured" in out.stderr
    csv = vendor_kb.invoke(cli, ["kb", "query", "--name", "hardware-requirements", "--format", "csv"])
    assert csv.stdout.count("\n") == 1  # the header
    assert "rule hardware-requirement derived 0 HardwareRequirement; it rests on qualified-boundary" in csv.stderr


def test_a_query_of_records_names_the_records_it_had(vendor_kb):
    out = vendor_kb.invoke(cli, ["kb", "query", "--name", "pilot-rollbacks"])
    assert "note: no rows: 0 pilot-decision records in this KB" in out.stderr
    shifts = vendor_kb.invoke(cli, ["kb", "query", "--name", "frontier-shifts"])
    assert f"{len(CHAINS)} pex-chain record(s)" in shifts.stderr and "none with what this query reads" in shifts.stderr
    rows = vendor_kb.invoke(cli, ["kb", "query", "--name", "evidence-by-class"])
    assert rows.exit_code == 0 and "no rows" not in rows.stderr  # an answer with rows: no note


@pytest.mark.slow
def test_measured_chains_a_threshold_keeps_out_are_told_with_the_threshold(luma_home, runner_key, tmp_path):
    mark_bench_project(luma_home)  # the project's key signs measured synthetic chains here only
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 40, signer=runner_key)], submitter="t")
    runner = CliRunner()
    assert runner.invoke(cli, ["rules", "run", "--param", "min_repetitions=99"]).exit_code == 0
    out = runner.invoke(cli, ["kb", "query", "--name", "qualified-boundaries", "--format", "csv"])
    assert out.exit_code == 0 and "no rows" in out.stderr
    assert "0 are measured" not in out.stderr and "min_repetitions=99" in out.stderr
