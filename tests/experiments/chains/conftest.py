"""Fixtures of the chain-assembly tests: a project with a trusted runner key and a helper that
ingests hand-made pex-trial records of the matvec-memory contract (signed when measured), as
`luma import` or a sprint would have left them in the ledger."""

from __future__ import annotations

import pytest

from luma.experiments.sprint import contract as contracts
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.settings import Settings
from tests.conftest import consistent_trials

CONTRACT = contracts.load("matvec-memory").record_contract()
WORKLOAD = {"name": "matvec-4096x256", "model": "dense-4096x256-seed0", "task": "matvec"}
LAB = {"name": "Lab EPYC 9654", "kind": "cpu", "vendor": "AMD"}
#: What a PASS of every clause looks like (a sprint's observations: intervals, sample counts).
PASSING = consistent_trials({"repetitions": 1, "contract": CONTRACT, "recovered": True})[0]["observations"]


def trial(mib, verdict, variant="fp32", *, compute=1, evidence="measured", sprint="lab-import-1",
          architecture=LAB, contract=CONTRACT) -> dict:
    """A pex-trial record at host_memory `mib` MiB and `compute` cores. PASS observes every clause
    inside; FAIL is an out-of-memory crash; INCONCLUSIVE has too few requests behind its p95."""
    doc = {"record_type": "pex-trial", "evidence_class": evidence, "sprint": sprint, "sequence": 0,
           "phase": "boundary" if variant == "fp32" else "intervention", "workload": WORKLOAD,
           "architecture": architecture, "contract": contract,
           "state": {"dimensions": {"compute": {"value": compute, "unit": "core"},
                                    "host_memory": {"value": mib, "unit": "MiB"}}},
           "variant": variant, "verdict": verdict, "provenance": {"tool": "vllm bench serve", "host": "lab-3"}}
    if verdict == "PASS":
        doc["observations"] = PASSING
    elif verdict == "FAIL":
        doc["failure_cause"] = "oom"
    else:
        doc["observations"] = [o if o["metric"] != "completed_requests" else {**o, "value": 10} for o in PASSING]
    return doc


def reps(n, *args, **kw) -> list[dict]:
    """`n` repetitions of `trial(*args)` (each its own record: the sequence differs)."""
    return [{**trial(*args, **kw), "sequence": i} for i in range(n)]


def complete(**kw) -> list[dict]:
    """A boundary an importer could have left: PASS x3 at 8 and 12 MiB, FAIL at 6 and 4 MiB, the
    int8-weights intervention PASS x3 at 6 MiB."""
    return (reps(3, 12, "PASS", **kw) + reps(3, 8, "PASS", **kw) + reps(2, 6, "FAIL", **kw) + reps(1, 4, "FAIL", **kw)
            + reps(3, 6, "PASS", "int8-weights", **kw))


@pytest.fixture
def settings(luma_home, runner_key) -> Settings:
    """The project at LUMA_HOME, whose runner key `runner_key` is trusted and signs by default."""
    return Settings.from_env(home=luma_home)


@pytest.fixture
def put(settings, runner_key):
    """`put(docs) -> [content hash]`: ingest trial records, measured ones signed by `runner_key`."""
    def ingest(docs: list[dict]) -> list[str]:
        recs = [validate_document(d, f"trial {i}", settings.home) for i, d in enumerate(docs)]
        recs = [runner_key.attest(r) if r.evidence_class == "measured" else r for r in recs]
        with KnowledgeBase.open(settings) as kb:
            kb.ingest_records(recs, submitter="test")
        return [r.content_hash for r in recs]

    return ingest
