"""Runner attestations (kb/trust/attestation.py), runner trust records (kb/records/runner_trust.py,
kb/trust/runners.py) and their projection: signatures verify, break with one flipped byte, leave the
content hash alone, and key files are private."""

from __future__ import annotations

import base64
import copy
import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from luma.errors import ConfigError, RecordError
from luma.kb.trust import attestation as att
from luma.kb.records.loader import iter_records, validate_document
from luma.kb.knowledge_base import open_kb

DATA = Path(__file__).parents[1] / "data"
CHAIN = json.loads((DATA / "valid_chain.json").read_text())
KERNEL = json.loads((DATA / "kernel_result.json").read_text())
AT = datetime(2026, 12, 2, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def key():
    return att.generate()


def signed(doc: dict, private_key) -> dict:
    rec = validate_document(doc, "test")
    return {**doc, "attestation": att.sign(private_key, rec.content_hash).model_dump()}


def verifies(doc: dict, public_key: bytes) -> bool:
    rec = validate_document(doc, "test")
    return att.verify(rec.model.attestation, rec.content_hash, public_key)


def flip(text: str, i: int) -> str:
    """`text` (base64) with one bit of byte `i` of what it encodes flipped."""
    raw = bytearray(base64.b64decode(text))
    raw[i] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


# -- signatures ----------------------------------------------------------------------------------


def test_sign_then_verify(key):
    h = validate_document(CHAIN, "test").content_hash
    block = att.sign(key, h)
    pub = att.public_bytes(key)
    assert block.key == att.fingerprint(pub) and len(block.key) == 32 and block.algorithm == "ed25519"
    assert att.verify(block, h, pub)
    assert not att.verify(block, "0" * 64, pub)  # another record
    assert not att.verify(block, h, att.public_bytes(att.generate()))  # another key
    assert not att.verify(block, "not a hash", pub) and not att.verify(block, h, b"short")


@pytest.mark.parametrize("doc", [CHAIN, KERNEL], ids=["pex-chain", "kernel-result"])
def test_signed_record_has_the_unsigned_content_hash(doc, key):
    plain, sig = validate_document(doc, "test"), validate_document(signed(doc, key), "test")
    assert sig.content_hash == plain.content_hash and sig.canonical == plain.canonical
    assert "attestation" not in sig.canonical and plain.payload == plain.canonical
    # The ledger payload keeps the block, and reads back as the same record.
    assert json.loads(sig.payload)["attestation"] == signed(doc, key)["attestation"]
    again = type(sig.model).model_validate_json(sig.payload)
    assert again.attestation == sig.model.attestation


@pytest.mark.parametrize("where", ["workload.name", "repetitions", "signature", "signature-last-byte"])
def test_flipping_one_byte_fails_verification(where, key):
    doc = signed(CHAIN, key)
    pub = att.public_bytes(key)
    assert verifies(doc, pub)
    bad = copy.deepcopy(doc)
    if where == "workload.name":
        name = bad["workload"]["name"]
        bad["workload"]["name"] = chr(ord(name[0]) ^ 1) + name[1:]
    elif where == "repetitions":
        bad["repetitions"] ^= 1
    else:
        sig = bad["attestation"]["signature"]
        bad["attestation"]["signature"] = flip(sig, 0 if where == "signature" else 63)
    assert not verifies(bad, pub)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"algorithm": "rsa"}, "attestation.algorithm"),
        ({"extra": 1}, "attestation.extra"),
        ({"key": "ABC"}, "attestation.key"),
        ({"signature": "A" * 87 + "="}, "attestation.signature"),
        ({"signature": "A" * 85 + "B=="}, "attestation.signature"),  # not canonical base64
        ({"signature": 5}, "attestation.signature"),
    ],
)
def test_the_attestation_block_is_strict(change, field, key):
    doc = signed(CHAIN, key)
    doc["attestation"] = {**doc["attestation"], **change}
    with pytest.raises(RecordError) as err:
        validate_document(doc, "x.json")
    assert err.value.field == field and "\n" not in err.value.one_line()


def test_records_without_the_field_refuse_an_attestation(key):
    doc = {"record_type": "partner-retraction", "partner": "acme", "records": ["a" * 64],
           "provenance": {"tool": "t"}, "attestation": signed(CHAIN, key)["attestation"]}
    with pytest.raises(RecordError) as err:
        validate_document(doc, "x.json")
    assert err.value.field == "attestation"


# -- key files -------------------------------------------------------------------------------------


def test_key_files_are_private_and_never_overwritten(tmp_path):
    private = att.generate()
    key, pub = att.write_keypair(tmp_path, "lab-1", private)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert att.parse_public_key(pub.read_text(), "pub") == att.public_bytes(private)
    assert att.load_public(tmp_path, "lab-1") == att.public_bytes(private)
    assert att.key_names(tmp_path) == ["lab-1"] and not list(key.parent.glob(".*tmp"))
    with pytest.raises(ConfigError, match="never overwritten"):
        att.write_keypair(tmp_path, "lab-1", att.generate())
    assert att.load_public(tmp_path, "lab-1") == att.public_bytes(private)
    key.chmod(0o640)
    with pytest.raises(ConfigError) as err:
        att.load_private(tmp_path, "lab-1")
    assert err.value.source == str(key) and "0640" in err.value.message


def test_write_keypair_under_a_wide_umask_is_still_0600(tmp_path):
    old = os.umask(0)
    try:
        key, _ = att.write_keypair(tmp_path, "k", att.generate())
    finally:
        os.umask(old)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize("name", ["../escape", "UPPER", "", "a" * 65])
def test_key_names_are_slugs(tmp_path, name):
    with pytest.raises(ConfigError):
        att.write_keypair(tmp_path, name, att.generate())
    assert not (tmp_path / "escape.key").exists()


def test_default_key(tmp_path):
    assert att.default_key(tmp_path) is None
    att.write_keypair(tmp_path, "first", att.generate())
    att.set_default(tmp_path, "first")
    assert att.default_key(tmp_path) == "first"
    assert att.default_key(tmp_path, "other") == "other"  # LUMA_RUNNER_KEY


def test_public_keys_in_base64_or_pem():
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    private = att.generate()
    raw = att.public_bytes(private)
    pem = private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    assert att.parse_public_key(att.public_key_text(raw), "k") == raw == att.parse_public_key(pem, "k")
    for bad in ("not base64!", base64.b64encode(b"x" * 31).decode(), "-----BEGIN PUBLIC KEY-----\nAAAA\n"):
        with pytest.raises(RecordError):
            att.parse_public_key(bad, "k")


# -- trust records -----------------------------------------------------------------------------------


def trust_doc(private_key, name="lab", **extra) -> dict:
    raw = att.public_bytes(private_key)
    return {"record_type": "runner-trust", "name": name, "public_key": att.public_key_text(raw),
            "fingerprint": att.fingerprint(raw), "provenance": {"tool": "luma runner"}, **extra}


def test_trust_record_checks_its_fingerprint(key):
    doc = trust_doc(key, partner="acme")
    assert validate_document(doc, "t").model.evidence_class == "vendor-claim"
    with pytest.raises(RecordError) as err:
        validate_document({**doc, "fingerprint": "0" * 32}, "t")
    assert err.value.field == "fingerprint" and "does not match" in err.value.message


@pytest.mark.parametrize("kind", ["runner-trust", "runner-revocation"])
def test_record_files_cannot_carry_trust(kind, key, tmp_path):
    doc = trust_doc(key) if kind == "runner-trust" else {
        "record_type": kind, "fingerprint": "0" * 32, "name": "lab", "provenance": {"tool": "t"}}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(RecordError) as err:
        list(iter_records([path]))
    assert err.value.field == "record_type" and "luma runner" in err.value.message


def test_projection_of_runners_and_attested_records_conforms_under_both_checkers(key):
    import importlib.resources

    import pyshacl
    from rdflib import OWL, RDF, Graph

    from luma.kb.ingest.projection import LedgerMeta, project, runner_iri
    from luma.kb.ingest.shacl import default_checker
    from luma.kb.vocab import LUMA, record_graph

    ontology = importlib.resources.files("luma.ontology")
    shapes = Graph().parse(data=(ontology / "shapes.ttl").read_text(), format="turtle")
    terms = Graph().parse(data=(ontology / "luma.ttl").read_text(), format="turtle")
    declared = {str(s) for k in (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty) for s in terms.subjects(RDF.type, k)}
    fp = att.fingerprint(att.public_bytes(key))
    docs = [trust_doc(key, partner="acme"), signed(CHAIN, key), signed(KERNEL, key),
            {"record_type": "runner-revocation", "fingerprint": fp, "name": "lab", "reason": "lost",
             "provenance": {"tool": "luma runner"}}]
    for doc in docs:
        rec = validate_document(doc, "t")
        triples = project(rec.model, LedgerMeta(rec.content_hash, "alice", AT)).triples
        default_checker().check(triples, "t")
        data = Graph().parse(data="".join(f"<{s}> <{p}> {o} .\n" for s, p, o in triples), format="nt")
        assert pyshacl.validate(data, shacl_graph=shapes, inference="none")[0], doc["record_type"]
        used = {p for _, p, _ in triples} | {o[1:-1] for _, p, o in triples if p == str(RDF.type)}
        assert {t for t in used if t.startswith(LUMA)} <= declared
        if "attestation" in doc:
            assert (record_graph(rec.content_hash), LUMA + "attestedBy", f"<{runner_iri(fp)}>") in triples
    # A broken runner node is refused by the fast checker too (the fingerprint's pattern).
    rec = validate_document(docs[0], "t")
    triples = [(s, p, '"XYZ"' if p.endswith("#keyFingerprint") else o)
               for s, p, o in project(rec.model, LedgerMeta(rec.content_hash, "alice", AT)).triples]
    with pytest.raises(RecordError):
        default_checker().check(triples, "t")


def test_trusted_keys_from_the_ledger(luma_home):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.operations.runner_keys import keygen, revoke, trust
    from luma.kb.trust.runners import trusted_keys

    other = att.generate()
    with open_kb() as kb:
        mine = keygen(kb, "mine")
        lab = trust(kb, att.public_bytes(other), "lab", partner="acme")
        assert set(trusted_keys(kb.ledger)) == {mine.fingerprint, lab.fingerprint}
        revoked = revoke(kb, "lab", "lost laptop")
        keys = trusted_keys(kb.ledger)
        with pytest.raises(RecordError, match="revoked"):
            trust(kb, att.public_bytes(other), "lab-again")
        with pytest.raises(RecordError, match="called 'mine' already"):
            trust(kb, att.public_bytes(att.generate()), "mine")
        payloads = [e.payload for e in kb.ledger.after(0)]
    assert keys[lab.fingerprint].revoked and keys[lab.fingerprint].reason == "lost laptop"
    assert keys[lab.fingerprint].partner == "acme" and keys[lab.fingerprint].public_key == att.public_bytes(other)
    assert revoked.revoked_at >= revoked.trusted_since and not keys[mine.fingerprint].revoked
    assert att.default_key(luma_home) == "mine"
    secret = att.load_private(luma_home, "mine").private_bytes_raw()
    pem = (luma_home / "keys" / "mine.key").read_text().splitlines()[1]
    assert not any(base64.b64encode(secret).decode() in p or pem in p or secret.hex() in p for p in payloads)


def test_signed_by_names_why_a_record_does_not_qualify(luma_home):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.operations.runner_keys import keygen, revoke
    from luma.kb.trust.runners import signed_by, signer, trusted_keys

    stranger = att.generate()
    with open_kb() as kb:
        keygen(kb, "mine")
        keys = trusted_keys(kb.ledger)
        doc = signer(luma_home, "mine").sign(CHAIN, "c.json")
        assert signed_by(validate_document(doc, "c.json"), keys).name == "mine"
        cases = {
            "attestation": CHAIN,
            "attestation.key": signed(CHAIN, stranger),
            "attestation.signature": {**doc, "repetitions": doc["repetitions"] + 1},
        }
        for field, bad in cases.items():
            with pytest.raises(RecordError) as err:
                signed_by(validate_document(bad, "c.json"), keys)
            assert err.value.field == field and err.value.source == "c.json"
        revoke(kb, "mine")
        with pytest.raises(RecordError, match="was revoked on"):
            signed_by(validate_document(doc, "c.json"), trusted_keys(kb.ledger))
