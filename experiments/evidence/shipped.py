"""The evidence set shipped with LUMA: list it, verify it, load it into a project.

Verification trusts nothing but the folder itself: each record must validate, carry the content
hash the manifest lists, and verify against the public key shipped for its machine; the files
must be exactly those the manifest names, with its SHA-256s and counts. Loading verifies first,
then trusts each machine's key in the project for the shipped records only (a `runner-trust`
record whose `scope` lists their content hashes, kb/records/runner_trust.py) and ingests the trust
records and the evidence in one batch: all or nothing, and a second load adds nothing.
"""

from __future__ import annotations

import hashlib
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import LumaError, RecordError
from luma.experiments.evidence import manifest as mf
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import scoped_trust
from luma.kb.records.loader import iter_records
from luma.kb.trust import attestation as att

SUBMITTER = "luma evidence load"


def default_root() -> Path:
    """The evidence folder inside the installed package (a source checkout's experiments/evidence/)."""
    return Path(str(importlib.resources.files("luma.experiments.evidence")))


def purpose(machine: str) -> str:
    """What `luma evidence load` trusts a shipped key for (kept in its runner-trust record)."""
    return f"the evidence set shipped with LUMA (machine {machine})"


@dataclass
class Verified:
    """What `verify` found: records per machine (validated, signature-checked) and every problem."""

    root: Path
    manifest: dict | None
    records: dict[str, list] = field(default_factory=dict)
    keys: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self) -> int:
        return sum(len(v) for v in self.records.values())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_key(root: Path, m: dict, out: Verified) -> bytes | None:
    key = m["key"]
    path = root / key.get("file", "")
    try:
        raw = att.parse_public_key(path.read_text(), str(path))
    except (OSError, LumaError) as exc:
        out.problems.append(f"{path}: cannot read the public key ({exc})")
        return None
    if att.fingerprint(raw) != key.get("fingerprint"):
        out.problems.append(f"{path}: fingerprint {att.fingerprint(raw)} is not the manifest's {key.get('fingerprint')}")
        return None
    return raw


def _check_file(root: Path, mid: str, entry: dict, fp: str, raw: bytes, out: Verified) -> None:
    path = root / entry["path"]
    if not path.is_file():
        out.problems.append(f"{path}: listed in the manifest but missing")
        return
    try:
        recs = list(iter_records([path]))
    except LumaError as exc:
        out.problems.append(exc.one_line())
        return
    listed = entry.get("records", [])
    before = len(out.problems)
    # One line per record at fault: a changed figure changes the content hash (so neither the
    # manifest's hash nor the signature can match); say the first, which names the cause.
    for r in recs:
        block = getattr(r.model, "attestation", None)
        if r.content_hash not in listed:
            out.problems.append(f"{r.source}: content hash {r.content_hash[:12]}… is not one the manifest lists "
                                "(the record was changed or added after recording)")
        elif block is None or block.key != fp:
            out.problems.append(f"{r.source}: not signed by machine {mid}'s key {fp}")
        elif not att.verify(block, r.content_hash, raw):
            out.problems.append(f"{r.source}: does not verify with machine {mid}'s key {fp} (its signature was "
                                "changed after signing)")
    hashes = [r.content_hash for r in recs]
    if len(out.problems) == before and hashes != listed:
        out.problems.append(f"{path}: holds {len(hashes)} record(s), the manifest lists {len(listed)}")
    if len(out.problems) == before and _sha256(path) != entry.get("sha256"):
        out.problems.append(f"{path}: SHA-256 differs from the manifest's (the file was changed)")
    out.records.setdefault(mid, []).extend(recs)


def verify(root: Path | None = None) -> Verified:
    """Check the evidence folder `root` (the shipped one by default) completely; every problem,
    one line each, in `Verified.problems` (none: the set is intact)."""
    root = Path(root) if root is not None else default_root()
    try:
        data = mf.read(root)
    except LumaError as exc:
        return Verified(root, None, problems=[exc.one_line()])
    out = Verified(root, data)
    listed: set[Path] = set()
    for m in data["machines"]:
        mid = m["id"]
        out.records.setdefault(mid, [])
        listed.add((root / m["key"].get("file", "")).resolve())
        raw = _check_key(root, m, out)
        for entry in m["files"]:
            listed.add((root / entry["path"]).resolve())
            if raw is not None:
                _check_file(root, mid, entry, m["key"]["fingerprint"], raw, out)
        if raw is not None:
            out.keys[mid] = raw
        n = sum(c.get("records", 0) for c in m["contracts"])
        if n != sum(len(e.get("records", [])) for e in m["files"]):
            out.problems.append(f"{root / mf.MANIFEST}: machine {mid}: its contracts count {n} records, its files "
                                f"{sum(len(e.get('records', [])) for e in m['files'])}")
    for sub in ("keys", "records"):
        for path in sorted((root / sub).rglob("*")) if (root / sub).is_dir() else []:
            if path.is_file() and path.resolve() not in listed:
                out.problems.append(f"{path}: not in the manifest (a record or key it does not list is refused)")
    return out


@dataclass(frozen=True)
class Loaded:
    """What `load` did: the keys it trusted (machine, fingerprint, records, newly), and the counts."""

    trusted: list[dict]
    added: int
    present: int


def load(settings, root: Path | None = None) -> Loaded:
    """Verify the set, trust each machine's key for its shipped records only, and ingest them all
    into the project of `settings` in one batch; RecordError (the first problem and how many
    more) when the set does not verify, and then nothing is written."""
    v = verify(root)
    if not v.ok:
        more = f" (and {len(v.problems) - 1} more problem(s): `luma evidence verify`)" if len(v.problems) > 1 else ""
        raise RecordError(f"the evidence set does not verify, nothing was loaded: {v.problems[0]}{more}",
                          source=str(v.root))
    # Read again in the project's context (its dimensions): the records the KB ingests.
    by_machine = {m["id"]: list(iter_records([v.root / e["path"] for e in m["files"]], settings.home))
                  for m in v.manifest["machines"]}
    for mid, recs in by_machine.items():
        if [r.content_hash for r in recs] != [r.content_hash for r in v.records[mid]]:
            # The project's own dimensions read them differently: the trust would not match the set.
            raise RecordError(f"machine {mid}'s records read differently in this project (its dimensions), nothing "
                              "was loaded", source=str(v.root))
    trusted, batch = [], []
    with KnowledgeBase.open(settings) as kb:
        for m in v.manifest["machines"]:
            mid, recs = m["id"], by_machine[m["id"]]
            if not recs:
                continue
            trust = scoped_trust(kb, v.keys[mid], mid, purpose(mid), [r.content_hash for r in recs])
            if trust is not None:
                batch.append(trust)
            trusted.append({"machine": mid, "fingerprint": m["key"]["fingerprint"], "records": len(recs),
                            "trust": "new, for these records only" if trust is not None else "already trusted"})
            batch.extend(recs)
        report = kb.ingest_records(batch, SUBMITTER)
    added = sum(1 for r in report.added if r.kind != "runner-trust")
    return Loaded(trusted, added, len(report.duplicates))


def rows(root: Path | None = None) -> list[dict]:
    """One row per machine and contract of the set (`luma evidence list`)."""
    data = mf.read(Path(root) if root is not None else default_root())
    out = []
    for m in data["machines"]:
        for c in m["contracts"]:
            out.append({"machine": m["id"], "cpu": m.get("cpu_model"), "isa": ",".join(m.get("isa") or []),
                        "accelerator": m.get("accelerator"), "date": m.get("date"), "contract": c["name"],
                        "sprint": c.get("sprint"), "records": c.get("records", 0), "wall_s": c.get("wall_s"),
                        "steal_pct": (c.get("contention") or {}).get("steal_pct"), "outcome": c.get("outcome")})
    return out
