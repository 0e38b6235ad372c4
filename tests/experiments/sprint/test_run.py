"""luma.experiments.sprint.run: the recorded sprint a program, `luma sprint run` and a fleet node
all call — its summary, its records' folder and its chain, without click."""

from __future__ import annotations

import json

from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex, states
from luma.experiments.sprint.run import SprintRun, run_sprint, sprint_trials
from luma.experiments.sprint.trial import Trial, judge
from luma.settings import Settings
from tests.experiments.sprint.fake_sprint import TELEMETRY, FakeService


def test_a_recorded_sprint_without_ingest_writes_its_records_and_summary(monkeypatch, tmp_path):
    monkeypatch.setattr(states, "usable_cpus", lambda: [0])
    service = FakeService(cores_rescue=False)
    monkeypatch.setattr(pex, "for_contract", lambda contract: service)

    def fake_trial(contract, state, artifact, variant, phase, **kw):
        verdict, cause, rows = judge(contract, TELEMETRY[service.verdict(state, variant)])
        return Trial(state, variant, phase, verdict, cause, rows, TELEMETRY[service.verdict(state, variant)], 80)

    monkeypatch.setattr(pex, "run_trial", fake_trial)
    settings = Settings.from_env(environ={}, home=tmp_path / "home")
    plan = pex.plan(contract_mod.load("matvec-memory"))
    steps: list[str] = []
    run = run_sprint(plan, settings, record=False, progress=steps.append, sprint_id="test-sprint")
    assert isinstance(run, SprintRun) and run.folder.name == "test-sprint"
    assert run.summary["min_pass"] and run.summary["binding"] == "host_memory"
    assert run.summary["chain_recorded"] is False  # written, not ingested
    assert run.summary["records_folder"] == str(run.folder)
    assert run.summary["physical_trials"] <= sprint_trials(plan)
    assert run.chain is not None and json.loads((run.folder / "chain.json").read_text()) == run.chain
    assert any("->" in s for s in steps)
