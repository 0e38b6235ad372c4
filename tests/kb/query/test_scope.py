"""Scoping: two partners' records and public facts; each partner's scoped queries see the public
facts and its own records only (after a rules run too, derived graphs included); the owner sees
everything. Removal drops a partner's graphs, and a rebuild leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from luma.errors import QueryError, QueryRefused, UnknownName
from luma.kb.store import pending
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.partners import add, remove
from luma.kb.trust.partners import read_partner_files
from luma.kb.store.partner_graphs import PARTNER_GRAPHS, partner_graph
from luma.kb.query.scope import Scope, ScopedView, scoped_query
from luma.kb.store import open_store
from luma.rules.analysis import analyse
from luma.rules.engine import Engine
from luma.rules.loader import load_all
from luma.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "kb" / "examples"
KV = EXAMPLES / "partner-kv-compression.toml"  # partner kvzip-labs
CXL = EXAMPLES / "partner-cxl-expander.toml"  # partner memfabric
PUBLIC = [EXAMPLES / "embedding-minilm.json", EXAMPLES / "llama70b-h100.json", EXAMPLES / "tiny-decoder.yaml"]
EVERYTHING = "SELECT ?s ?p ?o ?g WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }"


@pytest.fixture(params=["snapshot", "dataset"])
def kb(luma_home, request):
    """Public chains and two partners' records, in the on-disk store; scoped queries run on a
    snapshot or over an explicit dataset (the two ways ScopedView enforces a scope)."""
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as base:
        base.ingest(PUBLIC)
        add(base, read_partner_files([KV, CXL], home=luma_home))
        base.scope_method = request.param  # read by rows() below
        yield base


def rows(kb, sparql: str, scope: str | None) -> list[dict]:
    answer = scoped_query(kb, sparql, scope, method=getattr(kb, "scope_method", "auto")).json()
    return [{k: v["value"] for k, v in r.items()} for r in answer["results"]["bindings"]]


def terms(kb, sparql: str, scope: str | None) -> set[str]:
    return {v for r in rows(kb, sparql, scope) for v in r.values()}


def only_in(kb, partner: str) -> set[str]:
    """IRIs and literals that appear in `partner`'s graphs and in no other graph (what must not leak)."""
    mine, others = set(), set()
    for q in kb.store.iter_quads():
        g = q.graph_name.value
        bucket = mine if g.startswith(f"{PARTNER_GRAPHS}{partner}/") else others
        bucket.update(t.value for t in (q.subject, q.predicate, q.object))
    return mine - others


def partners_seen(kb, scope: str | None) -> set[str]:
    q = "SELECT DISTINCT ?name WHERE { ?r <https://w3id.org/luma/ns#partnerName> ?name }"
    return {r["name"] for r in rows(kb, q, scope)}


def test_each_partner_sees_its_own_records_and_the_public_facts(kb):
    assert partners_seen(kb, None) == partners_seen(kb, "owner") == {"kvzip-labs", "memfabric"}
    assert partners_seen(kb, "partner:kvzip-labs") == {"kvzip-labs"}
    assert partners_seen(kb, "partner:memfabric") == {"memfabric"}
    chains = "SELECT ?c WHERE { ?c a <https://w3id.org/luma/ns#BoundaryQualification> }"
    public = terms(kb, chains, None)
    assert len(public) >= 3
    for scope in ("partner:kvzip-labs", "partner:memfabric"):
        assert terms(kb, chains, scope) == public  # the public facts, whole


@pytest.mark.parametrize("me, other", [("kvzip-labs", "memfabric"), ("memfabric", "kvzip-labs")])
def test_nothing_of_another_partner_reaches_a_scoped_query(kb, me, other):
    secret, mine = only_in(kb, other), only_in(kb, me)
    assert secret and mine
    seen = terms(kb, EVERYTHING, f"partner:{me}")
    assert not seen & secret
    assert mine <= seen
    owner = terms(kb, EVERYTHING, "owner")
    assert secret <= owner and mine <= owner
    # Named graphs listed, asked for by name, and counted: the other partner's do not exist here.
    graphs = terms(kb, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", f"partner:{me}")
    assert not [g for g in graphs if g.startswith(f"{PARTNER_GRAPHS}{other}/")]
    theirs = next(g for g in terms(kb, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", None)
                  if g.startswith(f"{PARTNER_GRAPHS}{other}/"))
    assert rows(kb, f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{theirs}> {{ ?s ?p ?o }} }}", f"partner:{me}") == [{"n": "0"}]


@pytest.mark.parametrize("me, other", [("kvzip-labs", "memfabric"), ("memfabric", "kvzip-labs")])
def test_a_dataset_clause_cannot_reach_another_partner(kb, me, other):
    """FROM / FROM NAMED are honoured (they were ignored), and within the scope only: naming
    another partner's graph reads nothing, whichever way the scope is enforced."""
    from luma.kb.query.safety import check_query

    graphs = terms(kb, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", None)
    theirs = next(g for g in graphs if g.startswith(f"{PARTNER_GRAPHS}{other}/"))
    mine = next(g for g in graphs if g.startswith(f"{PARTNER_GRAPHS}{me}/"))
    method = getattr(kb, "scope_method", "auto")

    def count(sparql, scope):
        answer = scoped_query(kb, check_query(sparql), scope, method=method).json()
        return int(answer["results"]["bindings"][0]["n"]["value"])

    assert count(f"SELECT (COUNT(*) AS ?n) FROM <{theirs}> WHERE {{ ?s ?p ?o }}", "owner") > 0
    assert count(f"SELECT (COUNT(*) AS ?n) FROM <{theirs}> WHERE {{ ?s ?p ?o }}", f"partner:{me}") == 0
    assert count(f"SELECT (COUNT(*) AS ?n) FROM NAMED <{theirs}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
                 f"partner:{me}") == 0
    own = count(f"SELECT (COUNT(*) AS ?n) FROM <{mine}> WHERE {{ ?s ?p ?o }}", f"partner:{me}")
    assert own > 0 and own == count(f"SELECT (COUNT(*) AS ?n) FROM <{mine}> WHERE {{ ?s ?p ?o }}", "owner")
    both = count(f"SELECT (COUNT(*) AS ?n) FROM <{mine}> FROM <{theirs}> WHERE {{ ?s ?p ?o }}", f"partner:{me}")
    assert both == own


@pytest.mark.slow
def test_derived_facts_do_not_carry_another_partners_data(kb):
    report = Engine(kb).run({})
    assert report.new > 0  # the public chains derive something
    derived = "SELECT ?s ?p ?o ?g WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), \"https://w3id.org/luma/id/graph/derived/\")) }"
    assert rows(kb, derived, None)
    for me, other in (("kvzip-labs", "memfabric"), ("memfabric", "kvzip-labs")):
        secret = only_in(kb, other)
        assert not terms(kb, derived, "owner") & (secret | only_in(kb, me))  # no rule read a partner's facts
        assert not terms(kb, EVERYTHING, f"partner:{me}") & secret


@pytest.mark.slow
def test_no_rule_reads_what_only_partner_records_write(kb):
    # Rules run over every graph; if one read a partner-only predicate, its derived (public) facts
    # could carry a partner's figures. Shared terms (record kind, evidence class) are filtered by
    # record kind in the rules and checked by the run above.
    partner_preds = terms(kb, f"SELECT DISTINCT ?p WHERE {{ GRAPH ?g {{ ?s ?p ?o }} "
                              f"FILTER(STRSTARTS(STR(?g), \"{PARTNER_GRAPHS}\")) }}", None)
    other_preds = terms(kb, f"SELECT DISTINCT ?p WHERE {{ GRAPH ?g {{ ?s ?p ?o }} "
                            f"FILTER(!STRSTARTS(STR(?g), \"{PARTNER_GRAPHS}\")) }}", None)
    partner_only = partner_preds - other_preds
    assert "https://w3id.org/luma/ns#parameterKind" in partner_only
    for rule in load_all():
        reads = analyse(rule).reads | analyse(rule).negative
        assert ("any",) not in reads, rule.id
        assert not {k[1] for k in reads if k[0] == "pred"} & partner_only, rule.id
        assert not {k[1] for k in reads if k[0] == "type"} & {
            "https://w3id.org/luma/ns#InterventionParameterRecord", "https://w3id.org/luma/ns#InterventionFigure",
            "https://w3id.org/luma/ns#PartnerRetraction"}, rule.id


def test_named_queries_and_graph_patterns_work_in_a_partner_scope(kb):
    from luma.kb.query.named import get_named_query
    from luma.kb.query.safety import with_prefixes

    q = with_prefixes(get_named_query("evidence-by-class").sparql)
    owner = {(r["evidenceClass"], r["kind"]): int(r["records"]) for r in rows(kb, q, None)}
    mine = {(r["evidenceClass"], r["kind"]): int(r["records"]) for r in rows(kb, q, "partner:memfabric")}
    assert owner[("VendorClaim", "intervention-parameters")] == 2
    assert mine[("VendorClaim", "intervention-parameters")] == 1
    assert {k: v for k, v in mine.items() if k[1] != "intervention-parameters"} == \
        {k: v for k, v in owner.items() if k[1] != "intervention-parameters"}


def test_scope_errors(kb):
    with pytest.raises(UnknownName, match="unknown partner 'nobody'") as err:
        scoped_query(kb, "ASK {}", "partner:nobody")
    # A scoped caller may be any partner: the error never names the others.
    assert "kvzip" not in str(err.value) and "memfabric" not in str(err.value)
    for bad in ("partner:", "partner:Bad Name", "everyone", "partner"):
        with pytest.raises(QueryError, match="unknown scope"):
            Scope.parse(bad)
    with pytest.raises(QueryRefused):
        scoped_query(kb, "SELECT * WHERE { SERVICE <http://example.com/sparql> { ?s ?p ?o } }", "partner:memfabric")


def test_a_single_partner_takes_the_fast_path(luma_home):
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as base:
        add(base, read_partner_files([KV], home=luma_home))
        with ScopedView(base, "partner:kvzip-labs") as view:
            assert view.mode == "union"  # nothing to exclude: the query runs unchanged
        assert partners_seen(base, "partner:kvzip-labs") == {"kvzip-labs"}


def test_a_view_serves_several_queries_and_leaves_no_snapshot_behind(kb, luma_home):
    with ScopedView(kb, "partner:memfabric", kb.scope_method) as view:
        assert view.mode == kb.scope_method
        for _ in range(3):
            assert view.query("ASK { ?s <https://w3id.org/luma/ns#partnerName> \"memfabric\" }").json()["boolean"]
            assert not view.query("ASK { ?s <https://w3id.org/luma/ns#partnerName> \"kvzip-labs\" }").json()["boolean"]
    assert not list(luma_home.glob(".luma-scope-*"))


def test_removal_drops_the_graphs_and_a_rebuild_leaves_them_out(kb):
    kv_graph = partner_graph("kvzip-labs", read_partner_files([KV])[0].content_hash)
    targets, report = remove(kb, "kvzip-labs", reason="evaluation ended")
    assert [t.record.name for t in targets] == ["kvzip"] and len(report.added) == 1
    graphs = terms(kb, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", None)
    assert kv_graph not in graphs
    retraction = [g for g in graphs if g.startswith(f"{PARTNER_GRAPHS}kvzip-labs/")]
    assert len(retraction) == 1  # the retraction itself lives in the partner's namespace
    assert partners_seen(kb, "owner") == {"memfabric", "kvzip-labs"}  # the retraction names its partner
    kb.rebuild()
    assert kv_graph not in terms(kb, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", None)
    book = kb.ledger.count_by()  # nothing deleted: both partner records and the retraction stay
    assert book[("intervention-parameters", "vendor-claim")] == 2
    assert book[("partner-retraction", "vendor-claim")] == 1


def test_a_rolled_back_ingest_drops_partner_graphs_too(luma_home):
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as base:
        rec = read_partner_files([CXL], home=luma_home)[0]
        from datetime import datetime, timezone

        from luma.kb.ingest.projection import LedgerMeta, project

        data = project(rec.model, LedgerMeta(rec.content_hash, "x", datetime.now(timezone.utc))).data()
        base.store.bulk_load_nquads([data])  # loaded speculatively, never committed to the ledger
        marker = pending.PendingIngest(luma_home)
        marker.note([rec.content_hash], [])
        marker.release()  # its process is gone
        assert pending.recover(luma_home, base.store, ledger=base.ledger) == 1
        assert not [g for g in terms(base, "SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", None)
                    if g.startswith(PARTNER_GRAPHS)]


def test_default_graphs_restrict_the_default_graph_on_every_backend(store_url):
    store = open_store(store_url)
    try:
        store.load_nquads(b'<http://x/a> <http://x/p> "A" <http://x/gA> .\n'
                          b'<http://x/b> <http://x/p> "B" <http://x/gB> .\n')
        q = "SELECT ?o WHERE { ?s <http://x/p> ?o }"
        assert sorted(r["o"] for r in store.select(q)) == ["A", "B"]
        body = store.query(q, default_graphs=["http://x/gA"], named_graphs=["http://x/gA"]).json()
        assert [b["o"]["value"] for b in body["results"]["bindings"]] == ["A"]
        body = store.query("SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", default_graphs=["http://x/gA"],
                           named_graphs=["http://x/gA"]).json()
        assert [b["g"]["value"] for b in body["results"]["bindings"]] == ["http://x/gA"]
    finally:
        store.clear()
        store.close()



def test_snapshots_of_killed_processes_are_swept(kb, luma_home):
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = luma_home / f".luma-scope-{dead.pid}-x"
    (stale / "kb").mkdir(parents=True)
    with ScopedView(kb, "partner:memfabric", "snapshot"):
        pass
    assert not stale.exists()


def test_scopes_on_a_sparql_endpoint(luma_home, oxigraph_server):
    open_store(oxigraph_server).clear()
    settings = Settings(home=luma_home, db_url=f"sqlite:///{luma_home / 'ledger.sqlite'}", kb_url=oxigraph_server)
    try:
        with KnowledgeBase.open(settings) as base:
            base.ingest(PUBLIC[:1])
            add(base, read_partner_files([KV, CXL], home=luma_home))
            for scope, seen in ((None, {"kvzip-labs", "memfabric"}), ("partner:memfabric", {"memfabric"}),
                                ("partner:kvzip-labs", {"kvzip-labs"})):
                assert partners_seen(base, scope) == seen
                with ScopedView(base, scope) as view:
                    assert view.mode == ("union" if scope is None else "dataset")
            assert not terms(base, EVERYTHING, "partner:memfabric") & only_in(base, "kvzip-labs")
    finally:
        open_store(oxigraph_server).clear()
