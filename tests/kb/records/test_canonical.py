"""The canonical form of a record (what is hashed and stored in the ledger) is pinned: changing
it changes every record's identity, so it may only change on purpose (and with a migration)."""

from __future__ import annotations

import json
from pathlib import Path

from luma.kb.records.loader import iter_records

DATA = Path(__file__).parents[1] / "data"
#: SHA-256 of the canonical JSON of tests/kb/data/valid_chain.json (pydantic's model JSON:
#: declaration order, dimension maps sorted by key, no nulls). Re-pinned when the record gained
#: its trials (issue 14: a measured chain carries the trials that bear it out), which are part of
#: its content; the canonical form itself did not change.
EXAMPLE_HASH = "e80dcad7a84a5e4d6cff50a6b9319880c0f99058ed8b8ca8b3bea7fb1904e105"


def _hash(path: Path) -> str:
    return next(iter_records([path])).content_hash


def test_the_example_record_hash_is_pinned():
    assert _hash(DATA / "valid_chain.json") == EXAMPLE_HASH


def test_json_yaml_json_lines_and_dimension_order_give_the_same_identity(tmp_path):
    doc = json.loads((DATA / "valid_chain.json").read_text())
    for key in ("pass_state", "fail_state"):
        doc[key]["dimensions"] = dict(reversed(list(doc[key]["dimensions"].items())))
    jsonl = tmp_path / "one.jsonl"
    jsonl.write_text(json.dumps(doc) + "\n")  # the JSON-mode fast path
    reordered = tmp_path / "reordered.json"
    reordered.write_text(json.dumps(doc, indent=1))  # the general path
    assert {_hash(DATA / "valid_chain.yaml"), _hash(jsonl), _hash(reordered)} == {EXAMPLE_HASH}


def test_every_signed_kind_declares_its_attestation_last():
    # The loader appends the attestation to the canonical JSON instead of serialising the whole
    # record twice; that is the record's own JSON only while the block is its last field.
    from luma.kb.records.kinds import KINDS

    signed = [k for k in KINDS if "attestation" in k.model_class().model_fields]
    assert len(signed) >= 6
    for kind in signed:
        assert list(kind.model_class().model_fields)[-1] == "attestation", kind.name


def test_the_stored_payload_is_the_record_s_own_json_with_its_attestation(tmp_path):
    from luma.kb.records.loader import _with_attestation

    doc = json.loads((DATA / "valid_chain.json").read_text())
    doc["attestation"] = {"key": "ab" * 16, "algorithm": "ed25519",
                          "signature": "QUJD" * 21 + "QQ=="}
    path = tmp_path / "signed.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    rec = next(iter_records([path]))
    assert rec.content_hash == EXAMPLE_HASH  # the attestation stays out of the identity
    assert rec.payload == rec.model.model_dump_json(exclude_none=True)
    assert json.loads(rec.payload)["attestation"] == doc["attestation"]
    assert _with_attestation(rec.model, rec.canonical) == rec.payload
