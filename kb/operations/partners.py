"""Partner records added and removed: each writes through an open `KnowledgeBase`, so this sits
above the front door (reading partner files and the partner ledger is `luma.kb.trust.partners`).

The ledger is append-only and has no way to delete, so `luma partner remove` appends a
`partner-retraction` record; the KB drops the retracted records' graphs (kb/store/partner_graphs.py).
"""

from __future__ import annotations

import socket
from datetime import datetime, timezone

from luma.errors import RecordError, UnknownName
from luma.kb.ingest.ingest_report import default_submitter
from luma.kb.records.loader import validate_document
from luma.kb.trust.partners import read_ledger

TOOL = "luma partner"


def add(kb, records: list, submitter: str | None = None):
    """Ingest validated partner records, all or nothing; a record removed earlier is refused
    (its bytes are in the ledger already, so it could never come back). Returns the IngestReport."""
    book = read_ledger(kb.ledger)
    removed = {e.content_hash: e for e in book.entries if e.removed_by}
    for rec in records:
        e = removed.get(rec.content_hash)
        if e is not None:
            raise RecordError(f"this record ({rec.content_hash[:12]}) of partner {e.record.partner!r} was removed on "
                              f"{e.removed_at:%Y-%m-%d %H:%M}Z; the ledger keeps one copy of each record, so add a "
                              "changed one (e.g. a new version)", source=rec.source)
    return kb.ingest_records(records, submitter)


def remove(kb, partner: str, record: str | None = None, reason: str | None = None, submitter: str | None = None):
    """Retract every live record of `partner` (or the one `record` names); return
    (retracted entries, the retraction's IngestReport)."""
    book = read_ledger(kb.ledger)
    if partner not in book.partners():
        raise UnknownName(f"unknown partner {partner!r} (known: {', '.join(book.partners()) or 'none'})")
    if record is not None:
        entry = book.find(record, partner)
        if entry.removed_by:
            raise RecordError(f"record {entry.content_hash[:12]} was removed already, on {entry.removed_at:%Y-%m-%d}",
                              source=partner)
        targets = [entry]
    else:
        targets = [e for e in book.of(partner) if e.removed_by is None]
        if not targets:
            raise RecordError("has no record left to remove", source=f"partner {partner}")
    doc = {"record_type": "partner-retraction", "partner": partner, "records": [e.content_hash for e in targets],
           "provenance": {"tool": TOOL, "host": _host(), "started": datetime.now(timezone.utc).isoformat()}}
    if reason:
        doc["reason"] = reason
    rec = validate_document(doc, f"luma partner remove {partner}", kb.settings.home)
    return targets, kb.ingest_records([rec], submitter or default_submitter())


def _host() -> str:
    return socket.gethostname() or "unknown"
