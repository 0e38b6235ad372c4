"""The Resource Boundary Report states the chain's outcomes as the KB holds them (issue 16): the
diagnosis table (co-binding and not-tested rows included), the frontier shift, the next binding
and the deployment decision come from the chain record's facts, not from re-reading the sprint's
trials, so a chain ingested from a file (no sprint trials in the KB) reports them too."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import ID
from luma.reports import boundary
from luma.reports import boundary_data as data
from luma.settings import Settings
from tests.experiments.sprint.fake_sprint import chain_of, run_sprint


def _report_of(doc: dict, runner_key, evidence, tmp_path):
    path = evidence.write_signed(runner_key, tmp_path / "chain.json", doc)
    with KnowledgeBase.open(Settings.from_env()) as kb:
        [added] = kb.ingest([path]).added
    assert CliRunner().invoke(cli, ["rules", "run"], catch_exceptions=False).exit_code == 0
    with KnowledgeBase.open(Settings.from_env()) as kb:
        f = data.gather(kb, ID + "chain/" + added.content_hash[:32])
    assert not f.sprint_trials  # only the chain record: nothing to reconstruct the steps from
    a = boundary.analyse(f)
    return f, a


@pytest.fixture
def co_bound(monkeypatch, tmp_path) -> dict:
    return chain_of(run_sprint(monkeypatch, tmp_path / "cache", cores=4, cores_rescue=True,
                               state={"compute": "1 core", "kv_cache": "64 MiB"}))


@pytest.mark.slow
def test_the_report_reads_diagnosis_frontier_next_binding_and_decision_from_the_facts(
        co_bound, luma_home, runner_key, evidence, tmp_path):
    f, a = _report_of(co_bound, runner_key, evidence, tmp_path)
    rows = {r[0]: r for r in a.diagnosis}
    assert rows["compute"][1:4] == ["4 cores", "PASS", "-"] and rows["compute"][4] == "1 trial in the chain record"
    assert rows["kv_cache"][2] == "not tested" and "does not use kv_cache" in rows["kv_cache"][3]
    text = boundary._binding_text(f, a)
    assert "**co-binding** boundary, bound by host_memory and compute" in text and "Not tested" in text
    assert boundary._shift(a) == "8 MiB → 4 MiB (−4 MiB, ×0.50)"
    assert a.next_binding == "host_memory" and a.decided
    decision = boundary.decision(f, a)
    assert "host_memory ≥ 4 MiB" in decision and "Below that, host_memory binds again" in decision
    report = boundary._report(f, a)
    assert dict(report.facts)["Binding resource"] == "host_memory (co-binding: compute)"
