"""The shipped evidence set: it verifies, loads all or nothing (once), refuses what its manifest
does not list or what was changed, ships as package data, and its keys vouch for its records only."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from luma.errors import RecordError, TrustError
from luma.experiments.evidence import manifest, shipped
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import revoke
from luma.kb.store.ledger import Ledger
from luma.kb.trust.runners import trusted_keys

ROOT = Path(__file__).resolve().parents[3]


def _ledger_count(settings) -> int:
    path = settings.home / "ledger.sqlite"
    if not path.is_file():
        return 0
    ledger = Ledger(settings.db_url)
    try:
        return sum(ledger.count_by().values())
    finally:
        ledger.dispose()


def test_the_shipped_set_verifies_and_names_its_machines():
    v = shipped.verify()
    assert v.ok, v.problems
    data = manifest.read(shipped.default_root())
    assert data["machines"] and v.count() > 0
    for m in data["machines"]:
        assert m["cpu_model"] and m["isa"] and m["accelerator"] and m["luma_version"] and m["date"]
        assert (shipped.default_root() / m["key"]["file"]).read_text().strip()
        assert all("outcome" in c and "contention" in c for c in m["contracts"])
        # Every record is measured and signed by its machine's key: nothing else ships.
        assert {r.evidence_class for r in v.records[m["id"]]} == {"measured"}
        assert {r.model.attestation.key for r in v.records[m["id"]]} == {m["key"]["fingerprint"]}
    # Only public keys ship: no private key file anywhere in the set.
    assert not [p for p in shipped.default_root().rglob("*") if p.suffix == ".key"]


def test_load_trusts_each_key_for_its_records_only_and_a_second_load_adds_nothing(project):
    v = shipped.verify()
    first = shipped.load(project)
    assert first.added == v.count() and first.present == 0
    assert {t["machine"] for t in first.trusted} == set(v.records)
    ledger = Ledger(project.db_url)
    try:
        keys = trusted_keys(ledger)
    finally:
        ledger.dispose()
    for mid, recs in v.records.items():
        key = keys[recs[0].model.attestation.key]
        assert key.scope == {r.content_hash for r in recs} and mid in key.purpose
    before = _ledger_count(project)
    again = shipped.load(project)
    assert again.added == 0 and again.present == v.count() and _ledger_count(project) == before
    assert all(t["trust"] == "already trusted" for t in again.trusted)


def test_a_changed_figure_fails_verify_with_one_line_and_load_writes_nothing(evidence_copy, project):
    path = next(p for p in sorted((evidence_copy / "records").rglob("*.jsonl"))
                if json.loads(p.read_text().splitlines()[0])["record_type"] == "pex-trial")
    lines = path.read_text().splitlines()
    doc = json.loads(lines[0])
    doc["observations"][0]["value"] = doc["observations"][0]["value"] * 0.5  # a better figure than measured
    path.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    problems = shipped.verify(evidence_copy).problems
    assert len(problems) == 1 and "line 1" in problems[0] and "not one the manifest lists" in problems[0]
    with pytest.raises(RecordError, match="does not verify, nothing was loaded"):
        shipped.load(project, evidence_copy)
    assert _ledger_count(project) == 0


def test_a_record_signed_by_the_shipped_key_but_not_in_the_manifest_is_refused(evidence_copy, project):
    path = next((evidence_copy / "records").rglob("*.jsonl"))
    extra = path.with_name("extra.jsonl")
    extra.write_text(path.read_text().splitlines()[0] + "\n")  # genuinely signed, but not listed
    problems = shipped.verify(evidence_copy).problems
    assert problems == [f"{extra}: not in the manifest (a record or key it does not list is refused)"]
    with pytest.raises(RecordError):
        shipped.load(project, evidence_copy)
    assert _ledger_count(project) == 0


def test_revoking_a_shipped_key_works_as_for_any_key(project):
    shipped.load(project)
    with KnowledgeBase.open(project) as kb:
        name = shipped.verify().manifest["machines"][0]["id"]
        assert revoke(kb, name, "test").revoked
    with pytest.raises(TrustError, match="was revoked"):
        shipped.load(project)


def test_every_file_of_the_manifest_ships_as_package_data():
    # What a fresh clone has (git-tracked) and what a wheel carries (the package-data globs).
    root = shipped.default_root()
    data = manifest.read(root)
    files = [manifest.MANIFEST, "README.md"] + [m["key"]["file"] for m in data["machines"]]
    files += [f["path"] for m in data["machines"] for f in m["files"]]
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "luma.experiments.evidence"]
    for f in files:
        assert (root / f).is_file(), f
        assert any(fnmatch.fnmatch(f, g) or fnmatch.fnmatch(f, g.removeprefix("**/")) for g in globs), f
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "experiments/evidence"], capture_output=True,
                             text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    listed = set(tracked.stdout.split())
    missing = [f for f in files if f"experiments/evidence/{f}" not in listed]
    assert not missing, f"not committed, so not in a fresh clone: {missing}"
