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
