"""The Resource Boundary Report calls a chain qualified exactly when the rules derived its
boundary, names the run (rule version and parameters) that did, and says when the rules have
not run: it never applies a threshold of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import NothingToReport
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import ID
from luma.reports import boundary
from luma.reports import boundary_data as data
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "kb" / "data"

from luma.rules.loader import load_all as _load_rules

#: The installed qualification rule's version (reports quote it).
QB = next(r.version for r in _load_rules() if r.id == "qualified-boundary")


def luma(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def chains(luma_home, runner_key, evidence, tmp_path) -> dict[int, str]:
    """Measured, signed, recovered chains with 3 and 4 repetitions: {repetitions: chain IRI}."""
    base = json.loads((DATA / "valid_chain.json").read_text())
    files = []
    for n in (3, 4):
        doc = evidence.with_trials({**base, "repetitions": n, "workload": {**base["workload"], "name": f"reps-{n}"}})
        files.append(evidence.write_signed(runner_key, tmp_path / f"reps-{n}.json", doc))
    with KnowledgeBase.open(Settings.from_env()) as kb:
        added = kb.ingest(files).added
    return {int(Path(r.source).stem.split("-")[1]): ID + "chain/" + r.content_hash[:32] for r in added}


def _verdict(chain: str) -> tuple[str, str, str]:
    """(the Qualification fact, the decision, the latest qualified chain or the reason there is none)."""
    with KnowledgeBase.open(Settings.from_env()) as kb:
        f = data.gather(kb, chain)
        a = boundary.analyse(f)
        try:
            latest = data.latest_qualified(kb)
        except NothingToReport as exc:
            latest = exc.message
    qualification = ("qualified" if not a.reasons else "not qualified: " + "; ".join(a.reasons)) + f" ({f.rule_status})"
    return qualification, boundary.decision(f, a), latest


@pytest.mark.slow
def test_the_report_follows_the_rules_run_and_its_parameters(chains):
    # Before the rules run, nothing is qualified and the report says what to run.
    q, decision, latest = _verdict(chains[4])
    assert "the rules have not run" in q and decision.startswith("No deployment decision")
    assert "no qualified chain" in latest and "luma rules run" in latest

    assert luma("rules", "run").exit_code == 0
    for n in (3, 4):
        q, decision, _ = _verdict(chains[n])
        assert q == f"qualified (derived by rule qualified-boundary v{QB} (min_repetitions=3))", q
        assert decision.startswith("Deploy")

    assert luma("rules", "run", "--param", "min_repetitions=4").exit_code == 0
    q, decision, latest = _verdict(chains[3])
    assert q.startswith("not qualified: 3 repetitions, fewer than the 4 of the rules' last run (min_repetitions)")
    assert q.endswith(f"(not derived by rule qualified-boundary v{QB} (min_repetitions=4))")
    assert decision.startswith("No deployment decision") and "Deploy " not in decision
    assert latest == chains[4]
    q, decision, _ = _verdict(chains[4])
    assert q == f"qualified (derived by rule qualified-boundary v{QB} (min_repetitions=4))" and decision.startswith("Deploy")

    assert luma("rules", "run", "--param", "min_repetitions=5").exit_code == 0
    _, _, latest = _verdict(chains[4])
    assert latest.startswith(f"no qualified chain in this KB: rule qualified-boundary v{QB} (min_repetitions=5) "
                             "qualified none of its chains")
