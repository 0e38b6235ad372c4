"""The sprint's chain record satisfies what ingest checks of a measured chain
(`luma.kb.ingest.consistency`): recovered or not, with a contradicted FAIL level, and no chain at all
when the adjacent FAIL level never FAILed. Trials are judged by the sprint's own judge on
made-up telemetry (no subprocess)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex as sprint_mod
from luma.experiments.sprint.records import chain_record
from luma.experiments.sprint.search import Boundary
from luma.experiments.sprint.trial import Trial, judge
from luma.kb.ingest.consistency import check_measured
from luma.kb.records.loader import validate_document

PLAN = sprint_mod.plan(contract_mod.load("matvec-memory"))
PASS_AT, FAIL_AT = 5, 4  # 8 MiB, 6 MiB
TELEMETRY = {
    "PASS": {"latency": [0.001] * 80, "quality": 1.0, "throughput": 5000.0, "completed": 80},
    "INCONCLUSIVE": {"latency": [0.04] * 72 + [0.05] * 4 + [0.06] * 4, "quality": 1.0, "throughput": 90.0,
                     "completed": 80},
    "FAIL": {"failure_cause": "oom"},
}


def _trial(level: int, verdict: str, variant: str = "fp32", phase: str = "boundary") -> Trial:
    verdict_got, cause, rows = judge(PLAN.contract, TELEMETRY[verdict])
    assert verdict_got == verdict
    return Trial(PLAN.state(level), variant, phase, verdict, cause, rows, TELEMETRY[verdict], 80)


def _chain(fail_verdicts: list[str], recovery: list[str]) -> dict | None:
    boundary = [_trial(PASS_AT, "PASS") for _ in range(PLAN.repetitions)]
    boundary += [_trial(FAIL_AT, v) for v in fail_verdicts]
    result = sprint_mod.Result("s-1", PLAN, trials=boundary,
                               boundary=Boundary(len(PLAN.levels), PASS_AT, FAIL_AT),
                               diagnosis={"binding": "host_memory"},
                               recovery=[_trial(FAIL_AT, v, "int8", "intervention") for v in recovery])
    return chain_record(result, datetime.now(timezone.utc))


@pytest.mark.parametrize("fail_verdicts, recovery, recovered", [
    (["FAIL"], ["PASS"] * 3, True),
    (["FAIL"], ["PASS", "FAIL"], False),
    (["FAIL"], ["PASS", "PASS", "INCONCLUSIVE"], False),
    (["PASS", "FAIL"], ["PASS"] * 3, True),  # the search's contradiction: a PASS that did not reproduce
])
def test_the_sprints_chain_is_self_consistent(fail_verdicts, recovery, recovered):
    chain = _chain(fail_verdicts, recovery)
    assert chain["recovered"] is recovered and chain["repetitions"] == PLAN.repetitions
    check_measured(validate_document(chain, "chain.json"))


def test_no_chain_without_a_measured_adjacent_fail():
    assert _chain(["INCONCLUSIVE"], ["PASS"] * 3) is None


def test_the_sprints_chain_carries_the_contracts_concurrency():
    # The rules tell a KV cache that limits concurrency by it (rules/80-kv-concurrency.rq).
    chain = _chain(["FAIL"], ["PASS"] * 3)
    assert chain["contract"]["concurrency"] == PLAN.contract.load.concurrency
    assert validate_document(chain, "chain.json").model.contract.concurrency == PLAN.contract.load.concurrency
