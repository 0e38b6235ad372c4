"""The runner keys a project trusts, and signing what its runners emit.

Trust lives in the ledger (append-only): `luma runner keygen|trust` append a `runner-trust`
record, `luma runner revoke` a `runner-revocation` (kb/records/runner_trust.py); `trusted_keys` reads
them back and `signed_by` is the check ingest makes of a measured record. The operations that
append those records open a knowledge base, so they sit above it: `luma.kb.operations.runner_keys`
(keygen, trust, revoke, and `project_signer`, the key a project's runners sign with).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from luma.errors import RecordError, UnknownName
from luma.kb.records.kinds import COMMAND_ONLY
from luma.kb.records.loader import LoadedRecord, record_types, validate_document
from luma.kb.records.runner_trust import RunnerRevocation, RunnerTrust
from luma.kb.store.ledger_fields import as_utc
from luma.kb.trust import attestation as att

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_KINDS = COMMAND_ONLY


@dataclass(frozen=True)
class TrustedKey:
    """A runner key the ledger names: who, since when, and whether it was revoked."""

    name: str
    fingerprint: str
    public_key: bytes
    partner: str | None
    trusted_since: datetime
    revoked_at: datetime | None = None
    reason: str | None = None
    purpose: str | None = None
    scope: frozenset[str] | None = None  # content hashes it may authenticate; None: any record

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def row(self) -> dict:
        """One row of `luma runner list`."""
        return {"name": self.name, "fingerprint": self.fingerprint, "partner": self.partner,
                "since": self.trusted_since.isoformat(), "revoked": self.revoked_at.isoformat() if self.revoked else None,
                "reason": self.reason, "purpose": self.purpose,
                "scope": None if self.scope is None else f"{len(self.scope)} records"}


def trusted_from(t: RunnerTrust, at: datetime) -> TrustedKey:
    """The key a runner-trust record `t`, ingested at `at`, trusts."""
    return TrustedKey(t.name, t.fingerprint, t.key_bytes, t.partner, as_utc(at), purpose=t.purpose,
                      scope=None if t.scope is None else frozenset(t.scope))


def trusted_keys(ledger) -> dict[str, TrustedKey]:
    """Every runner key the ledger has trusted, by fingerprint, revoked ones included (check
    `.revoked`). A key trusted twice keeps its first trust; a revocation is final."""
    # A ledger without its table yet trusts no key; one that cannot be read is a LedgerError.
    rows = ledger.rows_of_kinds(_KINDS, "kind", "payload", "ingested_at")
    keys: dict[str, TrustedKey] = {}
    for kind, payload, at in rows:
        if kind == "runner-trust":
            t = RunnerTrust.model_validate_json(payload)
            keys.setdefault(t.fingerprint, trusted_from(t, at))
        else:
            r = RunnerRevocation.model_validate_json(payload)
            k = keys.get(r.fingerprint)
            if k is not None and not k.revoked:
                keys[r.fingerprint] = replace(k, revoked_at=as_utc(at), reason=r.reason)
    return keys


def signed_by(rec, keys: dict[str, TrustedKey]) -> TrustedKey:
    """The trusted, unrevoked key whose valid signature the LoadedRecord `rec` carries;
    RecordError naming the record and `attestation` otherwise (what ingest asks of `measured`)."""
    block = getattr(rec.model, "attestation", None)
    if block is None:
        raise RecordError("a measured record must be signed by a runner key this project trusts "
                          "(`luma runner sign`)", source=rec.source, field="attestation")
    key = keys.get(block.key)
    if key is None:
        raise RecordError(f"key {block.key} is not trusted by this project (`luma runner trust`)",
                          source=rec.source, field="attestation.key")
    if key.revoked:
        raise RecordError(f"key {block.key} ({key.name}) was revoked on {key.revoked_at:%Y-%m-%d %H:%M}Z",
                          source=rec.source, field="attestation.key")
    if key.scope is not None and rec.content_hash not in key.scope:
        # A key trusted for one purpose (the shipped evidence set) vouches for its listed records only.
        raise RecordError(f"key {block.key} ({key.name}) is trusted here only for {key.purpose or 'listed records'}, "
                          "and this record is not one of them", source=rec.source, field="attestation.key")
    if not att.verify(block, rec.content_hash, key.public_key):
        raise RecordError(f"does not verify with key {block.key} ({key.name}): the record or the signature "
                          "was changed after signing", source=rec.source, field="attestation.signature")
    return key


def find(keys: dict[str, TrustedKey], name: str) -> TrustedKey:
    """The live key called `name` (or with that fingerprint), else the latest revoked one; UnknownName."""
    found = [k for k in keys.values() if name in (k.name, k.fingerprint)]
    if not found:
        raise UnknownName(f"no runner key {name!r} (`luma runner list` names them)")
    return next((k for k in found if not k.revoked), found[-1])


@dataclass(frozen=True)
class Signer:
    """A private key that signs records (`sign` returns the record dict with its attestation)."""

    name: str
    private_key: Ed25519PrivateKey
    home: Path | None = None

    @property
    def fingerprint(self) -> str:
        return att.fingerprint(att.public_bytes(self.private_key))

    def sign(self, doc: dict, source: str = "record") -> dict:
        """`doc` with an `attestation` over its content hash, computed exactly as ingest does
        (validated by the record loader first; an attestation it had is replaced)."""
        unsigned = {k: v for k, v in doc.items() if k != "attestation"}
        rec = self.attest(validate_document(unsigned, source, self.home))
        return {**unsigned, "attestation": rec.model.attestation.model_dump()}

    def attest(self, rec: LoadedRecord) -> LoadedRecord:
        """The validated, unsigned record `rec` signed: its model carries an attestation over its
        content hash, as loading the signed document would give it (a runner that ingests what it
        signs, such as the sprint's Recorder, validates each record once)."""
        if "attestation" not in type(rec.model).model_fields:
            raise RecordError(f"a {rec.kind!r} record carries no attestation (runners sign "
                              f"{', '.join(attested_kinds())})", source=rec.source, field="record_type")
        return rec.with_attestation(att.sign(self.private_key, rec.content_hash))


def attested_kinds() -> list[str]:
    """Record types that carry an attestation (from the registry)."""
    return sorted(k for k, m in record_types().items() if "attestation" in m.model_fields)


def signer(home: Path, name: str) -> Signer:
    """The key NAME of `$LUMA_HOME/keys/` as a Signer."""
    return Signer(name, att.load_private(home, name), home)
