"""`luma runner keygen|trust|list|revoke|sign` through the CLI with a temporary LUMA_HOME, and a
sprint's records signed by the project's key."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.trust import attestation as att
from luma.kb.records.loader import iter_records, validate_document

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "kb" / "data"
CHAIN = json.loads((DATA / "valid_chain.json").read_text())
KERNEL = json.loads((DATA / "kernel_result.json").read_text())


def run(*args, ok: bool = True):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def one_line_error(result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def ledger_payloads(home: Path) -> list[str]:
    with sqlite3.connect(home / "ledger.sqlite") as conn:
        return [row[0] for row in conn.execute("SELECT payload FROM ledger_record")]


def query(sparql: str) -> list[dict]:
    return json.loads(run("kb", "query", "--format", "json", sparql).stdout)["results"]["bindings"]


def verifies(doc: dict, public_key: bytes) -> bool:
    rec = validate_document(doc, "test")
    return rec.model.attestation is not None and att.verify(rec.model.attestation, rec.content_hash, public_key)


@pytest.mark.parametrize("sub", [[], ["keygen"], ["trust"], ["list"], ["revoke"], ["sign"]])
def test_help_everywhere(sub, luma_home):
    result = run("runner", *sub, "--help")
    assert "Usage:" in result.output
    assert not any(luma_home.iterdir())


@pytest.mark.parametrize("args", [["keygen", "--name", "Bad Name"], ["trust", "AAAA"], ["sign"],
                                  ["list", "--format", "xml"], ["trust", "x", "--name", "a", "--partner", "A B"]])
def test_usage_errors_exit_2(args, luma_home):
    assert run("runner", *args, ok=False).exit_code == 2
    assert not any(luma_home.iterdir())


def test_keygen_makes_a_private_key_nothing_ever_shows(luma_home):
    result = run("runner", "keygen", "--name", "lab-a")
    key, pub = luma_home / "keys" / "lab-a.key", luma_home / "keys" / "lab-a.pub"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    private = att.load_private(luma_home, "lab-a")
    raw_pub = att.public_bytes(private)
    fp = att.fingerprint(raw_pub)
    assert fp in result.output and att.parse_public_key(pub.read_text(), "pub") == raw_pub
    secrets = [base64.b64encode(private.private_bytes_raw()).decode(), private.private_bytes_raw().hex(),
               *key.read_text().splitlines()[1:-1]]
    listed = run("runner", "list", "--format", "json").output
    shown = [result.output, listed, run("kb", "export").output, *ledger_payloads(luma_home)]
    assert not any(s in text for s in secrets for text in shown)
    assert json.loads(listed) == [{"name": "lab-a", "fingerprint": fp, "partner": None,
                                   "since": json.loads(listed)[0]["since"], "revoked": None, "reason": None,
                                   "purpose": None, "scope": None}]
    assert (luma_home / "keys" / "default").read_text().strip() == "lab-a"
    # The same name again is refused, the key stays as it was.
    line = one_line_error(run("runner", "keygen", "--name", "lab-a", ok=False))
    assert "lab-a.key" in line and "never overwritten" in line
    assert att.public_bytes(att.load_private(luma_home, "lab-a")) == raw_pub


def test_trust_list_revoke_round_trip(luma_home, tmp_path):
    run("runner", "keygen", "--name", "mine")
    other = att.generate()
    pub = tmp_path / "partner.pub"
    pub.write_text(att.public_key_text(att.public_bytes(other)) + "\n")
    fp = att.fingerprint(att.public_bytes(other))
    assert fp in run("runner", "trust", pub, "--name", "lab-b", "--partner", "acme").output
    # Base64 on the command line works too; the same key twice does not.
    line = one_line_error(run("runner", "trust", att.public_key_text(att.public_bytes(other)), "--name", "x", ok=False))
    assert "trusted already" in line
    rows = {r["name"]: r for r in json.loads(run("runner", "list", "--format", "json").stdout)}
    assert rows["lab-b"]["partner"] == "acme" and rows["lab-b"]["fingerprint"] == fp and rows["lab-b"]["revoked"] is None
    csv = run("runner", "list", "--format", "csv").output.splitlines()
    assert csv[0] == "name,fingerprint,partner,since,revoked,reason" and len(csv) == 3

    runners = query("SELECT ?n ?p WHERE { ?r a luma:Runner ; luma:runnerName ?n . OPTIONAL { ?r luma:partner ?p } }")
    assert {(b["n"]["value"], b.get("p", {}).get("value")) for b in runners} == {("mine", None), ("lab-b", "acme")}

    run("runner", "revoke", "lab-b", "--reason", "key leaked")
    rows = {r["name"]: r for r in json.loads(run("runner", "list", "--format", "json").stdout)}
    assert rows["lab-b"]["revoked"] and rows["lab-b"]["reason"] == "key leaked" and rows["mine"]["revoked"] is None
    revoked = query("SELECT ?r ?t WHERE { ?r a luma:Runner ; luma:revokedAt ?t }")
    assert [b["r"]["value"] for b in revoked] == [f"https://w3id.org/luma/id/runner/{fp}"]
    # Append-only: the trust record is still there, the revocation beside it; a rebuild agrees.
    kinds = [json.loads(p)["record_type"] for p in ledger_payloads(luma_home)]
    assert kinds.count("runner-trust") == 2 and kinds.count("runner-revocation") == 1
    run("kb", "rebuild")
    assert len(query("SELECT ?r WHERE { ?r luma:revokedAt ?t }")) == 1

    assert "revoked already" in one_line_error(run("runner", "revoke", "lab-b", ok=False))
    assert "no runner key 'nobody'" in one_line_error(run("runner", "revoke", "nobody", ok=False), 2)
    assert "never trusted again" in one_line_error(run("runner", "trust", pub, "--name", "lab-c", ok=False))


def test_bad_public_keys_are_one_line(luma_home, tmp_path):
    short = tmp_path / "short.pub"
    short.write_text(base64.b64encode(b"x" * 31).decode())
    assert "must decode to 32 bytes" in one_line_error(run("runner", "trust", short, "--name", "s", ok=False))
    assert "short.pub" in one_line_error(run("runner", "trust", short, "--name", "s", ok=False))
    assert "is not base64" in one_line_error(run("runner", "trust", "no!t-base64", "--name", "s", ok=False))
    assert "no such file" in one_line_error(run("runner", "trust", tmp_path / "none.pub", "--name", "s", ok=False)).lower()


def test_sign_json_jsonl_and_yaml(luma_home, tmp_path):
    run("runner", "keygen", "--name", "signer")
    pub = att.load_public(luma_home, "signer")
    src = tmp_path / "src"
    src.mkdir()
    chain = {**CHAIN, "provenance": {"tool": "lab tool", "git_revision": "2e16739", "host": "yes"}}
    (src / "a.json").write_text(json.dumps(chain))
    (src / "b.jsonl").write_text(json.dumps(KERNEL) + "\n\n" + json.dumps({**KERNEL, "repetitions": 7}) + "\n")
    (src / "c.yaml").write_text(yaml.safe_dump(CHAIN, sort_keys=False))
    before = {p.name: p.read_text() for p in src.iterdir()}
    out = tmp_path / "signed"
    result = run("runner", "sign", src / "a.json", src / "b.jsonl", src / "c.yaml", "--out", out)
    assert "signed 4 record(s) in 3 file(s) with key signer" in result.output
    assert {p.name: p.read_text() for p in src.iterdir()} == before  # --out leaves the originals
    records = list(iter_records(sorted(out.iterdir())))
    assert len(records) == 4
    for rec in records:
        assert att.verify(rec.model.attestation, rec.content_hash, pub)
    # The signed copies hash as the originals did; the YAML copy keeps its strings strings.
    assert sorted(r.content_hash for r in records) == sorted(r.content_hash for r in iter_records(sorted(src.iterdir())))
    assert yaml.safe_load((out / "c.yaml").read_text())["record_type"] == "pex-chain"
    # Signed again in place: the attestation is replaced, not added twice; then the KB takes them.
    run("runner", "sign", out / "a.json", "--format", "json")
    assert verifies(json.loads((out / "a.json").read_text()), pub)
    report = run("kb", "ingest", *sorted(out.iterdir()), "--format", "json")
    assert report.exit_code == 0
    assert len(query("SELECT ?g WHERE { ?g luma:attestedBy ?r . ?r a luma:Runner }")) == 4
    payloads = [json.loads(p) for p in ledger_payloads(luma_home)]
    assert sum("attestation" in p for p in payloads) == 4


def test_sign_yaml_copy_round_trips_ambiguous_strings(luma_home, tmp_path):
    run("runner", "keygen", "--name", "signer")
    doc = {**CHAIN, "provenance": {"tool": "t", "git_revision": "2e16739", "host": "1:30"}}
    path = tmp_path / "r.yml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    run("runner", "sign", path)
    rec = next(iter_records([path]))
    assert rec.model.provenance.git_revision == "2e16739" and rec.model.provenance.host == "1:30"
    assert att.verify(rec.model.attestation, rec.content_hash, att.load_public(luma_home, "signer"))


@pytest.mark.parametrize(
    ("content", "suffix", "expected"),
    [
        ({**CHAIN, "repetitions": 0}, ".json", "repetitions"),
        ({**CHAIN, "evidence_class": "guess"}, ".jsonl", "line 1: evidence_class"),
        ({"record_type": "partner-retraction", "partner": "p", "records": ["a" * 64], "provenance": {"tool": "t"}},
         ".json", "record_type: a 'partner-retraction' record carries no attestation"),
        (CHAIN, ".toml", "can only sign"),
    ],
)
def test_sign_refuses_invalid_records_and_writes_nothing(content, suffix, expected, luma_home, tmp_path):
    run("runner", "keygen", "--name", "signer")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(CHAIN))
    bad = tmp_path / f"bad{suffix}"
    bad.write_text(json.dumps(content) if suffix != ".toml" else 'record_type = "pex-chain"\n')
    before = good.read_text(), bad.read_text()
    line = one_line_error(run("runner", "sign", good, bad, ok=False))
    assert str(bad) in line and expected in line
    assert (good.read_text(), bad.read_text()) == before


def test_sign_needs_a_key(luma_home, tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(CHAIN))
    assert "no runner key" in one_line_error(run("runner", "sign", path, ok=False))
    assert "no such key" in one_line_error(run("runner", "sign", path, "--key", "ghost", ok=False))
    assert "attestation" not in path.read_text()


def test_a_group_readable_private_key_is_refused(luma_home, tmp_path):
    run("runner", "keygen", "--name", "lax")
    key = luma_home / "keys" / "lax.key"
    key.chmod(0o644)
    path = tmp_path / "a.json"
    path.write_text(json.dumps(CHAIN))
    line = one_line_error(run("runner", "sign", path, ok=False))
    assert str(key) in line and "0644" in line


@pytest.mark.slow
def test_a_sprint_signs_its_records_with_the_project_key(tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUMA_")} | {"LUMA_HOME": str(home)}
    luma = Path(sys.executable).parent / "luma"
    done = subprocess.run([str(luma), "sprint", "run", "matvec-memory", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    name = (home / "keys" / "default").read_text().strip()
    assert stat.S_IMODE((home / "keys" / f"{name}.key").stat().st_mode) == 0o600
    pub = att.public_bytes(att.load_private(home, name))
    files = sorted((home / "sprints").glob("*/trial-*.json")) + sorted((home / "sprints").glob("*/chain.json"))
    # A whole sprint, unless the host was too contended to go on (CPU steal on a shared host):
    # then the trials it ran, each signed all the same.
    stopped = any(p.startswith("host too contended") for p in json.loads(done.stdout)["problems"])
    assert len(files) > 3 or (stopped and files), done.stdout[-2000:]
    for path in files:
        assert verifies(json.loads(path.read_text()), pub), path
    kinds = {}
    for payload in ledger_payloads(home):
        doc = json.loads(payload)
        kinds[doc["record_type"]] = kinds.get(doc["record_type"], 0) + 1
        if doc["record_type"] in ("pex-trial", "pex-chain"):
            assert doc["attestation"]["key"] == att.fingerprint(pub)
    assert kinds["runner-trust"] == 1 and kinds["pex-trial"] == len(list((home / "sprints").glob("*/trial-*.json")))
