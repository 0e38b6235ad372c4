"""Check the store against the ledger instead of trusting the watermark.

The watermark says "every ledger record up to id n is in the store"; it is only as true as the
loads behind it. A graph may go between its load and the watermark's advance (another process's
crash recovery once took a live ingest's graphs for leftovers: 10,000 records in the ledger,
5,500 in the KB, nothing ever replayed them), or a load may fail after the ledger committed. So
`KnowledgeBase.sync` asks the store which of the records it is about to vouch for really have
their graph, and loads the missing ones again from the ledger.
"""

from __future__ import annotations

from luma.kb.store.partner_graphs import PARTNER_RECORD_TYPES, partner_graph_names
from luma.kb.vocab import LUMA, record_graph


def missing_records(store, records: list[tuple[str, str]]) -> list[str]:
    """Content hashes among `records` ((hash, kind) pairs) whose graph the store lacks; a partner
    record that a retraction withdrew is not missing."""
    if not records:
        return []
    public = [h for h, kind in records if kind not in PARTNER_RECORD_TYPES]
    present = store.existing_graphs([record_graph(h) for h in public])
    missing = [h for h in public if record_graph(h) not in present]
    partner = [h for h, kind in records if kind in PARTNER_RECORD_TYPES]
    if partner:
        have = {g.rsplit("/", 1)[-1] for g in partner_graph_names(store)} | _retracted(store)
        missing += [h for h in partner if h[:32] not in have]
    return missing


def _retracted(store) -> set[str]:
    """Hash prefixes of partner records a retraction withdrew (their graphs are meant to go)."""
    rows = store.select(f"SELECT DISTINCT ?g WHERE {{ GRAPH ?r {{ ?r <{LUMA}retracts> ?g }} }}", union=False)
    return {r["g"].rsplit("/", 1)[-1] for r in rows}
