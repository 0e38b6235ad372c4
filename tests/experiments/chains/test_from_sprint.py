"""A chain assembled from a sprint's own trial records has the sprint's boundary: the same states,
crossed dimension, binding and co-binding resources, intervention, recovery and repetitions, and
the same trials in the same roles (the sprint's physical trials faked, its records real)."""

from __future__ import annotations

from luma.experiments.chains.assemble import AssembleConfig, assemble_chain
from luma.experiments.chains.selection import Selection
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex, states
from luma.experiments.sprint.run import run_sprint
from luma.experiments.sprint.trial import Trial, judge
from tests.experiments.sprint.fake_sprint import TELEMETRY, FakeService

FACTS = ("evidence_class", "workload", "architecture", "contract", "pass_state", "fail_state", "crossed_dimension",
         "binding_resource", "co_binding", "recovered", "repetitions")


def test_a_chain_from_a_sprints_trial_records_has_the_sprints_boundary(monkeypatch, settings, tmp_path):
    monkeypatch.setattr(states, "usable_cpus", lambda: [0, 1])
    service = FakeService(cores_rescue=True)  # a second core also recovers PASS: co-binding
    monkeypatch.setattr(pex, "for_contract", lambda contract: service)

    def fake_trial(contract, state, artifact, variant, phase, **kw):
        wanted = TELEMETRY[service.verdict(state, variant)]
        verdict, cause, rows = judge(contract, wanted)
        return Trial(state, variant, phase, verdict, cause, rows, wanted, 80)

    monkeypatch.setattr(pex, "run_trial", fake_trial)
    run = run_sprint(pex.plan(contract_mod.load("matvec-memory")), settings, sprint_id="lab-sprint")
    sprint = run.chain
    assert sprint is not None and sprint["co_binding"] == ["compute"]

    a = assemble_chain(settings, AssembleConfig(Selection(sprint="lab-sprint")), ingest=False,
                       out=tmp_path / "chain.json")
    assert a.missing == [] and a.notes == []
    assert {k: a.chain[k] for k in FACTS} == {k: sprint[k] for k in FACTS}
    assert a.chain["intervention"]["name"] == sprint["intervention"]["name"]
    roles = lambda chain: [(t["state"], t["verdict"], t.get("failure_cause")) for t in chain["trials"]]  # noqa: E731
    assert roles(a.chain) == roles(sprint)
    assert [(r["dimension"], r["verdict"]) for r in a.chain["diagnosis"]] == [
        (r["dimension"], r["verdict"]) for r in sprint["diagnosis"] if r["verdict"] != "not-tested"]
