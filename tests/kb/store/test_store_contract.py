"""The quad-store contract (`luma.kb.store.base.QuadStore`), run against every backend.

One suite, every registered backend (`store_url` in conftest.py): in memory, on disk, and an
`oxigraph serve` server spoken to over the SPARQL 1.1 protocols. A backend passes or it is not
a LUMA store.
"""

from __future__ import annotations

import csv
import io
import threading
import time

import pyoxigraph as ox
import pytest

from luma.errors import ConfigError, LumaError, QueryError, QueryTimeout, StoreError
from luma.kb.store import open_store
from luma.kb.store.base import QueryOutput

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"

# Two named graphs; one triple sits in both (the union must not double it); literals with a
# language, a datatype, escapes and non-ASCII text survive every transport.
QUADS = [
    ox.Quad(ox.NamedNode(EX + "s1"), ox.NamedNode(EX + "p"), ox.Literal("one"), ox.NamedNode(EX + "g/1")),
    ox.Quad(ox.NamedNode(EX + "s1"), ox.NamedNode(EX + "p"), ox.Literal("one"), ox.NamedNode(EX + "g/2")),
    ox.Quad(ox.NamedNode(EX + "s2"), ox.NamedNode(EX + "p"), ox.Literal("zwei", language="de"), ox.NamedNode(EX + "g/2")),
    ox.Quad(
        ox.NamedNode(EX + "s2"), ox.NamedNode(EX + "q"), ox.Literal("3", datatype=ox.NamedNode(XSD + "integer")),
        ox.NamedNode(EX + "g/2"),
    ),
    ox.Quad(
        ox.NamedNode(EX + "s3"), ox.NamedNode(EX + "note"), ox.Literal('line\nbreak, "quoted", ünïcødé'),
        ox.NamedNode(EX + "other/1"),
    ),
]
NQUADS = ox.serialize(QUADS, format=ox.RdfFormat.N_QUADS)
UNION_TRIPLES = {ox.Triple(q.subject, q.predicate, q.object) for q in QUADS}


@pytest.fixture
def store(store_url):
    kb = open_store(store_url)
    yield kb
    kb.close()


@pytest.fixture
def loaded(store):
    store.load_nquads(NQUADS)
    return store


def subjects(store, sparql, *, union):
    return sorted(row["s"] for row in store.select(sparql, union=union))


# -- loading and counting --------------------------------------------------------------------


def test_a_fresh_store_is_empty(store):
    assert store.count() == 0
    assert list(store.iter_quads()) == []


def test_bulk_load_in_chunks_then_count(store):
    lines = NQUADS.splitlines(keepends=True)
    store.bulk_load_nquads([b"".join(lines[:2]), b"", b"".join(lines[2:])])
    assert store.count() == len(QUADS)
    assert store.count(graph_prefix=EX + "g/") == 4
    assert store.count(graph_prefix=EX + "other/") == 1
    assert store.count(graph_prefix=EX + "nothing/") == 0


def test_load_nquads_then_count(store):
    store.load_nquads(NQUADS)
    assert store.count() == len(QUADS)
    assert set(store.iter_quads()) == set(QUADS)


def test_loading_the_same_quads_twice_changes_nothing(store):
    store.load_nquads(NQUADS)
    store.load_nquads(NQUADS)
    store.bulk_load_nquads([NQUADS, NQUADS])
    assert store.count() == len(QUADS)
    assert sorted(map(str, store.iter_quads())) == sorted(map(str, QUADS))


def test_blank_nodes_load_as_blank_nodes(store):
    store.load_nquads(b'_:b1 <http://example.org/p> "x" <http://example.org/g/b> .\n')
    (quad,) = store.iter_quads()
    assert isinstance(quad.subject, ox.BlankNode)


# -- queries ---------------------------------------------------------------------------------


def test_select_answers_sparql_json(loaded):
    answer = loaded.query(f"SELECT DISTINCT ?s ?o WHERE {{ ?s <{EX}p> ?o }} ORDER BY ?s ?o")
    assert answer.kind == "select"
    assert "json" in answer.media_type
    doc = answer.json()
    assert doc["head"]["vars"] == ["s", "o"]
    rows = doc["results"]["bindings"]
    assert [(r["s"]["type"], r["s"]["value"]) for r in rows] == [("uri", EX + "s1"), ("uri", EX + "s2")]
    assert rows[1]["o"] == {"type": "literal", "value": "zwei", "xml:lang": "de"}
    # The whole body is standard SPARQL 1.1 JSON: a strict parser reads it completely.
    solutions = ox.parse_query_results(answer.body, format=ox.QueryResultsFormat.JSON)
    assert len(list(solutions)) == 2


def test_select_convenience_gives_lexical_values(loaded):
    rows = loaded.select(f"SELECT ?o WHERE {{ <{EX}s2> <{EX}q> ?o }}")
    assert rows == [{"o": "3"}]


def test_select_as_csv_has_a_header(loaded):
    answer = loaded.query(f"SELECT DISTINCT ?s ?o WHERE {{ ?s <{EX}p> ?o }} ORDER BY ?s", results="csv")
    assert answer.kind == "select"
    assert "text/csv" in answer.media_type
    rows = list(csv.reader(io.StringIO(answer.body.decode())))
    assert rows[0] == ["s", "o"]
    assert [r[0] for r in rows[1:]] == [EX + "s1", EX + "s2"]


@pytest.mark.parametrize("results", ["json", "xml", "tsv", "csv"])
def test_ask_is_an_ask_in_every_results_format(loaded, results):
    assert loaded.query(f"ASK {{ <{EX}s1> ?p ?o }}", results=results).kind == "ask"


def test_ask_answers_a_boolean(loaded):
    assert loaded.query(f"ASK {{ <{EX}s1> ?p ?o }}").json() == {"head": {}, "boolean": True}
    assert loaded.query(f"ASK {{ <{EX}nobody> ?p ?o }}").json()["boolean"] is False


def test_construct_answers_ntriples(loaded):
    answer = loaded.query(f"CONSTRUCT {{ ?s <{EX}seen> ?o }} WHERE {{ ?s <{EX}p> ?o }}")
    assert answer.kind == "graph"
    assert answer.media_type == "application/n-triples"
    triples = set(ox.parse(answer.body, format=ox.RdfFormat.N_TRIPLES))
    assert {(t.subject.value, t.object.value) for t in triples} == {(EX + "s1", "one"), (EX + "s2", "zwei")}


def test_construct_to_file_writes_the_answer_as_ntriples(loaded, tmp_path):
    """What a full rule run reads its answer from (rules/quad_buckets.py): the same triples as the
    answer in memory, and scoped by a named-graph dataset where asked."""
    query = f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}"
    loaded.construct_to_file(query, tmp_path / "a.nt", union=False)
    assert _spo((tmp_path / "a.nt").read_bytes()) == {(t.subject, t.predicate, t.object) for t in UNION_TRIPLES}
    loaded.construct_to_file(query, tmp_path / "b.nt", union=False, named_graphs=[EX + "g/2"])
    assert _spo((tmp_path / "b.nt").read_bytes()) == {(q.subject, q.predicate, q.object) for q in QUADS
                                                      if q.graph_name.value == EX + "g/2"}


def _spo(ntriples: bytes) -> set:
    return {(t.subject, t.predicate, t.object) for t in ox.parse(ntriples, format=ox.RdfFormat.N_TRIPLES)}


def test_load_nquads_file_adds_a_file_without_reading_it_whole(store, tmp_path):
    path = tmp_path / "q.nq"
    path.write_bytes(NQUADS)
    store.load_nquads_file(path)
    got = store.query("SELECT ?s ?p ?o ?g WHERE { GRAPH ?g { ?s ?p ?o } }", union=False, results="tsv").body
    assert len(got.decode().strip().splitlines()) - 1 == len(QUADS)


def test_union_makes_named_graphs_visible_to_plain_patterns(loaded):
    query = f"SELECT DISTINCT ?s WHERE {{ ?s <{EX}p> ?o }}"
    assert subjects(loaded, query, union=True) == [EX + "s1", EX + "s2"]
    assert subjects(loaded, query, union=False) == []
    assert loaded.query(f"ASK {{ ?s <{EX}p> ?o }}", union=False).json()["boolean"] is False


def test_graph_patterns_see_named_graphs_without_union(loaded):
    rows = loaded.select(f"SELECT ?g ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?o }} }} ORDER BY ?g ?s", union=False)
    assert [(r["g"], r["s"]) for r in rows] == [(EX + "g/1", EX + "s1"), (EX + "g/2", EX + "s1"), (EX + "g/2", EX + "s2")]


def test_a_malformed_query_raises_query_error(loaded):
    with pytest.raises(QueryError):
        loaded.query("SELECT ?s WHERE { ?s ?p }")
    with pytest.raises(QueryError):  # the same through the time-out path
        loaded.query("SELEC ?s WHERE { ?s ?p ?o }", timeout=30)


def test_a_query_with_a_time_out_answers_when_fast(loaded):
    answer = loaded.query(f"ASK {{ <{EX}s1> ?p ?o }}", timeout=30)
    assert answer.json()["boolean"] is True


# ~2,000 x 2,000 joined rows with a filter: about a second here, 20x the time-out below, and
# still short enough that the abandoned evaluation (neither backend can cancel it) ends soon.
SLOW_ROWS = 2000
SLOW_QUERY = f"SELECT (COUNT(*) AS ?n) WHERE {{ ?a <{EX}v> ?x . ?b <{EX}v> ?y . FILTER(?x < ?y) }}"


def test_a_slow_query_times_out(store):
    store.bulk_load_nquads(
        [
            "".join(
                f'<{EX}n{i}> <{EX}v> "{i}"^^<{XSD}integer> <{EX}g/slow> .\n' for i in range(SLOW_ROWS)
            ).encode()
        ]
    )
    started = time.monotonic()
    with pytest.raises(QueryTimeout) as raised:
        store.query(SLOW_QUERY, timeout=0.05)
    waited = time.monotonic() - started
    assert isinstance(raised.value, QueryError)  # callers that handle QueryError handle this too
    assert waited < 10, f"the caller waited {waited:.1f} s for a 0.05 s time-out"
    # Let an embedded store's abandoned worker finish before the store closes.
    for worker in threading.enumerate():
        if worker.name == "luma-query":
            worker.join(120)


# -- updates ---------------------------------------------------------------------------------


def test_insert_data_goes_to_the_default_graph(loaded):
    loaded.update(f'INSERT DATA {{ <{EX}kb> <{EX}watermark> "7" }}')
    rows = loaded.select(f"SELECT ?w WHERE {{ <{EX}kb> <{EX}watermark> ?w }}", union=False)
    assert rows == [{"w": "7"}]
    # Named graphs only: the default graph holds bookkeeping, not facts.
    assert loaded.count() == len(QUADS)
    assert set(loaded.iter_quads()) == set(QUADS)
    assert all(not isinstance(q.graph_name, ox.DefaultGraph) for q in loaded.iter_quads())


def test_insert_into_a_named_graph_and_delete_where(loaded):
    loaded.update(f'INSERT DATA {{ GRAPH <{EX}g/3> {{ <{EX}s4> <{EX}p> "four" }} }}')
    assert loaded.count() == len(QUADS) + 1
    loaded.update(f"DELETE WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?o }} }}")
    assert loaded.count() == 2
    assert {q.predicate.value for q in loaded.iter_quads()} == {EX + "q", EX + "note"}


def test_delete_where_in_the_default_graph(store):
    store.update(f'INSERT DATA {{ <{EX}kb> <{EX}watermark> "1" . <{EX}kb> <{EX}hash> "h" }}')
    store.update(f"DELETE WHERE {{ <{EX}kb> <{EX}watermark> ?w }}")
    rows = store.select("SELECT ?p WHERE { ?s ?p ?o }", union=False)
    assert rows == [{"p": EX + "hash"}]


def test_a_malformed_update_raises_query_error(loaded):
    with pytest.raises(QueryError):
        loaded.update("INSERT DATA { <http://example.org/s> }")
    assert loaded.count() == len(QUADS)


# -- export ----------------------------------------------------------------------------------

PARSE_FORMATS = {
    "nquads": ox.RdfFormat.N_QUADS,
    "trig": ox.RdfFormat.TRIG,
    "jsonld": ox.RdfFormat.JSON_LD,
    "turtle": ox.RdfFormat.TURTLE,
    "ntriples": ox.RdfFormat.N_TRIPLES,
}


@pytest.mark.parametrize("fmt", ["nquads", "trig", "jsonld"])
def test_dump_with_graphs_parses_back_to_the_same_quads(loaded, fmt):
    parsed = list(ox.parse(loaded.dump(fmt), format=PARSE_FORMATS[fmt]))
    assert len(parsed) == len(QUADS)
    assert set(parsed) == set(QUADS)


@pytest.mark.parametrize("fmt", ["turtle", "ntriples"])
def test_dump_without_graphs_gives_the_union_of_the_graphs(loaded, fmt):
    parsed = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(loaded.dump(fmt), format=PARSE_FORMATS[fmt])]
    assert set(parsed) == UNION_TRIPLES  # the same graph; a triple in two graphs may be written twice


def test_sorted_ntriples_dump_is_the_union_without_repeats(loaded):
    lines = loaded.dump("ntriples", sort=True).splitlines(keepends=True)
    assert lines == sorted(set(lines))
    assert len(lines) == len(UNION_TRIPLES)


def test_sorted_nquads_dump_is_sorted_unique_lines(loaded):
    data = loaded.dump("nquads", sort=True)
    lines = data.splitlines(keepends=True)
    assert lines == sorted(set(lines))
    assert len(lines) == len(QUADS)
    assert data == loaded.dump("nquads", sort=True)  # deterministic: a rebuild compares byte for byte


def test_dump_leaves_out_the_default_graph(loaded):
    loaded.update(f'INSERT DATA {{ <{EX}kb> <{EX}watermark> "7" }}')
    assert b"watermark" not in loaded.dump("nquads")
    assert b"watermark" not in loaded.dump("turtle")


def test_dump_of_an_empty_store_is_empty(store):
    assert store.dump("nquads") == b""


def test_dump_in_an_unknown_format_names_the_known_ones(loaded):
    with pytest.raises(LumaError, match="nquads"):
        loaded.dump("rdfxml-ish")


# -- clearing and reopening ------------------------------------------------------------------


def test_clear_empties_named_and_default_graphs(loaded):
    loaded.update(f'INSERT DATA {{ <{EX}kb> <{EX}watermark> "7" }}')
    loaded.clear()
    assert loaded.count() == 0
    assert list(loaded.iter_quads()) == []
    assert loaded.query("ASK { ?s ?p ?o }", union=False).json()["boolean"] is False
    assert loaded.query("ASK { ?s ?p ?o }", union=True).json()["boolean"] is False


def test_persistent_backends_keep_data_across_reopen(store_url):
    if store_url == "memory:":
        pytest.skip("an in-memory store lives as long as its object")
    first = open_store(store_url)
    first.load_nquads(NQUADS)
    first.close()
    second = open_store(store_url)
    try:
        assert second.count() == len(QUADS)
    finally:
        second.close()


# -- the registry and the result wrapper (backend-independent) ------------------------------


@pytest.mark.parametrize("url", ["nosuchscheme:/tmp/kb", "relative/path/without/scheme", ""])
def test_open_store_refuses_an_unknown_scheme(url):
    with pytest.raises(ConfigError, match="oxigraph"):  # the message lists the known schemes
        open_store(url)


def test_a_truncated_json_answer_is_a_store_error():
    with pytest.raises(StoreError):
        QueryOutput("select", "application/sparql-results+json", b'{"head": {"vars": ["s"]}, "results": {"bi').json()
