"""Runner keys in a project: make one (keygen), trust or revoke one, and the key a project's
runners sign with (`project_signer`, made with keygen semantics on first use).

Each appends a `runner-trust` or `runner-revocation` record (kb/records/runner_trust.py) through a
`KnowledgeBase`, so this sits above the front door; reading trust back and checking a record's
signature is `luma.kb.trust.runners`. A key `keygen` makes in a project is trusted by that
project, and the first one becomes the key its runners sign with. `project_signer` gives the
runners (sprint, kernels, machine characterize) that key.
"""

from __future__ import annotations

import re
import socket
from datetime import datetime, timezone

from luma.errors import RecordError, TrustError
from luma.kb.ingest.ingest_report import default_submitter
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.kb.store.ledger import Ledger
from luma.kb.trust import attestation as att
from luma.kb.trust.runners import Signer, TrustedKey, find, signer, trusted_keys

TOOL = "luma runner"


def _provenance() -> dict:
    return {"tool": TOOL, "host": socket.gethostname() or "unknown",
            "started": datetime.now(timezone.utc).replace(microsecond=0).isoformat()}


def _ingest(kb, doc: dict, source: str, submitter: str | None):
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


def scoped_trust(kb, public_key: bytes, name: str, purpose: str, hashes: list[str]):
    """A runner-trust record (validated, not yet ingested) trusting `public_key` as `name` for
    `purpose` and for the records with these content hashes only; None when the project trusts the
    key for all of them already. The caller ingests it in the same batch as those records (all or
    nothing). TrustError: the key was revoked here, is trusted for other records only, or its name
    is a live key's."""
    fp = att.fingerprint(public_key)
    keys = trusted_keys(kb.ledger)
    known = keys.get(fp)
    if known is not None:
        if known.revoked:
            raise TrustError(f"runner key {fp} ({known.name}) was revoked here on {known.revoked_at:%Y-%m-%d %H:%M}Z; "
                             f"its records are not loaded for {purpose}", source=f"runner {name}")
        if known.scope is not None and not set(hashes) <= known.scope:
            raise TrustError(f"runner key {fp} ({known.name}) is trusted here for {known.purpose or 'other records'} "
                             f"only, not for {len(set(hashes) - known.scope)} of these records",
                             source=f"runner {name}")
        return None
    if any(k.name == name and not k.revoked for k in keys.values()):
        raise TrustError(f"a trusted key is called {name!r} already (a different key)", source=f"runner {name}")
    doc = {"record_type": "runner-trust", "name": att.check_name(name), "public_key": att.public_key_text(public_key),
           "fingerprint": fp, "purpose": purpose, "scope": sorted(set(hashes)), "provenance": _provenance()}
    return validate_document(doc, f"trust {name} for {purpose}", kb.settings.home)


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
    text = re.sub(r"[^a-z0-9._-]+", "-", default_submitter().lower()).strip("-._")[:64]
    return text or "runner"


def suggested_name(name: str, fingerprint: str) -> str:
    """The name to trust key `name` under in another project: the key's name (user@host by
    default, the same for every project of that user on that host) and its fingerprint's first
    8 hex digits, so two runners of one host do not collide."""
    return f"{name[:55]}-{fingerprint[:8]}"


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


def project_signer(settings, create: bool = True) -> Signer | None:
    """The key this project's runners sign with: LUMA_RUNNER_KEY's, else the default; made with
    keygen semantics (and trusted) when the project has none and `create` (a runner that records
    into the project), else None. TrustError when that key is not trusted here or was revoked.
    Call it with no KnowledgeBase open in this process."""
    home = settings.home
    name = att.default_key(home, settings.runner_key)
    if name is None and not create:
        return None
    if name is None:
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
        raise TrustError(f"runner key {name!r} is not trusted by this project (`luma runner trust "
                          f"{att.keys_dir(home) / name}.pub --name {name}`)", source="runner key")
    if known.revoked:
        raise TrustError(f"runner key {name!r} was revoked on {known.revoked_at:%Y-%m-%d %H:%M}Z; "
                          "`luma runner keygen --name NEW` makes a new signing key", source="runner key")
    return key


def sign_record(settings, doc: dict) -> dict:
    """`doc` signed with the project's runner key, made on first use (see project_signer)."""
    return project_signer(settings).sign(doc)
