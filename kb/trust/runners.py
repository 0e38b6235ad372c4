"""The runner keys a project trusts, and signing what its runners emit.

Trust lives in the ledger (append-only): `luma runner keygen|trust` append a `runner-trust`
record, `luma runner revoke` a `runner-revocation` (kb/records/runner.py); `trusted_keys` reads
them back. A key `keygen` makes in a project is trusted by that project, and the first one
becomes the key its runners sign with. `project_signer` gives the runners (sprint, kernels,
machine characterize) that key, making one with keygen semantics on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from luma.errors import ConfigError, RecordError, UnknownName
from luma.kb.trust import attestation as att
from luma.kb.records.kinds import COMMAND_ONLY

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

TOOL = "luma runner"
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

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def row(self) -> dict:
        """One row of `luma runner list`."""
        return {"name": self.name, "fingerprint": self.fingerprint, "partner": self.partner,
                "since": self.trusted_since.isoformat(), "revoked": self.revoked_at.isoformat() if self.revoked else None,
                "reason": self.reason}


def trusted_keys(ledger) -> dict[str, TrustedKey]:
    """Every runner key the ledger has trusted, by fingerprint, revoked ones included (check
    `.revoked`). A key trusted twice keeps its first trust; a revocation is final."""
    from luma.kb.store.ledger import as_utc
    from luma.kb.records.runner import RunnerRevocation, RunnerTrust

    # A ledger without its table yet trusts no key; one that cannot be read is a LedgerError.
    rows = ledger.rows_of_kinds(_KINDS, "kind", "payload", "ingested_at")
    keys: dict[str, TrustedKey] = {}
    for kind, payload, at in rows:
        if kind == "runner-trust":
            t = RunnerTrust.model_validate_json(payload)
            keys.setdefault(t.fingerprint, TrustedKey(t.name, t.fingerprint, t.key_bytes, t.partner, as_utc(at)))
        else:
            r = RunnerRevocation.model_validate_json(payload)
            k = keys.get(r.fingerprint)
            if k is not None and not k.revoked:
                keys[r.fingerprint] = TrustedKey(k.name, k.fingerprint, k.public_key, k.partner, k.trusted_since,
                                                 as_utc(at), r.reason)
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


def _provenance() -> dict:
    import socket

    return {"tool": TOOL, "host": socket.gethostname() or "unknown",
            "started": datetime.now(timezone.utc).replace(microsecond=0).isoformat()}


def _ingest(kb, doc: dict, source: str, submitter: str | None):
    from luma.kb.knowledge_base import default_submitter
    from luma.kb.records.loader import validate_document

    rec = validate_document(doc, source, kb.settings.home)
    return kb.ingest_records([rec], submitter or default_submitter())


def trust(kb, public_key: bytes, name: str, partner: str | None = None, submitter: str | None = None) -> TrustedKey:
    """Append a runner-trust record for `public_key` called `name`; return the trusted key.
    Refused: a name a live key has, a key trusted already, a key once revoked (make a new one)."""
    fp = att.fingerprint(public_key)
    keys = trusted_keys(kb.ledger)
    known = keys.get(fp)
    if known is not None:
        when = f"revoked on {known.revoked_at:%Y-%m-%d %H:%M}Z" if known.revoked else "trusted already"
        raise RecordError(f"key {fp} is {when} (as {known.name!r}); a revoked key is never trusted again",
                          source=f"runner {name}")
    if any(k.name == name and not k.revoked for k in keys.values()):
        raise RecordError(f"a trusted key is called {name!r} already (choose another name)", source=f"runner {name}",
                          field="name")
    doc = {"record_type": "runner-trust", "name": att.check_name(name), "public_key": att.public_key_text(public_key),
           "fingerprint": fp, "provenance": _provenance()}
    if partner:
        doc["partner"] = partner
    _ingest(kb, doc, f"luma runner trust {name}", submitter)
    return trusted_keys(kb.ledger)[fp]


def revoke(kb, name: str, reason: str | None = None, submitter: str | None = None) -> TrustedKey:
    """Append a runner-revocation for the live key `name` (or fingerprint); its records stay."""
    key = find(trusted_keys(kb.ledger), name)
    if key.revoked:
        raise RecordError(f"was revoked already, on {key.revoked_at:%Y-%m-%d %H:%M}Z", source=f"runner {name}")
    doc = {"record_type": "runner-revocation", "fingerprint": key.fingerprint, "name": key.name,
           "provenance": _provenance()}
    if reason:
        doc["reason"] = reason
    _ingest(kb, doc, f"luma runner revoke {name}", submitter)
    return trusted_keys(kb.ledger)[key.fingerprint]


def default_name() -> str:
    """user@host as a key name (a slug)."""
    from luma.kb.knowledge_base import default_submitter

    text = re.sub(r"[^a-z0-9._-]+", "-", default_submitter().lower()).strip("-._")[:64]
    return text or "runner"


def keygen(kb, name: str | None = None, submitter: str | None = None) -> TrustedKey:
    """Make a key pair under `$LUMA_HOME/keys/` and trust it in this project (all or nothing:
    the key files go again if the trust record fails). The first key, or the first after the
    signing key was revoked, becomes the key runners sign with."""
    home = kb.settings.home
    name = att.check_name(name or default_name())
    private = att.generate()
    paths = att.write_keypair(home, name, private)
    try:
        key = trust(kb, att.public_bytes(private), name, submitter=submitter)
    except BaseException:
        for path in paths:
            path.unlink(missing_ok=True)
        raise
    current = att.default_key(home)
    live = {k.name for k in trusted_keys(kb.ledger).values() if not k.revoked}
    if current is None or current not in live or current not in att.key_names(home):
        att.set_default(home, name)
    return key


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
        from luma.kb.records.loader import validate_document

        unsigned = {k: v for k, v in doc.items() if k != "attestation"}
        rec = validate_document(unsigned, source, self.home)
        if "attestation" not in type(rec.model).model_fields:
            raise RecordError(f"a {rec.kind!r} record carries no attestation (runners sign "
                              f"{', '.join(attested_kinds())})", source=source, field="record_type")
        return {**unsigned, "attestation": att.sign(self.private_key, rec.content_hash).model_dump()}


def attested_kinds() -> list[str]:
    """Record types that carry an attestation (from the registry)."""
    from luma.kb.records.loader import RECORD_TYPES

    return sorted(k for k, m in RECORD_TYPES.items() if "attestation" in m.model_fields)


def signer(home: Path, name: str) -> Signer:
    """The key NAME of `$LUMA_HOME/keys/` as a Signer."""
    return Signer(name, att.load_private(home, name), home)


def project_signer(settings, create: bool = True) -> Signer | None:
    """The key this project's runners sign with: LUMA_RUNNER_KEY's, else the default; made with
    keygen semantics (and trusted) when the project has none and `create` (a runner that records
    into the project), else None. ConfigError when that key is not trusted here or was revoked.
    Call it with no KnowledgeBase open in this process."""
    from luma.kb.store.ledger import Ledger

    home = settings.home
    name = att.default_key(home, settings.runner_key)
    if name is None and not create:
        return None
    if name is None:
        from luma.kb.knowledge_base import KnowledgeBase

        with KnowledgeBase.open(settings) as kb:  # the writer lock: two first runners make one key
            name = att.default_key(home)
            if name is None:
                name = keygen(kb).name
    key = signer(home, name)
    ledger = Ledger(settings.db_url)
    try:
        known = trusted_keys(ledger).get(key.fingerprint)
    finally:
        ledger.dispose()
    if known is None:
        raise ConfigError(f"runner key {name!r} is not trusted by this project (`luma runner trust "
                          f"{att.keys_dir(home) / name}.pub --name {name}`)", source="runner key")
    if known.revoked:
        raise ConfigError(f"runner key {name!r} was revoked on {known.revoked_at:%Y-%m-%d %H:%M}Z; "
                          "`luma runner keygen --name NEW` makes a new signing key", source="runner key")
    return key


def sign_record(settings, doc: dict) -> dict:
    """`doc` signed with the project's runner key, made on first use (see project_signer)."""
    return project_signer(settings).sign(doc)
