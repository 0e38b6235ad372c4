"""Grow the evidence set: run the shipped contracts on this machine and write its entry
(`luma evidence record`), or export sprints that already ran into one (`export_machine`).

Each contract's sprint runs in a scratch project signed by this machine's own runner key, one at a
time, with the host's load average and CPU steal read before and after (a shared host's contention
is part of what the figures mean). A contract that cannot run here (no GPU, engine missing) is
entered as "not run" with its reason, never faked. The records go out exactly as the ledger holds
them: signed JSON, one file per contract, listed in the manifest with their SHA-256 and content
hashes; the public key goes beside them, the private key stays in the scratch project.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from luma.errors import ConfigError, LumaError
from luma.experiments.evidence import manifest as mf
from luma.experiments.machine_record import characterize_host
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint.run import contract_plan, run_sprint
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import keygen, project_signer
from luma.kb.records.loader import iter_records
from luma.kb.store.ledger import Ledger
from luma.kb.trust import attestation as att
from luma.kb.trust.runners import attested_kinds

#: The entry of the machine's own measured record (`luma machine characterize`: memory bandwidth,
#: matmul throughput per core count), listed with the contracts.
CHARACTERIZE = "machine-characterize"


@dataclass
class ContractRun:
    """One contract on this machine: its sprint (None when not run), wall time, contention, outcome."""

    name: str
    sprint: str | None
    wall_s: float | None
    contention: dict | None
    outcome: str

    def entry(self, records: int) -> dict:
        return {"name": self.name, "sprint": self.sprint, "records": records,
                "wall_s": None if self.wall_s is None else round(self.wall_s, 1), "contention": self.contention,
                "outcome": self.outcome}


def outcome(summary: dict) -> str:
    """A sprint's outcome in one phrase: the qualified boundary, or why there is none."""
    dim, low = summary.get("dimension"), summary.get("min_pass")
    if low is None:
        return "no boundary: " + ("; ".join(summary.get("problems") or []) or "no level passed")
    if summary.get("adjacent_fail") is None:
        return (f"no boundary: {dim} passes already at its lowest level ({low}), so no adjacent FAIL and no chain "
                "(the boundary lies below the levels given)")
    boundary = (f"{dim} min PASS {low}, adjacent FAIL {summary['adjacent_fail']}, binding "
                f"{summary.get('binding')}")
    if summary.get("recovered"):
        return (f"qualified boundary: {boundary}; recovered by {summary.get('intervention')} (min PASS "
                f"{summary.get('requalified_min_pass')})")
    return f"not recovered: boundary {boundary}; {summary.get('intervention')} did not recover PASS"


def not_runnable(settings, name: str) -> str | None:
    """Why contract `name` cannot run on this machine (an accelerator dimension and no NVIDIA GPU),
    or None."""
    c = contracts.load(name, settings)
    dimension = c.sprint.dimension if c.sprint is not None else None
    if dimension and dimension.startswith(("hbm", "accelerator")) and shutil.which("nvidia-smi") is None:
        return "needs an NVIDIA GPU (none on this machine)"
    return None


def run_contract(settings, name: str) -> ContractRun:
    """Run contract `name`'s sprint in the project of `settings`, recording it; a LumaError is
    the contract's "not run" outcome (its one line), not the end of the recording."""
    before, t0 = mf.contention(), time.monotonic()
    try:
        out = run_sprint(contract_plan(settings, name), settings, record=True).summary
    except LumaError as exc:
        return ContractRun(name, None, time.monotonic() - t0, mf.contention_between(before, mf.contention()),
                           f"not run: {exc.one_line()}")
    return ContractRun(name, out["sprint"], time.monotonic() - t0, mf.contention_between(before, mf.contention()),
                       outcome(out))


def characterize(settings, name: str) -> ContractRun:
    """Measure this host into a signed machine record in the project of `settings`."""
    before, t0 = mf.contention(), time.monotonic()
    rec = characterize_host(settings, name=name, progress=lambda step: None)  # it reports each step; quiet here
    return ContractRun(CHARACTERIZE, rec.recorded, time.monotonic() - t0,
                       mf.contention_between(before, mf.contention()),
                       "measured machine record: memory bandwidth, matmul throughput per core count")


def _payloads(ledger: Ledger, run: ContractRun) -> list[str]:
    """The ledger payloads of one run's records (a sprint's trials, then its chain; the machine
    record of a characterization), in ledger order."""
    if run.name == CHARACTERIZE:
        rows = ledger.rows_of_kinds(["machine"], "source", "payload")
        return [p for src, p in rows if src == run.sprint][-1:]
    # Whatever signed records the sprint wrote under its folder (trials, chain): the kinds a runner attests.
    rows = ledger.rows_of_kinds(attested_kinds(), "source", "payload")
    return [p for src, p in rows if f"/sprints/{run.sprint}/" in src.replace("\\", "/")]


def export_machine(settings, out: Path, machine: dict, runs: list[ContractRun], public_key: bytes,
                   append: bool = False) -> dict:
    """Write the records of `runs` from the project of `settings` under `out`/records/<id>/, its
    public key under `out`/keys/, and put `machine` (from `manifest.describe_machine`) with its
    contracts and files into `out`/manifest.json: replacing an entry of the same id, or with
    `append` adding these contracts to it (same key only; a contract run again replaces its own)."""
    mid = machine["id"]
    root = Path(out)
    data = mf.read(root) if (root / mf.MANIFEST).is_file() else mf.empty()
    old = next((m for m in data["machines"] if m["id"] == mid), None)
    if append and old is not None:
        if old["key"]["fingerprint"] != machine["key"]["fingerprint"]:
            raise ConfigError(f"machine {mid} of the set was signed by key {old['key']['fingerprint']}, not this "
                              f"project's {machine['key']['fingerprint']}: append from the project that holds its key",
                              field="append")
        names = {r.name for r in runs}
        machine = {**old, "contracts": [c for c in old["contracts"] if c["name"] not in names],
                   "files": [f for f in old["files"] if f.get("contract") not in names]}
    folder = Path(out) / "records" / mid
    folder.mkdir(parents=True, exist_ok=True)
    (Path(out) / "keys").mkdir(parents=True, exist_ok=True)
    (Path(out) / machine["key"]["file"]).write_text(att.public_key_text(public_key) + "\n")
    ledger = Ledger(settings.db_url)
    try:
        for run in runs:
            payloads = _payloads(ledger, run) if run.sprint else []
            if payloads:
                path = folder / f"{run.name}.jsonl"
                path.write_text("".join(p + "\n" for p in payloads))
                hashes = [r.content_hash for r in iter_records([path])]
                machine["files"].append({"path": f"records/{mid}/{path.name}", "contract": run.name,
                                         "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "records": hashes})
            entry = run.entry(len(payloads))
            if run.name == CHARACTERIZE:
                entry["sprint"] = None  # the record's file in the scratch project: nothing to cite
            machine["contracts"].append(entry)
    finally:
        ledger.dispose()
    data["machines"] = [m for m in data["machines"] if m["id"] != mid] + [machine]
    mf.write(root, data)
    return machine


def record(settings, out: Path, names: list[str] | None = None, skip: dict[str, str] | None = None,
           machine_id: str | None = None, append: bool = False) -> dict:
    """Run the shipped contracts (or `names`) one at a time in the scratch project of `settings`,
    signed by a key made there for this machine, and write this machine's entry under `out`.
    `skip` maps contracts to the reason they are not run here."""
    mid = machine_id or mf.machine_id()
    with KnowledgeBase.open(settings) as kb:
        if att.default_key(settings.home) is None:
            keygen(kb, mid, submitter="luma evidence record")
    signer = project_signer(settings)
    machine = mf.describe_machine(mid, signer.fingerprint)  # the revision and date the sprints run at
    runs = []
    for ref in names or sorted(contracts.shipped()):
        reason = (skip or {}).get(ref) or not_runnable(settings, ref)
        run = ContractRun(ref, None, None, None, f"not run: {reason}") if reason else run_contract(settings, ref)
        run.name = Path(ref).stem  # a contract file's name, as the shipped ones are named
        runs.append(run)
    if not names:
        runs.append(characterize(settings, mid))
    return export_machine(settings, out, machine, runs, att.public_bytes(signer.private_key), append)
