"""Measured means measured (issue 14), through the CLI as a lab would use it: a record that
claims `measured` is ingested only when a runner key this project trusts, and has not revoked,
signed it, and when its own trials bear it out. Every refusal is one line naming the file and
the field, and leaves the ledger and the KB exactly as they were (`luma kb export` and the
ledger's rows compared before and after)."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RecordError
from luma.kb.ingest.evidence_gate import check_before_open
from luma.kb.records.loader import iter_records, validate_document
from luma.kb.vocab import ID
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "data"
CHAIN = json.loads((DATA / "valid_chain.json").read_text())


def luma(*args, home: Path | None = None):
    """`luma ARGS` in-process, in the project at LUMA_HOME (or at `home`, a lab's own)."""
    env = {"LUMA_HOME": str(home)} if home is not None else None
    return CliRunner().invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def ledger_rows(home: Path) -> int:
    with sqlite3.connect(home / "ledger.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM ledger_record").fetchone()[0]


def state(home: Path) -> tuple[int, str]:
    """What a refusal must leave alone: the ledger's rows and every quad of the KB."""
    return ledger_rows(home), ok(luma("kb", "export", "--format", "nquads")).stdout


def refused(result, *fragments: str) -> str:
    """The error of a refused command, which holds every fragment: one line, or for a record with
    several problems `Error: FILE: N problems:` and one line per problem."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("Error: ") and "Traceback" not in result.output, result.output
    assert len(lines) == 1 or lines[0].endswith(" problems:") and all(x.startswith("  ") for x in lines[1:]), lines
    text = "\n".join(lines)
    assert all(f in text for f in fragments), (fragments, text)
    return text


def write(path: Path, *docs: dict) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs) if path.suffix == ".jsonl" else json.dumps(docs[0]))
    return path


def select(sparql: str) -> list[dict]:
    out = ok(luma("kb", "query", "--format", "json", sparql)).stdout
    return [{k: v["value"] for k, v in row.items()} for row in json.loads(out)["results"]["bindings"]]


def fingerprint(home: Path, name: str) -> str:
    rows = json.loads(ok(luma("runner", "list", "--format", "json", home=home)).stdout)
    return next(r["fingerprint"] for r in rows if r["name"] == name)


@pytest.fixture
def project(luma_home) -> Path:
    """A project with its own runner key `lab-a` (made with `luma runner keygen`, so trusted)."""
    ok(luma("runner", "keygen", "--name", "lab-a"))
    return luma_home


def signed_chain(tmp_path: Path, doc: dict | None = None, name: str = "chain.json") -> Path:
    """`doc` (the valid chain) written to `name` and signed in place with the project's key."""
    path = write(tmp_path / name, doc if doc is not None else CHAIN)
    ok(luma("runner", "sign", path))
    return path


# -- signatures ----------------------------------------------------------------------------------


def test_an_unsigned_measured_chain_is_refused(project, tmp_path):
    path = write(tmp_path / "chain.json", CHAIN)
    before = state(project)
    refused(luma("kb", "ingest", path), f"{path}: attestation: ", "must be signed by a runner key")
    assert state(project) == before


def test_a_chain_signed_by_an_untrusted_key_is_measured_nowhere_but_a_vendor_claim_is_kept(project, tmp_path):
    lab = tmp_path / "partner-lab"  # another project: its key is not trusted here
    ok(luma("runner", "keygen", "--name", "lab-b", home=lab))
    measured = write(tmp_path / "measured.json", CHAIN)
    ok(luma("runner", "sign", measured, home=lab))
    before = state(project)
    refused(luma("kb", "ingest", measured), f"{measured}: attestation.key: ", fingerprint(lab, "lab-b"),
            "is not trusted by this project")
    assert state(project) == before

    # The same content declared for what it is here: the lab's claim, still signed by the lab.
    claim = write(tmp_path / "claim.json", {**CHAIN, "evidence_class": "vendor-claim"})
    ok(luma("runner", "sign", claim, home=lab))
    ok(luma("kb", "ingest", claim))
    assert ledger_rows(project) == before[0] + 1
    [rec] = iter_records([claim])
    rows = select(f"PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?ev WHERE {{ GRAPH <{ID}record/"
                  f"{rec.content_hash[:32]}> {{ ?g luma:recordKind \"pex-chain\" ; luma:evidenceClass ?ev }} }}")
    assert rows == [{"ev": "https://w3id.org/luma/ns#VendorClaim"}]


@pytest.mark.parametrize("where, old, new", [
    ("content", '"AMD EPYC (Zen 4)"', '"AMD EPYC (Zen 5)"'),  # '4' -> '5': one bit of one byte
    ("a trial's observation", '"value": 142,', '"value": 143,'),
])
def test_one_flipped_byte_of_a_signed_record_fails_verification(where, old, new, project, tmp_path):
    path = signed_chain(tmp_path)
    text = path.read_text()
    assert text.count(old) == 1, where
    path.write_text(text.replace(old, new))
    before = state(project)
    refused(luma("kb", "ingest", path), f"{path}: attestation.signature: ", "does not verify with key",
            "changed after signing")
    assert state(project) == before


def test_a_signed_record_whose_trial_verdict_its_observations_contradict_is_refused(project, tmp_path):
    doc = copy.deepcopy(CHAIN)
    trial = doc["trials"][1]  # the second pass-state repetition, still saying PASS
    assert (trial["state"], trial["verdict"]) == ("pass", "PASS")
    for obs in trial["observations"]:
        obs["value"] = {"p99_latency": 230, "p99_latency.ci_low": 221, "p99_latency.ci_high": 242}.get(
            obs["metric"], obs["value"])
    path = signed_chain(tmp_path, doc)  # signed: the runner vouches for it, ingest still re-judges it
    before = state(project)
    refused(luma("kb", "ingest", path), f"{path}: trials[1].verdict: ", "verdict PASS but p99_latency 230 ms > 200 ms")
    assert state(project) == before


def test_a_consistent_signed_record_is_accepted_and_attested(project, tmp_path):
    path = signed_chain(tmp_path)
    before = ledger_rows(project)
    added = json.loads(ok(luma("kb", "ingest", path, "--format", "json")).stdout)
    assert added["added"] == 1 and ledger_rows(project) == before + 1
    [rec] = iter_records([path])
    runner = f"{ID}runner/{fingerprint(project, 'lab-a')}"
    rows = select("PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?ev ?runner ?name WHERE { GRAPH "
                  f"<{ID}record/{rec.content_hash[:32]}> {{ ?g luma:evidenceClass ?ev ; luma:attestedBy ?runner }} "
                  "?runner luma:runnerName ?name }")
    assert rows == [{"ev": "https://w3id.org/luma/ns#Measured", "runner": runner, "name": "lab-a"}]


# -- revocation ----------------------------------------------------------------------------------


def test_a_record_signed_by_a_key_since_revoked_is_refused(project, tmp_path):
    path = signed_chain(tmp_path)
    ok(luma("runner", "revoke", "lab-a", "--reason", "laptop stolen"))
    before = state(project)
    refused(luma("kb", "ingest", path), f"{path}: attestation.key: ", "(lab-a) was revoked on")
    assert state(project) == before


@pytest.mark.slow
def test_a_revoked_keys_records_stay_and_stop_qualifying_at_the_next_rules_run(project, tmp_path):
    path = signed_chain(tmp_path)
    ok(luma("kb", "ingest", path))
    [rec] = iter_records([path])
    qualified = ("PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?q WHERE { ?q a luma:QualifiedBoundary ; "
                 f"luma:qualifies <{ID}chain/{rec.content_hash[:32]}> }}")
    ok(luma("rules", "run"))
    assert len(select(qualified)) == 1
    rows = ledger_rows(project)
    ok(luma("runner", "revoke", "lab-a"))
    ok(luma("rules", "run"))
    assert select(qualified) == []
    assert ledger_rows(project) == rows + 1  # the record stays; the revocation is added beside it


# -- trials cited by hash ------------------------------------------------------------------------


def _trial_records(chain: dict) -> list[dict]:
    """The chain's trials as the pex-trial records a sprint writes (the recovered ones ran the
    FAIL state with the intervention in place)."""
    out = []
    for i, t in enumerate(chain["trials"]):
        rec = {"record_type": "pex-trial", "evidence_class": "measured", "sprint": "lab-sprint-7", "sequence": i,
               "phase": "intervention" if t["state"] == "recovered" else "boundary",
               "workload": chain["workload"], "architecture": chain["architecture"], "contract": chain["contract"],
               "state": chain["pass_state"] if t["state"] == "pass" else chain["fail_state"],
               "variant": chain["intervention"]["name"] if t["state"] == "recovered" else "fp32",
               "verdict": t["verdict"], "observations": t.get("observations", []),
               "provenance": {"tool": "lab runner", "host": "lab-node-3"}}
        if "failure_cause" in t:
            rec["failure_cause"] = t["failure_cause"]
        out.append(rec)
    return out


def test_a_chain_citing_trial_records_by_hash_needs_them_in_the_ledger(project, tmp_path):
    trials = write(tmp_path / "trials.jsonl", *_trial_records(CHAIN))
    ok(luma("runner", "sign", trials))
    hashes = [r.content_hash for r in iter_records([trials])]
    cited = {**CHAIN, "trials": [{"state": t["state"], "repetition": t["repetition"], "verdict": t["verdict"],
                                  "record": h} for t, h in zip(CHAIN["trials"], hashes)]}
    chain = signed_chain(tmp_path, cited)

    before = state(project)
    refused(luma("kb", "ingest", chain), f"{chain}: {len(hashes)} problems:", "\n  trials[0].record: ",
            f"trial record {hashes[0][:12]}", "neither in the ledger nor in this batch")
    assert state(project) == before

    assert json.loads(ok(luma("kb", "ingest", trials, "--format", "json")).stdout)["added"] == len(hashes)
    assert json.loads(ok(luma("kb", "ingest", chain, "--format", "json")).stdout)["added"] == 1
    assert ledger_rows(project) == before[0] + len(hashes) + 1


# -- the gate before the KB is opened ------------------------------------------------------------


def test_the_gate_can_refuse_before_the_kb_is_opened(project, tmp_path):
    """`check_before_open` gives the refusal ingest would give from the ledger alone."""
    unsigned = validate_document(CHAIN, "chain.json")
    signed = next(iter_records([signed_chain(tmp_path)]))
    settings = Settings.from_env(home=project)
    check_before_open(settings, [signed, unsigned])  # one record: the unsigned twin is a duplicate
    with pytest.raises(RecordError) as caught:
        check_before_open(settings, [unsigned])
    assert caught.value.field == "attestation"
    with pytest.raises(RecordError) as caught:  # no ledger at all: no key is trusted, nothing is created
        check_before_open(Settings.from_env(home=tmp_path / "nowhere"), [signed])
    assert caught.value.field == "attestation.key" and not (tmp_path / "nowhere").exists()
