"""Partner graphs in the store: their names, which partner a graph is of, and dropping them.

Every fact of a partner's record -- the record node, its figures, and the descriptions of the
entities it names (intervention, submitter ...) -- lives in that partner's own named graph,
`https://w3id.org/luma/id/graph/partner/<partner>/<content-hash prefix>`; nothing of it goes to
the shared entities graph. Scoped queries (kb/query/scope.py) read them per partner.

Removal: a `partner-retraction` record names records of one partner; `drop_retracted` (run by
every `KnowledgeBase.sync`, so by `luma kb rebuild` too) drops their graphs.
"""

from __future__ import annotations

from collections.abc import Iterable

from luma.kb.records.kinds import PARTNER_KINDS
from luma.kb.vocab import ID, LUMA

#: Prefix of every partner graph; the partner's slug and a slash follow.
PARTNER_GRAPHS = ID + "graph/partner/"
#: Record types whose graphs are a partner's (luma.kb.records.kinds: partner=True).
PARTNER_RECORD_TYPES = PARTNER_KINDS
#: DROP GRAPH operations per SPARQL update (as kb/store/pending.py).
_DROPS_PER_UPDATE = 500


def partner_graph(partner: str, content_hash: str) -> str:
    """The named graph of one partner record."""
    return f"{PARTNER_GRAPHS}{partner}/{content_hash[:32]}"


def partner_of(graph: str) -> str | None:
    """The partner a graph belongs to, or None for a public graph."""
    if not graph.startswith(PARTNER_GRAPHS):
        return None
    return graph[len(PARTNER_GRAPHS):].split("/", 1)[0]


def named_graphs(store) -> list[str]:
    """Every named graph of the store (the bookkeeping default graph is not one)."""
    body = store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", union=False, results="tsv").body
    return [line.strip()[1:-1] for line in body.decode().splitlines()[1:] if line.strip().startswith("<")]


def partner_graph_names(store) -> list[str]:
    """Every partner graph of the store."""
    rows = store.select(f'SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ }} FILTER(STRSTARTS(STR(?g), "{PARTNER_GRAPHS}")) }}',
                        union=False)
    return [r["g"] for r in rows]


def partners_in_store(store) -> set[str]:
    """Partners with at least one graph in the store."""
    return {p for g in partner_graph_names(store) if (p := partner_of(g))}


# -- removal ---------------------------------------------------------------------------------


def retracted_graphs(store) -> list[str]:
    """Graphs that a retraction of their own partner withdraws and that are still in the store.

    Only a partner-retraction record's self-description counts (subject = its own graph, which
    only the projection writes) and only for graphs of the same partner."""
    rows = store.select(
        f"SELECT ?r ?g WHERE {{ GRAPH ?r {{ ?r <{LUMA}recordKind> \"partner-retraction\" ; <{LUMA}retracts> ?g }} "
        f"FILTER EXISTS {{ GRAPH ?g {{ ?s ?p ?o }} }} }}", union=False)
    return sorted({r["g"] for r in rows if partner_of(r["r"]) is not None and partner_of(r["r"]) == partner_of(r["g"])})


def drop_retracted(store) -> int:
    """Drop the graphs of retracted partner records; return how many went. Idempotent and
    read-only when there is nothing to drop (it runs on every open)."""
    graphs = retracted_graphs(store)
    drop_graphs(store, graphs)
    return len(graphs)


def drop_graphs(store, graphs: list[str]) -> None:
    """Remove these named graphs (absent ones are skipped)."""
    for i in range(0, len(graphs), _DROPS_PER_UPDATE):
        store.update(" ;\n".join(f"DROP SILENT GRAPH <{g}>" for g in graphs[i:i + _DROPS_PER_UPDATE]))


def partner_graphs_of(store, hashes: Iterable[str]) -> list[str]:
    """The partner graphs of these record hashes present in the store (a rolled-back ingest
    drops them: their IRIs carry the partner, so they cannot be computed from the hash alone)."""
    wanted = {h[:32] for h in hashes}
    if not wanted:
        return []
    return [g for g in partner_graph_names(store) if g.rsplit("/", 1)[-1] in wanted]
