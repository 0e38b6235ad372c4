"""A sprint whose physical trials are replaced by a fake service: the sprint logic (`Sprint.run`,
its diagnosis, `chain_record`) is the real one; each trial's verdict is a function of the state,
judged by the sprint's own judge on made-up telemetry. Used by tests/experiments and tests/kb."""

from __future__ import annotations

from datetime import datetime, timezone

from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex as sprint_mod
from luma.experiments.sprint import states
from luma.experiments.sprint.records import chain_record
from luma.experiments.sprint.trial import Trial, judge

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


def run_sprint(monkeypatch, tmp_path, *, cores: int, cores_rescue: bool, state: dict | None = None):
    monkeypatch.setattr(states, "usable_cpus", lambda: list(range(cores)))
    contract = contract_mod.load("matvec-memory")
    if state is not None:
        contract = contract.model_copy(update={"state": state})
    plan = sprint_mod.plan(contract)
    service = FakeService(cores_rescue)

    def fake_trial(contract, state, artifact, variant, phase, *, seed=0, max_retries=2, threads=None,
                   service_spec=None):
        wanted = service.verdict(state, variant)
        verdict, cause, rows = judge(contract, TELEMETRY[wanted])
        return Trial(state, variant, phase, verdict, cause, rows, TELEMETRY[wanted], 80)

    monkeypatch.setattr(sprint_mod, "run_trial", fake_trial)
    s = sprint_mod.Sprint(plan, tmp_path)
    s.service = service
    return s.run()


def chain_of(result) -> dict:
    return chain_record(result, datetime.now(timezone.utc))
