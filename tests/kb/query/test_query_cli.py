"""`luma kb query|stats|export` over a real on-disk project: SPARQL results JSON, CSV, ASK and
CONSTRUCT, named queries, refused updates and SERVICE, timeouts (DESIGN §8)."""


import json
import os
import re
import subprocess
import sys

import pyoxigraph as ox
import pytest

from luma.kb.query.named import named_queries
from luma.kb.vocab import ID, LUMA

from tests.kb.projects import (
    assert_one_line_error,
    luma,
    open_kb,
    QUERY_CHAINS,
    QUERY_RECORDS,
    snapshot,
    sparql_json,
)


# -- query ---------------------------------------------------------------------------------------

#: The projected variables of the qualified-boundaries query, as its SELECT line lists them.
QB_VARS = re.findall(r"\?(\w+)", re.search(r"^SELECT (.*)$", named_queries()["qualified-boundaries"].sparql, re.M)[1])


@pytest.mark.slow
def test_query_json_is_sparql_results_json(in_query_home):
    named = sparql_json(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))
    assert named["head"]["vars"] == QB_VARS and named["results"]["bindings"]
    adhoc = sparql_json(luma("kb", "query", "--format", "json",
                              f"SELECT ?g ?kind WHERE {{ ?g a <{LUMA}SourceRecord> ; <{LUMA}recordKind> ?kind }}"))
    assert adhoc["head"]["vars"] == ["g", "kind"] and len(adhoc["results"]["bindings"]) == QUERY_RECORDS
    for name in named_queries():
        sparql_json(luma("kb", "query", "--name", name, "--format", "json"))
    table = luma("kb", "query", "--name", "evidence-by-class")
    assert table.exit_code == 0 and "measured" in table.stdout.lower()


def test_query_csv_has_a_header(in_query_home, tmp_path):
    result = luma("kb", "query", "--name", "qualified-boundaries", "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == ",".join(QB_VARS) and len(lines) > 1
    query = tmp_path / "q.rq"
    query.write_text(f"PREFIX luma: <{LUMA}>\nSELECT (COUNT(*) AS ?records) WHERE {{ ?g a luma:SourceRecord }}\n")
    counted = luma("kb", "query", "--file", query, "--format", "csv")
    assert counted.exit_code == 0 and counted.stdout.splitlines() == ["records", str(QUERY_RECORDS)]


def test_query_ask_and_construct(in_query_home):
    yes = luma("kb", "query", "--format", "json", f"ASK {{ ?c a <{LUMA}BoundaryQualification> }}")
    assert yes.exit_code == 0 and json.loads(yes.stdout)["boolean"] is True
    no = luma("kb", "query", "ASK { ?c a <http://example.org/Nothing> }")
    assert no.exit_code == 0 and no.stdout.strip() == "false"
    graph = luma("kb", "query", f"CONSTRUCT {{ ?c <{LUMA}recovered> ?r }} WHERE {{ ?c <{LUMA}recovered> ?r }}")
    assert graph.exit_code == 0, graph.output
    triples = list(ox.parse(graph.stdout_bytes, format=ox.RdfFormat.N_TRIPLES))
    assert len(triples) == QUERY_CHAINS and all(t.predicate.value == LUMA + "recovered" for t in triples)


def test_a_query_the_checker_cannot_read_is_one_line(in_query_home):
    """rdflib's parser (the check every query passes) fails on a negative decimal in VALUES with a
    TypeError: that is one line, not a traceback, and the typed literal it suggests works."""
    result = luma("kb", "query", "SELECT ?x WHERE { VALUES (?x) { (-3.5) } }")
    assert_one_line_error(result, "cannot read it", "typed literal")
    ok = luma("kb", "query", 'SELECT ?x WHERE { VALUES ?x { "-3.5"^^<http://www.w3.org/2001/XMLSchema#decimal> } }',
              "--format", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["results"]["bindings"][0]["x"]["value"] == "-3.5"


def test_unknown_named_query_lists_the_names(in_query_home):
    result = luma("kb", "query", "--name", "no-such-query")
    assert_one_line_error(result, "no-such-query", code=2)  # a name given on the command line: usage
    assert all(name in result.stderr for name in named_queries())
    listed = luma("kb", "query", "--list", "--format", "json")
    assert {q["name"] for q in json.loads(listed.stdout)} == set(named_queries())


REFUSED = {
    "insert-data": "INSERT DATA { <http://example.org/a> <http://example.org/b> <http://example.org/c> }",
    "delete-where": "DELETE WHERE { ?s ?p ?o }",
    "insert-where": f"PREFIX luma: <{LUMA}>\nINSERT {{ ?c luma:recovered false }} WHERE {{ ?c luma:recovered true }}",
    "load": "LOAD <http://127.0.0.1:9/data.ttl>",
    "load-into": "LOAD SILENT <http://127.0.0.1:9/data.ttl> INTO GRAPH <http://example.org/g>",
    "clear-all": "CLEAR ALL",
    "drop-graph": f"DROP GRAPH <{ID}graph/entities>",
    "drop-all": "DROP ALL",
    "service": "SELECT * WHERE { SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "service-lowercase": "select * where { service silent <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "service-in-subquery": "SELECT * WHERE { { SELECT ?s WHERE { SERVICE <http://127.0.0.1:9/s> { ?s ?p ?o } } } }",
    "service-in-optional": "SELECT * WHERE { ?s ?p ?o OPTIONAL { SERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } } }",
    "service-in-exists": "SELECT * WHERE { ?s ?p ?o FILTER EXISTS { SERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } } }",
    "service-in-union": "SELECT * WHERE { { ?s ?p ?o } UNION { SERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } } }",
    "service-variable": "SELECT * WHERE { BIND(<http://127.0.0.1:9/s> AS ?e) SERVICE ?e { ?s ?q ?z } }",
    "service-in-construct": "CONSTRUCT { ?s ?q ?z } WHERE { SERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } }",
    "service-in-ask": "ASK { GRAPH ?g { SERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } } }",
    "service-unicode-escape": r"SELECT * WHERE { \u0053ERVICE <http://127.0.0.1:9/s> { ?s ?q ?z } }",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_updates_and_service_are_refused(case, seeded, tmp_path):
    assert_one_line_error(luma("kb", "query", REFUSED[case]), "not allowed")
    query = tmp_path / "q.rq"
    query.write_text(REFUSED[case])
    assert_one_line_error(luma("kb", "query", "--file", query, "--format", "json"), str(query), "not allowed")
    assert snapshot() == seeded


def test_service_in_a_comment_or_string_is_not_refused(seeded):
    commented = "# SERVICE <http://127.0.0.1:9/s> { ?s ?p ?o } is not used here\nSELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    result = luma("kb", "query", "--format", "json", commented)
    assert result.exit_code == 0, result.output
    assert int(json.loads(result.stdout)["results"]["bindings"][0]["n"]["value"]) > 0
    quoted = luma("kb", "query", "--format", "csv", 'SELECT ?s WHERE { ?s ?p "SERVICE <http://127.0.0.1:9/s> {}" }')
    assert quoted.exit_code == 0 and quoted.stdout.splitlines() == ["s"]
    assert_one_line_error(luma("kb", "query", "SELECT ?s WHERE { ?s ?p }"), "invalid SPARQL")
    assert snapshot() == seeded


def test_query_timeout(in_query_home):
    cross = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"  # ~10^12 rows
    # A subprocess: the abandoned query keeps running (and keeps the store open) until exit.
    proc = subprocess.run(
        [sys.executable, "-m", "luma.cli.main", "kb", "query", "--timeout", "0.3", cross],
        capture_output=True, text=True, timeout=60, env={**os.environ, "LUMA_HOME": str(in_query_home)},
    )
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "longer than 0.3 s" in proc.stderr


# -- stats, export, load -----------------------------------------------------------------------------


def test_stats_json(in_query_home):
    result = luma("kb", "stats", "--format", "json")
    assert result.exit_code == 0, result.output
    st = json.loads(result.stdout)
    assert st["record_graphs"] == st["ledger_records"] == st["watermark"] == QUERY_RECORDS
    assert st["quads"] > st["record_quads"] > 0
    assert sum(st["by_kind_and_evidence"].values()) == QUERY_RECORDS
    csv_out = luma("kb", "stats", "--format", "csv")
    assert csv_out.exit_code == 0 and csv_out.stdout.splitlines()[0] == "what,value"


@pytest.mark.parametrize("fmt,oxfmt", [("nquads", ox.RdfFormat.N_QUADS), ("trig", ox.RdfFormat.TRIG),
                                       ("turtle", ox.RdfFormat.TURTLE), ("jsonld", ox.RdfFormat.JSON_LD)])
def test_export_parses_back(fmt, oxfmt, in_query_home, tmp_path):
    with open_kb() as kb:
        quads = set(kb.store.iter_quads())
    result = luma("kb", "export", "--format", fmt)
    assert result.exit_code == 0
    parsed = list(ox.parse(result.stdout_bytes, format=oxfmt))
    if fmt == "turtle":
        assert {(q.subject, q.predicate, q.object) for q in parsed} == {(q.subject, q.predicate, q.object) for q in quads}
    else:
        assert set(parsed) == quads
    out = tmp_path / f"kb.{fmt}"
    assert luma("kb", "export", "--format", fmt, "--out", out).exit_code == 0
    assert out.read_bytes() == result.stdout_bytes


