"""luma.experiments.sprint.records.Recorder: a trial record is made once (issue 29, item 5) —
validated once, signed, written, and ingested as the validated record, through one knowledge
base the recording sprint holds from start to end — and what that means beside it: readers see
every record committed so far, another writer is told who holds the KB, and a sprint that fails
lets go of it."""

from __future__ import annotations

import pytest

from luma.errors import StoreBusy
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex, states
from luma.experiments.sprint.run import run_sprint
from luma.experiments.sprint.trial import Trial, judge
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import iter_records
from luma.kb.records.pex_trial import PexTrial
from luma.settings import Settings
from tests.experiments.sprint.fake_sprint import TELEMETRY, FakeService


def _fake_trials(monkeypatch, during=None) -> None:
    """Trials of the fake service (verdict by host memory); `during(state)` runs inside each."""
    monkeypatch.setattr(states, "usable_cpus", lambda: [0])
    service = FakeService(cores_rescue=False)
    monkeypatch.setattr(pex, "for_contract", lambda contract: service)

    def fake_trial(contract, state, artifact, variant, phase, **kw):
        if during is not None:
            during(state)
        telemetry = TELEMETRY[service.verdict(state, variant)]
        verdict, cause, rows = judge(contract, telemetry)
        return Trial(state, variant, phase, verdict, cause, rows, telemetry, 80)

    monkeypatch.setattr(pex, "run_trial", fake_trial)


def _counting(monkeypatch, cls, name: str, calls: list, key=lambda *a, **k: True) -> None:
    """Count calls of the classmethod `cls.name` (those `key` picks) in `calls`."""
    original = getattr(cls, name).__func__

    def counted(klass, *args, **kwargs):
        if key(*args, **kwargs):
            calls.append(args)
        return original(klass, *args, **kwargs)

    monkeypatch.setattr(cls, name, classmethod(counted))


def _plan():
    return pex.plan(contract_mod.load("matvec-memory"))


def test_each_record_is_validated_once_and_the_sprint_opens_the_kb_once(monkeypatch, luma_home, runner_key):
    _fake_trials(monkeypatch)
    settings = Settings.from_env(home=luma_home)
    validations, opens = [], []
    # Every way a trial document is validated (the loader, the signer, ingest) comes to this.
    _counting(monkeypatch, PexTrial, "model_validate", validations)
    _counting(monkeypatch, KnowledgeBase, "open", opens)

    run = run_sprint(_plan(), settings, record=True, sprint_id="once")

    trials = sorted(run.folder.glob("trial-*.json"))
    assert len(trials) == run.summary["physical_trials"] > 3 and run.chain is not None
    assert len(validations) == len(trials)  # one validation per trial record, not two
    assert len(opens) == 1  # one knowledge base for the sprint, not one per record
    assert run.summary["chain_recorded"] is True


def test_the_ledger_keeps_what_ingesting_the_written_files_would(monkeypatch, luma_home, runner_key):
    """Same rows as `kb.ingest(files)` made before: each names its file, and its content hash and
    payload are those of the file as written (signature included)."""
    _fake_trials(monkeypatch)
    settings = Settings.from_env(home=luma_home)
    run = run_sprint(_plan(), settings, record=True, sprint_id="same-rows")

    files = sorted(run.folder.glob("trial-*.json")) + [run.folder / "chain.json"]
    from_files = {r.content_hash: r for r in iter_records(files, luma_home)}
    with KnowledgeBase.open(settings, read_only=True) as kb:
        rows = {e.content_hash: e for e in kb.ledger.after(0) if e.kind in ("pex-trial", "pex-chain")}
        stats = kb.stats()
    assert set(rows) == set(from_files) and len(rows) == len(files)
    for h, rec in from_files.items():
        assert (rows[h].source, rows[h].payload, rows[h].kind) == (rec.source, rec.payload, rec.kind)
        assert rows[h].evidence_class == "measured" and rows[h].submitter == "luma sprint"
    assert stats["record_graphs"] == stats["ledger_records"] == len(files) + 1  # and the runner's trust


def test_a_reader_beside_a_recording_sprint_sees_every_trial_recorded_so_far(monkeypatch, luma_home, runner_key):
    settings = Settings.from_env(home=luma_home)
    seen = []

    def read_beside(state):
        # Another command reading now (`luma kb query`, `luma kb stats`): the sprint holds the
        # KB, so the reader reads its snapshot -- of the records committed so far.
        with KnowledgeBase.open(settings, read_only=True) as kb:
            assert kb.snapshot_writer is not None
            seen.append((kb.stats()["record_graphs"], kb.ledger.last_id()))

    _fake_trials(monkeypatch, during=read_beside)
    run_sprint(_plan(), settings, record=True, sprint_id="beside")
    assert len(seen) > 3
    assert all(graphs == rows for graphs, rows in seen)  # the store as far as the ledger, not the sprint's start
    assert [rows for _, rows in seen] == list(range(seen[0][1], seen[0][1] + len(seen)))


def test_another_writer_beside_a_recording_sprint_is_told_who_holds_the_kb(monkeypatch, luma_home, runner_key):
    settings = Settings.from_env(home=luma_home)
    refused = []

    def write_beside(state):
        with pytest.raises(StoreBusy) as info:
            KnowledgeBase.open(settings)
        refused.append(info.value.one_line())

    _fake_trials(monkeypatch, during=write_beside)
    run_sprint(_plan(), settings, record=True, sprint_id="writer-beside")
    assert refused and "in use by pid" in refused[0]
    KnowledgeBase.open(settings).close()  # and once the sprint ends, the next writer goes through


def test_a_sprint_that_fails_lets_go_of_the_kb_and_keeps_its_records(monkeypatch, luma_home, runner_key):
    settings = Settings.from_env(home=luma_home)
    count = []

    def fail_at_the_fourth(state):
        count.append(state)
        if len(count) == 4:
            raise RuntimeError("the machine went away")

    _fake_trials(monkeypatch, during=fail_at_the_fourth)
    with pytest.raises(RuntimeError, match="went away"):
        run_sprint(_plan(), settings, record=True, sprint_id="fails")
    with KnowledgeBase.open(settings) as kb:  # not held any more: a writer opens at once
        assert kb.ledger.count_by()[("pex-trial", "measured")] == 3


def test_without_record_nothing_opens_the_kb(monkeypatch, luma_home, runner_key):
    _fake_trials(monkeypatch)
    opens, validations = [], []
    _counting(monkeypatch, KnowledgeBase, "open", opens)
    _counting(monkeypatch, PexTrial, "model_validate", validations)
    run = run_sprint(_plan(), Settings.from_env(home=luma_home), record=False, sprint_id="no-record")
    assert opens == [] and len(validations) == len(list(run.folder.glob("trial-*.json")))  # signed: validated once


def test_a_failed_trial_carries_its_failure_message_signed_and_in_the_kb(monkeypatch, luma_home, runner_key):
    """Issue 32: the runner's error (a launch's `Unable to allocate 59.6 MiB`) travels in the signed
    trial record, one line and bounded, not only in the unsigned sprint.json."""
    import json

    from luma.kb.records.pex_trial import MESSAGE_CHARS
    from luma.kb.vocab import LUMA
    from tests.experiments.sprint import fake_sprint

    error = ("the server exited with code 1 before it was ready:\n  MemoryError: Unable to allocate 59.6 MiB"
             + " for an array" * 40)
    monkeypatch.setitem(fake_sprint.TELEMETRY, "FAIL", {"failure_cause": "launch", "error": error, "wall_s": 0.5})
    _fake_trials(monkeypatch)
    settings = Settings.from_env(home=luma_home)
    run = run_sprint(_plan(), settings, record=True, sprint_id="messages")

    docs = [json.loads(p.read_text()) for p in sorted(run.folder.glob("trial-*.json"))]
    failed = [d for d in docs if d["verdict"] == "FAIL"]
    assert failed and all("failure_message" not in d for d in docs if d["verdict"] == "PASS")
    message = failed[0]["failure_message"]
    assert message.startswith("the server exited with code 1 before it was ready: MemoryError: Unable to "
                              "allocate 59.6 MiB for an array")
    assert "\n" not in message and len(message) == MESSAGE_CHARS and message.endswith("…")
    assert failed[0]["attestation"]  # signed over the message too: ingest took it as measured
    with KnowledgeBase.open(settings, read_only=True) as kb:
        assert kb.ledger.count_by()[("pex-trial", "measured")] == len(docs)
        said = kb.store.select(f"SELECT ?m WHERE {{ ?t <{LUMA}failureMessage> ?m }}")
    assert sorted(r["m"] for r in said) == sorted(d["failure_message"] for d in failed)
