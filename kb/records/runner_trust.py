"""Runner trust as ledger records: `runner-trust` (this project trusts a runner key) and
`runner-revocation` (it no longer does). Append-only like everything in the ledger: a revoked
key's records stay, and the KB marks the key revoked (luma:revokedAt).

They are statements of the project, not evidence, so their evidence class is vendor-claim (as a
partner retraction's). Only `luma runner keygen|trust|revoke` (and `luma evidence load`) write them: `luma kb ingest`
refuses them in record files (kb/records/loader.py), so a submitted file can never trust the key
that signed it.

A trust may be scoped: `scope` lists the content hashes of the only records the key may
authenticate here, and `purpose` says why (`luma evidence load` trusts the shipped evidence set's
keys for exactly its records, so a record someone else signs with such a key does not ride in).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictStr, model_validator

from luma.kb.trust.attestation import Fingerprint, fingerprint, strict_b64
from luma.kb.records.intervention_params import Hash, Text
from luma.kb.records.machine import Slug
from luma.kb.records.pex_chain import Provenance, StrictModel


class RunnerTrust(StrictModel):
    """This project trusts the runner key `public_key` (named `name`, optionally a partner lab's)."""

    record_type: Literal["runner-trust"]
    evidence_class: Literal["vendor-claim"] = "vendor-claim"
    name: Slug
    public_key: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9+/]{43}=$",
                                           description="Base64 of the raw 32-byte Ed25519 public key.")]
    fingerprint: Fingerprint
    partner: Slug | None = None
    purpose: Text | None = Field(default=None, description="Why the key is trusted, when for one purpose only.")
    scope: Annotated[list[Hash], Field(min_length=1)] | None = Field(
        default=None, description="Content hashes of the only records this key authenticates here (absent: any).")
    provenance: Provenance

    @model_validator(mode="after")
    def _key_matches(self) -> "RunnerTrust":
        try:
            raw = strict_b64(self.public_key, 32)
        except ValueError as exc:
            raise ValueError(f"public_key: {exc} (base64 of the raw 32-byte Ed25519 key)") from None
        if fingerprint(raw) != self.fingerprint:
            raise ValueError(f"fingerprint: does not match public_key (its fingerprint is {fingerprint(raw)})")
        return self

    @property
    def key_bytes(self) -> bytes:
        return strict_b64(self.public_key, 32)


class RunnerRevocation(StrictModel):
    """This project no longer trusts the key `fingerprint` (named `name`) from the revocation on."""

    record_type: Literal["runner-revocation"]
    evidence_class: Literal["vendor-claim"] = "vendor-claim"
    fingerprint: Fingerprint
    name: Slug
    reason: Text | None = None
    provenance: Provenance
