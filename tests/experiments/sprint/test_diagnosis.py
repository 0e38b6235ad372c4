"""Real diagnosis (issue 16, item 2): the sprint restores each candidate dimension at the FAIL
state and records every one that recovers (co-binding when more than one does), and says
"not-tested" with a reason for a dimension it cannot restore. The sprint logic is the real one
(`Sprint.run`, `_diagnose`, `chain_record`); only the physical trial is replaced by a fake
service whose verdict is a function of the state, judged by the sprint's own judge."""

from __future__ import annotations

import pytest

from luma.kb.ingest.consistency import check_measured
from luma.kb.records.loader import validate_document
from tests.experiments.sprint.fake_sprint import MiB, chain_of
from tests.experiments.sprint.fake_sprint import run_sprint as _sprint


def _checked(result) -> dict:
    chain = chain_of(result)
    check_measured(validate_document(chain, "chain.json"))  # what ingest asks of it
    return chain


def test_two_restorations_that_recover_make_a_co_binding_chain(monkeypatch, tmp_path):
    result = _sprint(monkeypatch, tmp_path, cores=4, cores_rescue=True)
    chain = _checked(result)
    rows = {r["dimension"]: r for r in chain["diagnosis"]}
    assert chain["binding_resource"] == "host_memory" and chain["co_binding"] == ["compute"]
    assert rows["host_memory"]["verdict"] == "PASS"  # the minimum PASS state itself
    assert rows["compute"]["verdict"] == "PASS" and rows["compute"]["restored_level"] == {"value": 4, "unit": "core"}
    assert [t["state"] for t in rows["compute"]["trials"]] == ["diagnosis"]


def test_a_single_binding_has_no_co_binding_and_records_the_failed_restoration(monkeypatch, tmp_path):
    chain = _checked(_sprint(monkeypatch, tmp_path, cores=4, cores_rescue=False))
    rows = {r["dimension"]: r for r in chain["diagnosis"]}
    assert chain["co_binding"] == [] and rows["compute"]["verdict"] == "FAIL"
    shift = chain["frontier_shift"]
    assert (shift["before"], shift["after"]) == ({"value": 8, "unit": "MiB"}, {"value": 4, "unit": "MiB"})
    assert shift["absolute_change"] == -4 * MiB and shift["relative_change"] == pytest.approx(-0.5)
    assert chain["next_binding"]["resource"] == "host_memory"
    assert [d["state"]["dimensions"]["host_memory"] for d in chain["decision"]] == [
        {"value": 8, "unit": "MiB"}, {"value": 4, "unit": "MiB"}]


def test_a_dimension_that_cannot_be_restored_here_says_not_tested(monkeypatch, tmp_path):
    # One usable core: compute is already at this host's full level; kv_cache is in the state
    # but the matvec service has none, so restoring it would test nothing.
    result = _sprint(monkeypatch, tmp_path, cores=1, cores_rescue=True,
                     state={"compute": "1 core", "kv_cache": "64 MiB"})
    chain = _checked(result)
    rows = {r["dimension"]: r for r in chain["diagnosis"]}
    assert rows["compute"]["verdict"] == "not-tested" and "full level" in rows["compute"]["reason"]
    assert rows["kv_cache"]["verdict"] == "not-tested" and "does not use kv_cache" in rows["kv_cache"]["reason"]
    assert "trials" not in rows["compute"] and chain["co_binding"] == []
    assert not [t for t in result.trials if t.phase == "diagnosis"]  # nothing ran for them
