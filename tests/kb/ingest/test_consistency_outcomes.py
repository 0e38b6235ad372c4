"""Ingest checks a measured chain's outcomes (issue 16) against its trials
(`luma.kb.ingest.consistency_outcomes`): diagnosis verdicts, co-binding, frontier shift, next binding and
decision. The chains are what the real sprint logic writes (tests/experiments/sprint/fake_sprint.py);
each case edits one field and must be refused with one line naming it, and the CLI leaves the
ledger and KB as they were."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RecordError
from luma.kb.ingest.consistency import check_measured
from luma.kb.records.loader import validate_document
from tests.experiments.sprint.fake_sprint import chain_of, run_sprint


@pytest.fixture
def co_bound(monkeypatch, tmp_path) -> dict:
    """A chain whose restorations of host_memory and compute both recover PASS."""
    return chain_of(run_sprint(monkeypatch, tmp_path, cores=4, cores_rescue=True))


@pytest.fixture
def single(monkeypatch, tmp_path) -> dict:
    """A chain bound by host_memory alone (restoring compute FAILs)."""
    return chain_of(run_sprint(monkeypatch, tmp_path, cores=4, cores_rescue=False))


def _refused(doc: dict) -> RecordError:
    with pytest.raises(RecordError) as info:
        check_measured(validate_document(doc, "r.json"))
    assert "\n" not in info.value.one_line()
    return info.value


def _row(doc: dict, dim: str, part: str = "diagnosis") -> dict:
    rows = doc[part] if part == "diagnosis" else doc["next_binding"]["diagnosis"]
    return next(r for r in rows if r["dimension"] == dim)


def test_the_sprints_outcomes_pass(co_bound, single):
    for doc in (co_bound, single):
        check_measured(validate_document(doc, "r.json"))


def test_a_restoration_verdict_must_be_its_trials(single):
    doc = copy.deepcopy(single)
    _row(doc, "compute")["verdict"] = "INCONCLUSIVE"
    exc = _refused(doc)
    assert exc.field == "diagnosis[1].verdict" and "its trials give FAIL" in exc.message


def test_a_restoration_trial_is_re_judged(single):
    doc = copy.deepcopy(single)
    _row(doc, "compute")["trials"][0]["verdict"] = "PASS"  # an oom FAIL cannot PASS
    assert _refused(doc).field.startswith("diagnosis[1].trials[0]")


def test_a_co_binding_dimension_needs_a_pass_restoration(single):
    exc = _refused({**single, "co_binding": ["compute"]})
    assert exc.field == "co_binding[0]" and "no PASS restoration" in exc.message


def test_a_recovering_restoration_left_out_of_co_binding_is_refused(co_bound):
    exc = _refused({**co_bound, "co_binding": []})
    assert exc.field == "co_binding" and "'compute'" in exc.message


def test_a_tested_restoration_without_trials_is_refused(single):
    doc = copy.deepcopy(single)
    _row(doc, "compute")["trials"] = []
    assert _refused(doc).field == "diagnosis[1].trials"


def test_frontier_before_must_be_the_pass_level(single):
    doc = copy.deepcopy(single)
    doc["frontier_shift"]["before"] = {"value": 12, "unit": "MiB"}
    assert _refused(doc).field == "frontier_shift.before"


def test_frontier_after_must_rest_on_measured_trials(single):
    doc = copy.deepcopy(single)
    after = doc["frontier_shift"]
    after["trials"] = [t for t in after["trials"] if t["state"] != "after"]
    exc = _refused(doc)
    assert exc.field == "frontier_shift.after" and "neither the FAIL level" in exc.message


def test_frontier_changes_must_be_after_minus_before(single):
    doc = copy.deepcopy(single)
    doc["frontier_shift"]["absolute_change"] = 4 * 2**20  # the sign flipped
    assert _refused(doc).field == "frontier_shift.absolute_change"


def test_a_frontier_shift_needs_a_recovery(single):
    doc = copy.deepcopy(single)
    i = max(i for i, t in enumerate(doc["trials"]) if t["state"] == "recovered")
    doc["trials"][i] = {**doc["trials"][i], "verdict": "FAIL", "failure_cause": "oom", "observations": []}
    doc.update(recovered=False, next_binding=None, decision=doc["decision"][:1])
    assert _refused(doc).field == "frontier_shift"


def test_no_next_binding_only_when_the_shift_is_below_the_range(single):
    doc = copy.deepcopy(single)
    doc["next_binding"] = {"resource": None, "note": "nothing binds"}
    assert _refused(doc).field == "next_binding.resource"


def test_the_decision_must_be_the_measured_minimum_state(single):
    doc = copy.deepcopy(single)
    doc["decision"][1]["state"] = doc["pass_state"]  # the intervention's, at the baseline's level
    exc = _refused(doc)
    assert exc.field == "decision[1].state" and "re-qualified minimum PASS" in exc.message
    doc["decision"][1]["software"] = {**doc["software"], "variant": "int4"}
    assert _refused(doc).field == "decision[1].software"


def test_a_not_tested_restoration_gives_a_reason():
    with pytest.raises(RecordError) as info:
        validate_document({**json.loads((Path(__file__).parents[1] / "data" / "full_chain.json").read_text()),
                           "diagnosis": [{"dimension": "kv_cache", "verdict": "not-tested"}]}, "r.json")
    assert "not-tested restoration gives a reason" in info.value.one_line()


def test_the_cli_refuses_a_bad_outcome_and_writes_nothing(single, luma_home, tmp_path):
    def luma(*args):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    assert luma("runner", "keygen", "--name", "lab-a").exit_code == 0
    doc = copy.deepcopy(single)
    _row(doc, "compute")["verdict"] = "PASS"
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(doc))
    assert luma("runner", "sign", path).exit_code == 0
    before = luma("kb", "export", "--format", "nquads").stdout
    result = luma("kb", "ingest", path)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "diagnosis[1].verdict: verdict PASS but its trials give FAIL" in result.stderr
    assert luma("kb", "export", "--format", "nquads").stdout == before
