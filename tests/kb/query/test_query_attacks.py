"""The query-attack suite: `luma kb query` against the embedded store and an `oxigraph serve`
endpoint, with a local HTTP listener that must never see a request.

Every SERVICE spelling, position and encoding is refused, as are updates and LOAD; dataset
clauses are honoured without fetching anything; resource exhaustion ends in a one-line error.
The rdflib/Oxigraph escape differential (issue 13) is the first case: it was accepted and run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

KB = "https://w3id.org/luma/id/"


def service_attacks(url: str) -> dict[str, str]:
    """SERVICE in every position and encoding we know of; each must be refused."""
    s = "SELECT * WHERE { "
    escaped_host = url.replace("127", "\\u0031" + "27", 1)
    return {
        "plain": f"{s}SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "lower-case": f"select * where {{ service <{url}> {{ ?s ?p ?o }} }}",
        "mixed-case": f"{s}SeRvIcE <{url}> {{ ?s ?p ?o }} }}",
        "silent": f"{s}SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}",
        "no-whitespace": f"SELECT * WHERE{{SERVICE<{url}>{{?s ?p ?o}}}}",
        "tabs-newlines": f"{s}\n\tSERVICE\x0c\n<{url}>\t{{ ?s ?p ?o }} }}",
        "in-optional": f"{s}?a ?b ?c OPTIONAL {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "in-union": f"{s}{{ ?a ?b ?c }} UNION {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "in-minus": f"{s}?a ?b ?c MINUS {{ SERVICE <{url}> {{ ?a ?p ?o }} }} }}",
        "in-exists": f"{s}?a ?b ?c FILTER EXISTS {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "in-not-exists": f"{s}?a ?b ?c FILTER NOT EXISTS {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "in-subquery": f"{s}{{ SELECT ?s WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }} }}",
        "in-graph": f"{s}GRAPH ?g {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "nested-deep": f"{s}{{ ?a ?b ?c }} UNION {{ OPTIONAL {{ {{ SELECT * WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }} }} }} }}",
        "two-blocks": f"{s}SERVICE <{url}> {{ ?s ?p ?o }} SERVICE <{url}x> {{ ?s ?p ?o }} }}",
        "construct": f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "ask": f"ASK {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "describe": f"DESCRIBE ?s WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "variable-endpoint": f"{s}BIND(<{url}> AS ?ep) SERVICE ?ep {{ ?s ?p ?o }} }}",
        "prefixed-endpoint": f"PREFIX ep: <{url.rsplit('/', 1)[0]}/> {s}SERVICE ep:query {{ ?s ?p ?o }} }}",
        "base-relative": f"BASE <{url.rsplit('/', 1)[0]}/> {s}SERVICE <query> {{ ?s ?p ?o }} }}",
        "escape-quote-differential": f'SELECT ?s ?p ?o WHERE {{ BIND("\\u0022" AS ?a) SERVICE <{url}> '
                                     f'{{ ?s ?p ?o }} BIND("\\u0022" AS ?b) }}',
        "long-escape-differential": f'{s}BIND("\\U00000022" AS ?a) SERVICE <{url}> {{ ?s ?p ?o }} '
                                    f'BIND("\\U00000022" AS ?b) }}',
        "escaped-keyword": f"{s}\\u0053ERVICE <{url}> {{ ?s ?p ?o }} }}",
        "escape-in-iri": f"{s}SERVICE <{escaped_host}> {{ ?s ?p ?o }} }}",
        "after-comment": f"{s}# a comment\nSERVICE <{url}> {{ ?s ?p ?o }} }}",
        "hash-in-string": f'{s}BIND("#" AS ?x) SERVICE <{url}> {{ ?s ?p ?o }} }}',
        "long-string": f'{s}BIND("""a""" AS ?x) SERVICE <{url}> {{ ?s ?p ?o }} }}',
        "long-string-quotes": f'{s}BIND("""a"b""c""" AS ?x) SERVICE <{url}> {{ ?s ?p ?o }} }}',
        "single-quotes": f"{s}BIND('x' AS ?y) BIND('''y''' AS ?z) SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "number-adjacent": f"{s}VALUES ?x {{ 1 }}SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "boolean-adjacent": f"{s}?s ?p true SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "escaped-pname-hash": f"PREFIX ex: <http://example.org/> {s}?s ?p ex:a\\#b . SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "long-s": f"{s}\u017fERVICE <{url}> {{ ?s ?p ?o }} }}",
        # After a term `<` is less-than to Oxigraph; the scan once read `<'>` as an IRI, then a string.
        "less-than-quote": f"{s}BIND(1 AS ?c) FILTER(!(?c<'>')) SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "less-or-equal-quote": f"{s}BIND(1 AS ?c) FILTER(!(?c<='>')) SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "less-than-and-quote": f"{s}BIND(1 AS ?c) FILTER(?c<?c&&'>') SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
    }


UPDATES = {
    "insert-data": "INSERT DATA { <http://x/a> <http://x/p> 1 }",
    "delete-where": "DELETE WHERE { ?s ?p ?o }",
    "load": "LOAD <{url}>",
    "load-silent-into": "LOAD SILENT <{url}> INTO GRAPH <http://x/g>",
    "clear-all": "CLEAR ALL",
    "drop-graph": "DROP GRAPH <http://x/g>",
    "create-graph": "CREATE GRAPH <http://x/g>",
    "two-operations": "INSERT DATA { <http://x/a> <http://x/p> 1 } ; LOAD <{url}>",
    "with-modify": "WITH <http://x/g> DELETE { ?s ?p ?o } INSERT { ?s ?p 1 } WHERE { ?s ?p ?o }",
}


EXAMPLES = Path(__file__).resolve().parents[3] / "kb" / "examples"


@pytest.fixture
def project(store_url, tmp_path, monkeypatch):
    """A project holding the shipped example records, on the embedded store or an endpoint."""
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LUMA_KB_URL", store_url)
    files = sorted(str(p) for p in EXAMPLES.glob("*") if p.suffix in (".json", ".yaml"))
    result = CliRunner().invoke(cli, ["kb", "ingest", *files])
    assert result.exit_code == 0, result.output
    return store_url


#: The embedded on-disk store and an `oxigraph serve` endpoint (an in-memory store lives in one
#: process only, and each CLI call is a new open).
BACKENDS = pytest.mark.parametrize("store_url", ["disk", "server"], indirect=True)


def _query(*args):
    return CliRunner().invoke(cli, ["kb", "query", *args])


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


@BACKENDS
def test_every_service_spelling_is_refused_and_nothing_is_fetched(project, listener):
    url = f"http://127.0.0.1:{listener.server_address[1]}/query"
    attacks = service_attacks(url)
    assert len(attacks) >= 30
    for name, sparql in attacks.items():
        line = _one_line_error(_query("--format", "json", sparql))
        assert "not allowed" in line, (name, line)
    assert listener.seen == []


@BACKENDS
def test_a_forged_check_verdict_lets_no_service_through(project, listener):
    """The query check keeps the parser's verdict per exact text (kb/query/safety.py). A verdict
    planted for an attack's text -- by anyone who can write the project -- skips only the parse:
    the lexical checks still refuse every SERVICE spelling and escape, and nothing is fetched."""
    import json

    from luma.kb.query import safety
    from luma.settings import Settings

    cache = Settings.from_env().home / "cache" / "query-check"
    cache.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{listener.server_address[1]}/query"
    attacks = service_attacks(url)
    for sparql in attacks.values():
        text = safety._prefix_head(sparql) + sparql
        key = safety.hashlib.sha256(json.dumps([safety._checker_digest(), text]).encode()).hexdigest()[:40]
        (cache / f"{key}.json").write_text(json.dumps({"kind": "select", "form": "select", "from_graphs": None,
                                                       "from_named": None}))
    for name, sparql in attacks.items():
        line = _one_line_error(_query("--format", "json", sparql))
        assert "not allowed" in line, (name, line)
    assert listener.seen == []


@pytest.mark.parametrize("store_url", ["disk"], indirect=True)
def test_a_query_asked_again_reads_its_verdict_and_answers_the_same(project, monkeypatch):
    """The second time the same text is asked, the parse is skipped (the verdict is read back)
    and the answer is the same."""
    from luma.kb.query import safety

    sparql = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"
    first = _query("--format", "json", sparql)
    assert first.exit_code == 0, first.output

    def parse_again(*_args, **_kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(safety, "check_query", parse_again)
    again = _query("--format", "json", sparql)
    assert again.exit_code == 0 and again.output == first.output


@BACKENDS
def test_updates_and_load_are_refused(project, listener):
    url = f"http://127.0.0.1:{listener.server_address[1]}/data.ttl"
    for name, sparql in UPDATES.items():
        line = _one_line_error(_query(sparql.replace("{url}", url)))
        assert "not allowed" in line, (name, line)
    assert listener.seen == []


def _count(*args) -> int:
    result = _query("--format", "json", *args)
    assert result.exit_code == 0, result.output
    return int(json.loads(result.stdout)["results"]["bindings"][0]["n"]["value"])


@BACKENDS
def test_dataset_clauses_are_honoured_and_fetch_nothing(project, listener):
    """FROM and FROM NAMED used to be ignored (the union default graph overrode them)."""
    everything = _count("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    graphs = json.loads(_query("--format", "json", "SELECT DISTINCT ?g WHERE { GRAPH ?g { } } ORDER BY ?g").stdout)
    record = next(b["g"]["value"] for b in graphs["results"]["bindings"] if "/record/" in b["g"]["value"])
    one = _count(f"SELECT (COUNT(*) AS ?n) FROM <{record}> WHERE {{ ?s ?p ?o }}")
    assert 0 < one < everything
    url = f"http://127.0.0.1:{listener.server_address[1]}/remote.ttl"
    assert _count(f"SELECT (COUNT(*) AS ?n) FROM <{url}> WHERE {{ ?s ?p ?o }}") == 0
    assert _count("SELECT (COUNT(*) AS ?n) FROM <http://nonexistent/graph> WHERE { ?s ?p ?o }") == 0
    named = _count(f"SELECT (COUNT(*) AS ?n) FROM NAMED <{record}> FROM NAMED <{url}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}")
    assert named == one
    assert _count(f"SELECT (COUNT(*) AS ?n) FROM NAMED <{record}> WHERE {{ ?s ?p ?o }}") == 0  # empty default graph
    assert listener.seen == []


@pytest.mark.parametrize("store_url", ["disk"], indirect=True)
def test_resource_exhaustion_ends_in_one_line(project):
    """A three-way cartesian product with ORDER BY grew to 5 GB in-process; deep nesting ended in
    a RecursionError traceback. Now the query process is stopped at --memory or --timeout."""
    big = "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } ORDER BY ?a ?d ?g"
    line = _one_line_error(_query("--memory", "256MiB", "--timeout", "20", "--format", "csv", big))
    assert "memory" in line or "longer than" in line, line
    deep = "SELECT * WHERE { FILTER(" + "(" * 5000 + "1" + ")" * 5000 + ") }"
    _one_line_error(_query(deep))
    endless = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"  # ~10^14 rows
    line = _one_line_error(_query("--timeout", "2", endless))
    assert "longer than 2 s" in line, line


def test_an_endpoint_under_its_documented_limits_survives_a_runaway_query(tmp_path, monkeypatch, start_oxigraph):
    """`oxigraph serve` cannot stop a running query (its --timeout-s did not, measured), so
    docs/security.md says to run it under a memory limit. Here: RLIMIT_DATA of 1 GiB; the
    runaway query ends the server (which a supervisor restarts), never the machine, and the
    client gets one line."""
    import resource
    import time

    base, proc = start_oxigraph(limit=lambda: resource.setrlimit(resource.RLIMIT_DATA, (2**30, 2**30)))
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LUMA_KB_URL", base)
    files = sorted(str(p) for p in EXAMPLES.glob("*") if p.suffix in (".json", ".yaml"))
    assert CliRunner().invoke(cli, ["kb", "ingest", *files]).exit_code == 0
    start = time.monotonic()
    big = "SELECT * WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } ORDER BY ?a ?d ?g"
    line = _one_line_error(_query("--timeout", "60", "--format", "csv", big))
    assert time.monotonic() - start < 60
    assert "endpoint" in line or "no answer" in line or "broke off" in line, line
    proc.wait(timeout=30)  # it stopped at its limit: the machine's memory is safe


@pytest.mark.parametrize("prestarted", [False, True])
def test_the_sandbox_alone_stops_a_federated_query(tmp_path, listener, prestarted):
    """The second wall: with every text check bypassed, the query process still cannot reach
    the network (kb/store/sandbox.py) -- the listener sees nothing; the same for a child started
    ahead of its query (`prestart`, as `luma kb query` does)."""
    import platform

    import pyoxigraph as ox

    from luma.kb.store.base import QueryLimits
    from luma.kb.store.isolated_query import prestart, run_isolated

    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the seccomp sandbox is for Linux on x86-64 and AArch64")
    store = ox.Store(str(tmp_path / "kb"))
    store.add(ox.Quad(ox.NamedNode("http://x/a"), ox.NamedNode("http://x/p"), ox.Literal("1"), ox.NamedNode("http://x/g")))
    store.flush()
    del store
    url = f"http://127.0.0.1:{listener.server_address[1]}/query"
    for sparql in (f"SELECT ?s WHERE {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}",
                   f'SELECT ?s WHERE {{ BIND("\\u0022" AS ?a) SERVICE <{url}> {{ ?s ?p ?o }} }}'):
        if prestarted:
            prestart()
        try:
            out = run_isolated(tmp_path / "kb", sparql, tmp_path / "spool", QueryLimits(30, 2**30, 2**20))
        except Exception as exc:  # noqa: BLE001 - a failed federated call is fine; a fetch is not
            assert "LEAKED" not in str(exc)
        else:
            assert b"LEAKED" not in out.data()
    assert listener.seen == []


def test_the_listener_would_see_a_request(listener):
    """The control: without the sandbox and the checks, Oxigraph does call out (so the empty
    `seen` lists above mean something)."""
    import pyoxigraph as ox

    url = f"http://127.0.0.1:{listener.server_address[1]}/query"
    before = len(listener.seen)
    rows = list(ox.Store().query(f"SELECT ?s WHERE {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}"))
    assert len(listener.seen) > before
    listener.seen[before:] = []
    assert rows  # the listener's answer came back
