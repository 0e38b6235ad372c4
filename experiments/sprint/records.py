"""A sprint's evidence: a pex-trial record per trial (ingested the moment it is judged) and a
PEX-chain record for the boundary (ingested once, at the end, all or nothing).

Files live under `$LUMA_HOME/sprints/<sprint id>/` (the artifact the records cite): one JSON
file per trial, `chain.json`, and `sprint.json` (the full result, telemetry included). Every
record is signed with the project's runner key (kb/operations/runner_keys.py), made on first use.
"""

from __future__ import annotations

import json
import socket
from dataclasses import replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from luma import names
from luma.experiments.endpoint.launch import engine_version
from luma.experiments.endpoint.spec import EndpointSpec
from luma.experiments.services import for_contract, get
from luma.experiments.sprint import optimize
from luma.experiments.sprint.pex import Plan, Result
from luma.experiments.sprint.software import artifact_hash, software_config
from luma.experiments.sprint.trial import Trial
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import project_signer
from luma.kb.records.loader import validate_document
from luma.kb.records.pex_trial import failure_message
from luma.experiments.host import architecture, describe, git_revision
from luma.kernels.evidence import environment_block

TOOL = "luma sprint"


def environment() -> dict:
    """CPU model and ISA, library versions (the benchmark standard's environment block). Threads
    are left out: they belong to each trial's telemetry, not to the host."""
    return environment_block(describe(), exclude=("torch_threads",))


def provenance(started: datetime) -> dict:
    out = {"tool": TOOL, "host": socket.gethostname() or "unknown", "environment": environment(),
           "started": started.replace(microsecond=0).isoformat()}
    rev = git_revision()
    if rev:
        out["git_revision"] = rev
    return out


@lru_cache(maxsize=8)
def _engine_version(spec_json: str) -> str | None:
    return engine_version(EndpointSpec.model_validate_json(spec_json))


def engine(contract, variant: str, artifact, command: list[str] | None = None) -> dict | None:
    """The provenance's `engine` block of an endpoint service's trial (None for the others):
    engine name and version, the exact launch command, and the served model's hash or name."""
    ep = contract.endpoint
    if ep is None:
        return None
    out = {"name": ep.engine}
    version = _engine_version(ep.model_dump_json())
    if version:
        out["version"] = version
    if command:
        out["command"] = [str(c) for c in command]

    digest = artifact_hash(Path(str(artifact))) if artifact is not None else None
    if digest:
        out["artifact"] = digest
    else:
        out["model"] = ep.variants[variant].model or str(artifact)
    return out


def trial_record(plan: Plan, sprint_id: str, trial: Trial, started: datetime, artifact=None) -> dict:
    prov = provenance(started)
    eng = engine(plan.contract, trial.variant, artifact, trial.telemetry.get("engine_command"))
    if eng:
        prov["engine"] = eng
    rec = {
        "record_type": "pex-trial", "evidence_class": "measured", "sprint": sprint_id, "sequence": trial.index,
        "phase": trial.phase, "workload": for_contract(plan.contract).workload(), "architecture": architecture(),
        "contract": plan.contract.record_contract(), "state": trial.state.record(), "variant": trial.variant,
        "verdict": trial.verdict, "attempts": trial.attempts, "observations": trial.observations(),
        "provenance": prov,
    }
    if trial.cause:
        rec["failure_cause"] = trial.cause
    if trial.cause and (message := failure_message(trial.telemetry.get("error"))):
        rec["failure_message"] = message  # the runner's words travel signed, not only in sprint.json
    return rec


def chain_repetitions(passes: int, recoveries: int, recovered: bool) -> int:
    """A chain's `repetitions`: the trials at the minimum PASS state, and at the recovered state
    too when the intervention recovered (ingest checks both hold at least that many PASS trials);
    at least 1. A sprint's chain and one assembled from trial records (experiments/chains) count
    alike, so both qualify under the same `min_repetitions`."""
    return max(1, min(passes, recoveries) if recovered else passes)


def chain_record(result: Result, started: datetime) -> dict | None:
    """The PEX chain of a sprint that found a boundary and tried an intervention; None otherwise.
    A chain whose recovery failed is still written (recovered: false) — it is evidence too. The
    chain satisfies what ingest checks of a measured chain (`luma.kb.ingest.consistency`): so a sprint
    whose adjacent FAIL level never FAILed (only INCONCLUSIVE) writes no chain, and neither does a
    sprint that stopped for a contended host, whatever phase it had reached: its trials are
    recorded, but a chain would claim outcomes (the recovery's repetitions, the next binding) that
    the stop left unmeasured."""
    p, b = result.plan, result.boundary
    if (b is None or not b.found or not p.intervention or not result.recovery or not result.diagnosis
            or result.contended):
        return None
    pass_state, fail_state = p.state(b.min_pass), p.state(b.adjacent_fail)
    trials, counters = [], {}

    def add(t: Trial, role: str) -> None:
        counters[role] = counters.get(role, 0) + 1
        row = {"state": role, "repetition": counters[role], "verdict": t.verdict, "observations": t.observations()}
        if t.cause:
            row["failure_cause"] = t.cause
        trials.append(row)

    for t in result.trials:
        if t.variant == p.baseline and t.phase == "boundary" and t.state == pass_state:
            add(t, "pass")
    for t in result.trials:
        if t.variant == p.baseline and t.phase == "boundary" and t.state == fail_state:
            add(t, "fail")
    for t in result.recovery:
        add(t, "recovered")
    if not any(row["state"] == "fail" and row["verdict"] == "FAIL" for row in trials):
        return None  # no measured adjacent FAIL: not a boundary (the sprint reports the problem)
    reps = chain_repetitions(counters.get("pass", 0), counters.get("recovered", 0), result.recovered)
    prov = provenance(started)
    env = prov.get("environment", {})

    def software(variant: str) -> dict:
        return software_config(p.contract, variant, result.artifacts.get(variant), env)

    eng = engine(p.contract, p.baseline, result.artifacts.get(p.baseline))
    if eng:
        prov["engine"] = eng
    chain = {
        "record_type": "pex-chain", "evidence_class": "measured", "workload": for_contract(p.contract).workload(),
        "architecture": architecture(), "contract": p.contract.record_contract(),
        "pass_state": pass_state.record(), "fail_state": fail_state.record(), "crossed_dimension": p.dimension,
        "binding_resource": result.binding() or p.dimension,
        "intervention": {"name": p.intervention, "kind": "software", "software": software(p.variant)},
        "recovered": result.recovered, "repetitions": reps, "trials": trials, "provenance": prov,
        "software": software(p.baseline),
    }
    chain.update(outcomes(result, software))
    return chain


def _row(t: Trial, role: str, repetition: int = 1) -> dict:
    row = {"state": role, "repetition": repetition, "verdict": t.verdict, "observations": t.observations()}
    if t.cause:
        row["failure_cause"] = t.cause
    return row


def _restorations(result: Result, diagnosis: dict) -> list[dict]:
    """The record's `diagnosis` rows from a sprint's `_diagnose` result."""
    out = []
    for r in diagnosis.get("restorations", []):
        row = {"dimension": r["dimension"], "restored_level": r["restored_to"].model_dump(exclude_none=True),
               "verdict": r["verdict"]}
        if r["verdict"] == "not-tested":
            row["reason"] = r["reason"]
        elif "trial" in r:
            row["trials"] = [_row(result.trials[r["trial"]], "diagnosis")]
        out.append(row)
    return out


def outcomes(result: Result, software) -> dict:
    """The chain outcomes (issue 16): diagnosis table, co-binding resources, frontier shift, next
    binding and deployment decision, each with the trials it rests on. `software(variant)`: the
    record's software block of a variant."""
    p, b, q = result.plan, result.boundary, result.requalified
    rows = _restorations(result, result.diagnosis)
    out = {"diagnosis": rows, "co_binding": list(result.diagnosis.get("also_recovering", []))} if rows else {}
    decision = [{"software": software(p.baseline), "state": p.state(b.min_pass).record()}]
    if result.recovered and q is not None and q.min_pass is not None and result.frontier:
        fr = result.frontier
        shown, counters = [], {}
        for t in result.trials:
            if t.variant != p.variant or t.phase != "requalify":
                continue
            role = ("after" if t.state == p.state(q.min_pass) else
                    "below" if q.adjacent_fail is not None and t.state == p.state(q.adjacent_fail) else None)
            if role:
                counters[role] = counters.get(role, 0) + 1
                shown.append(_row(t, role, counters[role]))
        shift = {"dimension": p.dimension, "before": fr["before"].model_dump(exclude_none=True),
                 "after": fr["after"].model_dump(exclude_none=True), "below_range": fr["below_range"]}
        if "absolute_change" in fr:
            shift.update(absolute_change=fr["absolute_change"], relative_change=fr["relative_change"], unit=fr["unit"])
        if shown:
            shift["trials"] = shown
        out["frontier_shift"] = shift
        nb = result.next_binding
        out["next_binding"] = {"resource": nb.get("binding"), "co_binding": list(nb.get("also_recovering", [])),
                               "note": nb.get("note"), "diagnosis": _restorations(result, nb)}
        decision.append({"software": software(p.variant), "state": p.state(q.min_pass).record()})
    out["decision"] = decision
    return out


class Recorder:
    """Writes and ingests a sprint's records as they happen (`project`: the Settings of the LUMA
    project). Use it as a context manager: a recording sprint holds one knowledge base from its
    start to its end.

    A record is made once: built, validated (the typed model), signed, written to its file (the
    artifact the record cites) and ingested as that validated record, through every gate of
    `kb.ingest` but the re-reading of the file (KnowledgeBase.ingest_records; the ledger names the
    file). The KB is opened once, when the sprint starts, and held until it ends: on the embedded
    store a recording sprint is a writer for its whole duration, like any command that writes.
    Another writer beside it fails at once naming the sprint, or waits with `--wait`; readers
    (`luma kb query`, `stats`, reports) never block it and read a snapshot republished after
    every record, so they see each trial as it lands (docs/security.md, Concurrency).
    Opening per record instead cost ~0.08 s a trial (a matvec-memory trial takes ~0.45 s), and a
    reader that held the KB at a trial's end made the sprint fail there."""

    def __init__(self, project, plan: Plan, sprint_id: str, ingest: bool = True, fleet: dict | None = None):
        # Created with the first record: bad input writes nothing. The ID carries the contract's
        # name, which came from a file: the folder must stay inside the project (luma/names.py).
        self.folder = names.child(project.home, project.home / "sprints", sprint_id, field="sprint",
                                  longest=names.MAX_ID)
        self.project, self.plan, self.sprint_id, self.ingest_records = project, plan, sprint_id, ingest
        #: The provenance's `fleet` block when a campaign runs the sprint on a runner node.
        self.fleet = fleet
        self.started = datetime.now(timezone.utc)
        self.ingested: list[str] = []
        self._signer: list = []  # [Signer or None] once looked up
        self._kb: KnowledgeBase | None = None

    def __enter__(self) -> "Recorder":
        if self.ingest_records:
            self._knowledge_base()  # at the start: a KB another writer holds fails the sprint before any trial
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the knowledge base (the sprint has ended, or failed)."""
        kb, self._kb = self._kb, None
        if kb is not None:
            kb.close()

    def _knowledge_base(self) -> KnowledgeBase:
        if self._kb is None:
            self._signer_()  # before the KB opens: a project's first key is made through a KB of its own
            self._kb = KnowledgeBase.open(self.project)
        return self._kb

    def _signer_(self):
        """The project runner key's Signer (None: no key, and the sprint does not record). The key
        is made on first use when the sprint records into the project; without --record only a
        key it has signs."""
        if not self._signer:
            self._signer.append(project_signer(self.project, create=self.ingest_records))
        return self._signer[0]

    def _save(self, path: Path, doc: dict) -> dict:
        """Validate and sign `doc`, write it to `path` and ingest it (when the sprint records); the
        record as written."""
        if self.fleet:
            doc = {**doc, "provenance": {**doc["provenance"], "fleet": self.fleet}}
        signer = self._signer_()
        if signer is None:  # not recording, and no key to sign with: written as built
            path.write_text(json.dumps(doc, indent=1))
            return doc
        # The record's one validation: the typed model is what is signed, and what is ingested.
        rec = signer.attest(validate_document(doc, f"{self.sprint_id}: {doc['record_type']}", self.project.home))
        record = {**doc, "attestation": rec.model.attestation.model_dump()}
        path.write_text(json.dumps(record, indent=1))
        if self.ingest_records:
            kb = self._knowledge_base()
            kb.ingest_records([replace(rec, source=str(path))], submitter=TOOL)
            kb.publish_snapshot()  # readers beside the sprint see this record from now on
            self.ingested.append(path.name)
        return record

    def trial(self, trial: Trial) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._save(self.folder / f"trial-{trial.index:03d}.json",
                   trial_record(self.plan, self.sprint_id, trial, self.started, trial.extra.get("artifact")))

    def finish(self, result: Result, summary: dict) -> dict | None:
        self.folder.mkdir(parents=True, exist_ok=True)
        chain = chain_record(result, self.started)
        if chain is not None:
            chain = self._save(self.folder / "chain.json", chain)
        (self.folder / "sprint.json").write_text(json.dumps(summary, indent=1, default=str))
        return chain

    def optimum(self, contract, state, out: dict, summary: dict) -> dict:
        """Write and ingest the optimize-result record of a search (`optimize.run`'s `out`), with
        `optimize.json` (its summary) beside it; the record as written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        prov = provenance(self.started)
        doc = {"record_type": "optimize-result", "evidence_class": "measured", "sprint": self.sprint_id,
               "workload": get(contract.service).workload(), "architecture": architecture(),
               "contract": contract.record_contract(), "state": state.record(),
               **optimize.result(contract, state, out, prov.get("environment", {})), "provenance": prov}
        doc = self._save(self.folder / "optimum.json", doc)
        (self.folder / "optimize.json").write_text(json.dumps(summary, indent=1, default=str))
        return doc
