"""Real diagnosis (issue 16, item 2): the sprint restores each candidate dimension at the FAIL
state and records every one that recovers (co-binding when more than one does), and says
"not-tested" with a reason for a dimension it cannot restore. The sprint logic is the real one
(`Sprint.run`, `_diagnose`, `chain_record`); only the physical trial is replaced by a fake
service whose verdict is a function of the state, judged by the sprint's own judge."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from luma.experiments import contract as contract_mod
from luma.experiments import sprint as sprint_mod
from luma.experiments import states
from luma.experiments.records import chain_record
from luma.experiments.trial import Trial, judge
from luma.kb.consistency import check_measured
from luma.kb.records.loader import validate_document

MiB = 2**20
TELEMETRY = {"PASS": {"latency": [0.001] * 80, "quality": 1.0, "throughput": 5000.0, "completed": 80},
             "FAIL": {"failure_cause": "oom"}}


class FakeService:
    """Passes with enough host memory (8 MiB fp32, 4 MiB int8) — or, when `cores_rescue`, with
    more than one core at any memory (a second resource that also binds)."""

    interventions = {"int8-weights": "int8-weights"}

    def __init__(self, cores_rescue: bool):
        self.cores_rescue = cores_rescue

    def prepare(self, variant, cache):
        return cache / variant

    def workload(self):
        return {"name": "matvec", "model": "dense-4096x256", "task": "matvec"}

    def verdict(self, state, variant) -> str:
        levels = state.enforced()
        need = 8 * MiB if variant == "fp32" else 4 * MiB
        if levels["host_memory"] >= need or (self.cores_rescue and levels["compute"] > 1):
            return "PASS"
        return "FAIL"


def _sprint(monkeypatch, tmp_path, *, cores: int, cores_rescue: bool, state: dict | None = None):
    monkeypatch.setattr(states, "usable_cpus", lambda: list(range(cores)))
    contract = contract_mod.load("matvec-memory")
    if state is not None:
        contract = contract.model_copy(update={"state": state})
    plan = sprint_mod.plan(contract)
    service = FakeService(cores_rescue)

    def fake_trial(contract, state, artifact, variant, phase, *, seed=0, max_retries=2, threads=None):
        wanted = service.verdict(state, variant)
        verdict, cause, rows = judge(contract, TELEMETRY[wanted])
        return Trial(state, variant, phase, verdict, cause, rows, TELEMETRY[wanted], 80)

    monkeypatch.setattr(sprint_mod, "run_trial", fake_trial)
    s = sprint_mod.Sprint(plan, tmp_path)
    s.service = service
    return s.run()


def _checked(result) -> dict:
    chain = chain_record(result, datetime.now(timezone.utc))
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
