"""What a record must show at ingest before the KB calls it `measured`.

`measured` is earned, not declared (DESIGN §8, issue 14): a record that claims it is accepted
only when its attestation verifies against a runner key the project trusts and has not revoked
(kb/runners.py), and when it is self-consistent — every trial re-judged from its observations
against the contract with the sprint's own judge, the trial counts, `recovered` and the states
agreeing (kb/consistency.py). Anything else is refused whole, naming the record and the field;
a lab whose key is not trusted submits its records as `vendor-claim`. Records of other classes
pass untouched: they say what they are.

Trials a chain cites by content hash are looked up in the batch first, then the ledger.

`check_before_open` runs the same checks on a validated batch against the ledger alone, before
the KB is opened, so that a refused measured record -- like any record the loader refuses --
never waits for, locks or touches the KB (`luma kb ingest` validates small input that way).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from luma.kb import consistency, runners


class _Trials(Mapping):
    """Pex-trial records by content hash: the batch's so far, then the ledger's (read on demand)."""

    def __init__(self, ledger, context: dict):
        self.ledger, self.context = ledger, context
        self.batch: dict[str, object] = {}
        self._ledger: dict[str, object | None] = {}

    def __getitem__(self, key: str):
        if key in self.batch:
            return self.batch[key]
        if self.ledger is None:  # no ledger yet: nothing cited can be in it
            raise KeyError(key)
        if key not in self._ledger:
            from luma.kb.records.pex_trial import PexTrial

            entries = [e for e in self.ledger.entries([key]) if e.kind == "pex-trial"]
            self._ledger[key] = (PexTrial.model_validate_json(entries[0].payload, context=self.context)
                                 if entries else None)
        if self._ledger[key] is None:
            raise KeyError(key)
        return self._ledger[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.batch)

    def __len__(self) -> int:
        return len(self.batch)


class MeasuredGate:
    """Checks each record of one ingest batch; `check` raises RecordError for a `measured` record
    that has not earned it."""

    def __init__(self, ledger, context: dict):
        self.ledger = ledger  # None: a project without a ledger yet, which trusts no key
        self._keys: dict | None = None if ledger is not None else {}  # read at the first measured record
        self.trials = _Trials(ledger, context)

    def keys(self) -> dict:
        if self._keys is None:
            self._keys = runners.trusted_keys(self.ledger)
        return self._keys

    def check(self, rec) -> None:
        block = getattr(rec.model, "attestation", None)
        if rec.evidence_class == "measured":
            runners.signed_by(rec, self.keys())
            consistency.check_measured(rec, trials_by_hash=self.trials)
        elif block is not None and block.key in self.keys():
            # A vendor-claim may keep a lab's own signature, but one naming a key this project
            # trusts must be that key's: the KB would show the record as attested by it.
            runners.signed_by(rec, self.keys())
        if rec.kind == "pex-trial":
            self.trials.batch[rec.content_hash] = rec.model


def check_before_open(settings, records: list) -> None:
    """RecordError for the first record of the validated batch `records` that ingest's gate
    would refuse, checked against the project's ledger only (read, never created). Records the
    ledger or the batch holds already are skipped, as ingest skips them. Ingest checks again
    under the writer lock: a key may be revoked in between."""
    if not any(r.evidence_class == "measured" or getattr(r.model, "attestation", None) for r in records):
        return
    from luma.kb.dimensions import record_dimensions
    from luma.kb.ledger import Ledger

    url = settings.db_url
    missing = url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file()
    ledger = None if missing else Ledger(url)
    try:
        # A ledger without its table yet holds nothing; one that cannot be read is a LedgerError.
        existing = ledger.existing_hashes((r.content_hash for r in records), missing_ok=True) if ledger else set()
        gate = MeasuredGate(ledger, {"dimensions": record_dimensions(settings.home), "home": settings.home})
        for rec in records:
            if rec.content_hash not in existing:
                existing.add(rec.content_hash)
                gate.check(rec)
    finally:
        if ledger is not None:
            ledger.dispose()
