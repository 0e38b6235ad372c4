"""Projection of the runner trust records: the runner node a key's trust creates (named by the key's
fingerprint, where every record it signed meets it) and its revocation."""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest.projection_nodes import TYPE, LedgerMeta, add_activity, projects, runner_iri
from luma.kb.records.runner_trust import RunnerRevocation, RunnerTrust
from luma.kb.vocab import LUMA, PROV


@projects("runner-trust")
def project_runner_trust(w: nq.QuadWriter, rec: RunnerTrust, meta: LedgerMeta, dims) -> None:
    """The runner node: its name, key, partner, and since when the project trusts it (the ledger time)."""
    r = runner_iri(rec.fingerprint)
    w.add(r, TYPE, nq.iri(LUMA + "Runner"))
    w.add(r, PROV + "wasDerivedFrom", nq.iri(w.graph))
    w.add(r, LUMA + "runnerName", nq.string(rec.name))
    w.add(r, LUMA + "keyFingerprint", nq.string(rec.fingerprint))
    w.add(r, LUMA + "publicKey", nq.string(rec.public_key))
    w.add(r, LUMA + "trustedSince", nq.datetime_(meta.ingested_at))
    if rec.partner:
        w.add(r, LUMA + "partner", nq.string(rec.partner))
    p = rec.provenance
    add_activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)


@projects("runner-revocation")
def project_runner_revocation(w: nq.QuadWriter, rec: RunnerRevocation, meta: LedgerMeta, dims) -> None:
    """The revocation (the record node itself) and, on the runner node, when it was revoked."""
    r, runner = w.graph, runner_iri(rec.fingerprint)
    w.add(r, TYPE, nq.iri(LUMA + "RunnerRevocation"))
    w.add(r, LUMA + "revokes", nq.iri(runner))
    w.add(r, LUMA + "runnerName", nq.string(rec.name))
    w.add(r, LUMA + "keyFingerprint", nq.string(rec.fingerprint))
    if rec.reason:
        w.add(r, LUMA + "revocationReason", nq.string(rec.reason))
    w.add(runner, LUMA + "revokedAt", nq.datetime_(meta.ingested_at))
    p = rec.provenance
    add_activity(w, r, p.tool, p.git_revision, p.host, p.started, p.environment)
