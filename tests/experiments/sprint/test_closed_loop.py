"""The closed loop's runner side (issue 16 items 3 and 4): `luma sprint optimize` keeps the
contract's load and records a result ingest accepts; `luma sprint requalify` proposes an optimize
run after a hardware change; and, end to end on this machine, an optimize whose best
configuration differs makes the sprint's boundary stale until `requalify --stale` measures it
again."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint import optimize
from luma.experiments.sprint.states import State
from luma.experiments.sprint.trial import Trial
from luma.kb.ingest.consistency import check_measured
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.rules.engine import Engine
from luma.settings import Settings

RESULT = json.loads((Path(__file__).parents[2] / "kb" / "data" / "optimize_result.json").read_text())


def _fake_trials(monkeypatch, seen: list):
    """run_trial replaced by one that records the load it was given and PASSes, faster with a
    bigger batch (so the walk goes on), slower once the batch would exceed the clients."""
    def fake(contract, state, artifact, variant, phase, *, threads=None, replicas=None, seed=0, max_retries=2):
        load = contract.load
        seen.append((load.concurrency, load.max_batch, load.mode))
        rate = 100.0 * min(load.max_batch, load.concurrency) + (7 if variant == "fp32" else 0)
        obs = {"throughput": rate, "quality": 1.0, "p95_latency": [0.001] * 200}
        return Trial(state, variant, phase, "PASS", None,
                     [{"metric": "p95_latency", "value": 0.001, "ci_low": 0.0009, "ci_high": 0.0011, "samples": 200,
                       "verdict": "PASS"}], obs, 200)
    monkeypatch.setattr(optimize, "run_trial", fake)


def test_optimize_keeps_the_contracts_concurrency_and_its_record_is_consistent(monkeypatch, tmp_path):
    seen: list = []
    _fake_trials(monkeypatch, seen)
    c = contracts.load("matvec-memory")
    state = State.of({"compute": contracts.Level(value=1, unit="core")})
    out = optimize.run(c, state, tmp_path, batches=(1, 2, 4, 8, 16, 32))
    # every trial at the contract's load (4 closed-loop clients); batches over 4 never fill, not tried
    assert {(n, mode) for n, _, mode in seen} == {(c.load.concurrency, "closed")}
    assert max(b for _, b, _ in seen) == c.load.concurrency
    body = optimize.result(c, state, out, {"python": "3.11.9", "numpy": "2.1.0"})
    assert body["best"]["settings"] == {"max_batch": 4} and body["best"]["variant"] == "fp32"
    doc = {"record_type": "optimize-result", "evidence_class": "measured", "sprint": "s1",
           "workload": {"name": "w", "model": "m", "task": "t"}, "architecture": {"name": "cpu", "kind": "cpu",
                                                                                 "vendor": "AMD"},
           "contract": c.record_contract(), "state": state.record(), **body, "provenance": {"tool": "luma sprint"}}
    check_measured(validate_document(doc, "optimize"))  # the runner's result is what ingest recomputes


def _ingest_optimum(home: Path, doc: dict, runner_key, tmp_path: Path) -> None:
    from tests.conftest import write_signed

    path = write_signed(runner_key, tmp_path / "optimum.json", doc)
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        kb.ingest([path], submitter="t")
        Engine(kb).run()


def test_requalify_proposes_an_optimize_after_a_hardware_change(luma_home, runner_key, tmp_path):
    from luma.experiments.sprint.stale import proposed_optimizations

    _ingest_optimum(luma_home, RESULT, runner_key, tmp_path)
    env = copy.deepcopy(RESULT["provenance"]["environment"])
    arch = RESULT["architecture"]
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        assert proposed_optimizations(kb, arch, env) == []  # same hardware: nothing to propose
        grown = proposed_optimizations(kb, arch, {**env, "logical_cpus": 8})
        moved = proposed_optimizations(kb, {**arch, "name": "Intel Xeon 8480"}, env)
    assert [p["reason"] for p in grown] == ["this machine's logical_cpus changed since"]
    assert grown[0]["contract"] == "matvec-memory" and grown[0]["state"] == "compute=1 core"
    assert "measured on AMD EPYC 9B14, this machine is Intel Xeon 8480" in moved[0]["reason"]


def _luma(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def _stale(luma_home) -> list[dict]:
    return json.loads(_luma("kb", "query", "--name", "stale-boundaries", "--format", "json").stdout)["results"]["bindings"]


@pytest.mark.slow
def test_optimize_makes_the_boundary_stale_and_requalify_measures_it_again(luma_home):
    # A real sprint (~10 s), then an optimize whose best configuration differs: its batch is at
    # most the contract's 4 clients, the sprint ran with the contract's max_batch 8.
    sprint = json.loads(_luma("sprint", "run", "matvec-memory", "--format", "json").stdout)
    assert sprint["chain_recorded"], sprint["problems"]
    _luma("rules", "run")
    assert _stale(luma_home) == []
    best = json.loads(_luma("sprint", "optimize", "matvec-memory", "--batches", "1,4", "--format", "json").stdout)
    assert best["result_recorded"] and best["best"] is not None
    _luma("rules", "run")
    rows = _stale(luma_home)
    assert len(rows) == 1 and rows[0]["reason"]["value"] == "optimum-changed"
    assert rows[0]["settings"]["value"] == "max_batch=8" and rows[0]["newerSettings"]["value"] != "max_batch=8"
    listed = _luma("sprint", "requalify", "--format", "json")
    out = json.loads(listed.stdout)
    assert out["trial_budget"] == 0 and len(out["stale"]) == 1  # without --stale: listed, nothing run

    again = _luma("sprint", "requalify", "--stale", "--format", "json")
    out = json.loads(again.stdout)
    assert out["trial_budget"] > 0 and len(out["sprints"]) == 1 and out["sprints"][0]["chain_recorded"]
    assert out["still_stale"] == [] and _stale(luma_home) == []
    assert 0 <= again.stderr.index("trial budget: at most") < again.stderr.index("->")  # before any trial
