"""A runner key trusted for a purpose vouches for the records its trust lists, not for another
record the same key signs (what keeps `luma evidence load` from trusting more than the set)."""

from __future__ import annotations

import pytest

from luma.errors import RecordError
from luma.experiments.evidence import shipped
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import scoped_trust
from luma.kb.records.loader import validate_document
from luma.kb.trust import attestation as att
from luma.kb.trust.runners import Signer


def test_a_record_outside_the_scope_does_not_ride_in(project):
    trial = next(r for recs in shipped.verify().records.values() for r in recs if r.kind == "pex-trial")
    key = Signer("someone", att.generate(), project.home)
    doc = trial.model.model_dump(mode="json", exclude_none=True)
    listed = validate_document(key.sign(doc), "listed", project.home)
    other = dict(doc, provenance={**doc["provenance"], "host": "elsewhere"})
    unlisted = validate_document(key.sign(other), "unlisted", project.home)
    pub = att.public_bytes(key.private_key)
    with KnowledgeBase.open(project) as kb:
        trust = scoped_trust(kb, pub, "scoped", "a test set", [listed.content_hash])
        kb.ingest_records([trust, listed], "test")  # trust and records in one batch
        with pytest.raises(RecordError, match="trusted here only for a test set, and this record is not one"):
            kb.ingest_records([unlisted], "test")
        assert scoped_trust(kb, pub, "scoped", "a test set", [listed.content_hash]) is None  # trusted already
        with pytest.raises(Exception, match="trusted here for a test set only"):
            scoped_trust(kb, pub, "scoped", "a test set", [unlisted.content_hash])
