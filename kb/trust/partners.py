"""Partner records in the ledger: reading partner files, listing and finding them (adding and
removing open a knowledge base: `luma.kb.operations.partners`).

`luma partner add` validates every file before anything is written (a file over the partner size
limit, a record of another type, another partner than `--partner`, a record that was removed
before: each is one error naming the file and field), then ingests all of them in one batch
(all or nothing, as `luma kb ingest`). The ledger is append-only and has no way to delete, so
`luma partner remove` appends a `partner-retraction` record; the KB drops the retracted records'
graphs (kb/store/partner_graphs.py), and every rebuild drops them again. A removed record cannot come back as
the same bytes: the ledger holds one copy of each content hash; change it (e.g. its version).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from luma.errors import RecordError, UnknownName
from luma.kb.records.input_files import PARTNER_FILE
from luma.kb.records.intervention_params import InterventionParameters, PartnerRetraction
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.kinds import PARTNER_KINDS
from luma.kb.records.loader import read_documents, validate_document
from luma.kb.store.ledger_fields import as_utc

#: Largest partner record file (bytes; kb/records/input_files.py): LUMA_MAX_PARTNER_FILE_BYTES overrides it.
DEFAULT_MAX_PARTNER_FILE_BYTES = PARTNER_FILE.default
_KINDS = PARTNER_KINDS


def read_partner_files(paths: list[Path], partner: str | None = None, home: Path | None = None,
                       limit=PARTNER_FILE) -> list:
    """Validate every intervention-parameters record of `paths` (TOML, YAML, JSON; each within
    `limit`); return the
    LoadedRecords. `partner`: records that name none get it, records naming another are refused.
    RecordError (naming file and field) at the first problem; nothing is written."""
    dims = record_dimensions(home)
    out = []
    for path in paths:
        path = Path(path)
        for label, doc in read_documents(path, limit):
            source = f"{path}: {label}" if label else str(path)
            if hasattr(doc, "parse"):  # a JSON Lines record comes unparsed
                doc = doc.parse()
            if isinstance(doc, dict):
                kind = doc.get("record_type")
                if kind != "intervention-parameters":
                    raise RecordError(f"must be 'intervention-parameters', got {kind!r} (`luma partner add` takes "
                                      "intervention parameter records; `luma kb ingest` the others)",
                                      source=source, field="record_type")
                if partner is not None:
                    named = doc.setdefault("partner", partner)
                    if named != partner:
                        raise RecordError(f"the record names partner {named!r}, not {partner!r}, the partner it is added for",
                                          source=source, field="partner")
            out.append(validate_document(doc, source, home, dims))
    return out


@dataclass
class PartnerEntry:
    """One partner record in the ledger, and whether a retraction withdrew it."""

    content_hash: str
    record: InterventionParameters
    submitter: str
    ingested_at: datetime
    removed_by: str | None = None  # content hash of the retraction
    removed_at: datetime | None = None


@dataclass
class PartnerLedger:
    """Every partner record and retraction of the project's ledger, oldest first."""

    entries: list[PartnerEntry] = field(default_factory=list)
    retractions: list[tuple[str, PartnerRetraction, datetime]] = field(default_factory=list)

    def partners(self) -> list[str]:
        return sorted({e.record.partner for e in self.entries})

    def of(self, partner: str) -> list[PartnerEntry]:
        return [e for e in self.entries if e.record.partner == partner]

    def find(self, key: str, partner: str | None = None) -> PartnerEntry:
        """A record by content-hash prefix (at least 6 hex digits) or name (the latest of that
        name); UnknownName when none or several match."""
        pool = self.of(partner) if partner else self.entries
        found = [e for e in pool if len(key) >= 6 and e.content_hash.startswith(key)]
        if not found:
            named = [e for e in pool if e.record.name == key]
            live = [e for e in named if e.removed_by is None]
            found = (live or named)[-1:]
        if len(found) > 1:
            raise UnknownName(f"record {key!r} is ambiguous: {', '.join(e.content_hash[:12] for e in found)}")
        if not found:
            where = f" of partner {partner!r}" if partner else ""
            raise UnknownName(f"no partner record {key!r}{where} (give a content hash prefix or a record name)")
        return found[0]


def read_ledger(ledger) -> PartnerLedger:
    """The partner side of a Ledger (reads payloads of partner records only). A ledger without its
    table yet has no partners; a ledger that cannot be read is a LedgerError."""
    rows = ledger.rows_of_kinds(_KINDS, "kind", "content_hash", "payload", "submitter", "ingested_at")
    out = PartnerLedger()
    by_hash: dict[str, PartnerEntry] = {}
    for kind, content_hash, payload, submitter, at in rows:
        at = as_utc(at)
        if kind == "intervention-parameters":
            entry = PartnerEntry(content_hash, InterventionParameters.model_validate_json(payload), submitter, at)
            out.entries.append(entry)
            by_hash[content_hash] = entry
        else:
            retraction = PartnerRetraction.model_validate_json(payload)
            out.retractions.append((content_hash, retraction, at))
            for h in retraction.records:
                entry = by_hash.get(h)
                if entry is not None and entry.record.partner == retraction.partner and entry.removed_by is None:
                    entry.removed_by, entry.removed_at = content_hash, at
    return out


def known_partners(ledger) -> set[str]:
    """Partners with at least one record in the ledger (removed ones included)."""
    return set(read_ledger(ledger).partners())


def summary(book: PartnerLedger) -> list[dict]:
    """One row per partner: records live and removed, data classes, integration points, latest."""
    rows = []
    for partner in book.partners():
        entries = book.of(partner)
        live = [e for e in entries if e.removed_by is None]
        rows.append({
            "partner": partner, "records": len(live), "removed": len(entries) - len(live),
            "interventions": ", ".join(sorted({e.record.name for e in live})),
            "data_classes": ", ".join(sorted({d for e in live for d in e.record.data_classes})),
            "integration_points": ", ".join(sorted({e.record.integration_point for e in live})),
            "latest": max(e.ingested_at for e in entries).isoformat(),
        })
    return rows


def record_row(e: PartnerEntry) -> dict:
    """One record as a flat row (the CLI's tables)."""
    r = e.record
    return {"hash": e.content_hash[:12], "partner": r.partner, "name": r.name, "version": r.version,
            "evidence_class": r.evidence_class, "integration_point": r.integration_point,
            "data_classes": ", ".join(r.data_classes), "status": "removed" if e.removed_by else "live",
            "ingested_at": e.ingested_at.isoformat()}


def record_json(e: PartnerEntry) -> dict:
    """A record with its ledger facts and SI figures (`luma partner show --format json`)."""
    return {"content_hash": e.content_hash, "status": "removed" if e.removed_by else "live",
            "removed_by": e.removed_by, "submitter": e.submitter, "ingested_at": e.ingested_at.isoformat(),
            "record": json.loads(e.record.model_dump_json(exclude_none=True)), "figures": e.record.figures()}
