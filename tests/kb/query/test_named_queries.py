"""Named queries read what the rules derived, with the parameters of the run that derived it, and
`luma kb query` pages any answer (--limit/--offset)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import QueryError, RulesNotRun
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import NamedQuery, get_named_query, named_queries
from luma.kb.query.paging import paged
from luma.kb.vocab import ID, LUMA
from luma.rules.derivations import require
from luma.rules.engine import graph_of
from luma.rules.loader import load_all
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "data"
REPETITIONS = (3, 4, 5)


def luma(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _rows(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [{k: v["value"] for k, v in row.items()} for row in json.loads(result.stdout)["results"]["bindings"]]


@pytest.fixture
def chains(luma_home, runner_key, evidence, tmp_path) -> dict[int, str]:
    """Three measured, signed, recovered chains with 3, 4 and 5 repetitions: {repetitions: chain IRI}."""
    base = json.loads((DATA / "valid_chain.json").read_text())
    files = []
    for n in REPETITIONS:
        doc = evidence.with_trials({**base, "repetitions": n, "workload": {**base["workload"], "name": f"reps-{n}"}})
        files.append(evidence.write_signed(runner_key, tmp_path / f"reps-{n}.json", doc))
    with KnowledgeBase.open(Settings.from_env()) as kb:
        added = kb.ingest(files).added
    return {int(Path(r.source).stem.split("-")[1]): ID + "chain/" + r.content_hash[:32] for r in added}


def _derived(rule: str = "qualified-boundary") -> set[str]:
    with KnowledgeBase.open(Settings.from_env()) as kb:
        rows = kb.store.select(f"SELECT ?c WHERE {{ GRAPH <{graph_of(rule)}> {{ ?q <{LUMA}qualifies> ?c }} }}",
                               union=False)
    return {r["c"] for r in rows}


def test_a_named_query_of_derived_facts_says_the_rules_have_not_run(chains):
    for name in ("qualified-boundaries", "recurring-bindings", "hardware-requirements", "counter-chains", "model-vs-pex"):
        result = luma("kb", "query", "--name", name, "--format", "json")
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert result.stderr.count("\n") == 1 and "luma rules run" in result.stderr, result.stderr
    assert luma("kb", "query", "--name", "evidence-by-class").exit_code == 0  # reads the records themselves


@pytest.mark.slow
@pytest.mark.parametrize("min_repetitions", [None, 4, 5])
def test_the_rules_and_the_named_query_agree_on_the_run_parameters(chains, min_repetitions):
    args = ("--param", f"min_repetitions={min_repetitions}") if min_repetitions else ()
    assert luma("rules", "run", *args).exit_code == 0
    needed = min_repetitions or 3  # the rule's default
    expected = {chains[n] for n in REPETITIONS if n >= needed}
    rows = _rows(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))
    assert {r["chain"] for r in rows} == _derived() == expected and len(rows) == len(expected)
    assert {r["minRepetitions"] for r in rows} == {str(needed)}
    assert {int(r["repetitions"]) for r in rows} == {n for n in REPETITIONS if n >= needed}


@pytest.mark.slow
def test_pages_of_a_named_query_hold_every_row_once(chains):
    assert luma("rules", "run").exit_code == 0
    whole = _rows(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))
    pages = [_rows(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json", "--limit", 2,
                        "--offset", offset)) for offset in (0, 2, 4)]
    assert [len(p) for p in pages] == [2, 1, 0]
    assert sorted(r["chain"] for p in pages for r in p) == sorted(r["chain"] for r in whole)
    csv = luma("kb", "query", "--name", "qualified-boundaries", "--format", "csv", "--limit", 1)
    assert csv.exit_code == 0 and len(csv.stdout.splitlines()) == 2  # the header and one row


def test_an_ad_hoc_query_is_paged_at_its_end(chains):
    sparql = "SELECT ?c WHERE { ?c a luma:BoundaryQualification } # ends in a comment"
    rows = _rows(luma("kb", "query", sparql, "--format", "json", "--limit", 2, "--offset", 1))
    everything = _rows(luma("kb", "query", sparql, "--format", "json"))
    assert len(everything) == 3 and len(rows) == 2 and {r["c"] for r in rows} <= {r["c"] for r in everything}
    for query, why in (("SELECT ?c WHERE { ?c a luma:BoundaryQualification } LIMIT 1", "its own LIMIT"),
                       ("ASK { ?c a luma:BoundaryQualification }", "ASK"),
                       ("SELECT ?c WHERE { ?c ?p ?o } VALUES ?c { id:x }", "VALUES")):
        result = luma("kb", "query", query, "--limit", 1)
        assert result.exit_code == 2 and "--limit" in result.stderr and why in result.stderr, result.output
    assert luma("kb", "query", sparql, "--limit", -1).exit_code == 2


@pytest.mark.slow
def test_records_after_the_rules_run_are_noted(chains, runner_key, evidence, tmp_path):
    assert luma("rules", "run").exit_code == 0
    quiet = luma("kb", "query", "--name", "qualified-boundaries", "--format", "json")
    assert quiet.exit_code == 0 and "note:" not in quiet.stderr
    base = json.loads((DATA / "valid_chain.json").read_text())
    doc = evidence.with_trials({**base, "repetitions": 6, "workload": {**base["workload"], "name": "late"}})
    assert luma("kb", "ingest", evidence.write_signed(runner_key, tmp_path / "late.json", doc)).exit_code == 0
    late = luma("kb", "query", "--name", "qualified-boundaries", "--format", "json")
    assert len(_rows(late)) == 3 and "came in after the last `luma rules run`" in late.stderr
    assert luma("rules", "run").exit_code == 0
    caught_up = luma("kb", "query", "--name", "qualified-boundaries", "--format", "json")
    assert len(_rows(caught_up)) == 4 and "note:" not in caught_up.stderr


@pytest.mark.slow
def test_facts_of_another_rule_version_are_not_read_as_this_one(chains):
    assert luma("rules", "run").exit_code == 0
    rules = load_all()
    current = next(r for r in rules if r.id == "qualified-boundary")
    with KnowledgeBase.open(Settings.from_env()) as kb:
        assert require(kb.store, "qualified-boundary", "test", rules).version == current.version
        # As after an upgrade that changed the rule: the KB's facts are the old version's.
        kb.store.update(f"DELETE {{ GRAPH ?g {{ ?a <{LUMA}ruleVersion> ?v }} }} INSERT {{ GRAPH ?g {{ ?a "
                        f"<{LUMA}ruleVersion> {current.version - 1} }} }} WHERE {{ GRAPH ?g {{ ?a <{LUMA}ruleVersion> ?v }} "
                        f"FILTER(?g = <{graph_of('qualified-boundary')}>) }}")
        with pytest.raises(RulesNotRun, match=f"v{current.version - 1} of the rule, not v{current.version}"):
            require(kb.store, "qualified-boundary", "test", rules)
    result = luma("kb", "query", "--name", "qualified-boundaries")
    assert result.exit_code == 1 and "luma rules run" in result.stderr


# -- paging without a KB ------------------------------------------------------------------------------


def test_paged_appends_on_a_line_of_its_own():
    assert paged("SELECT * WHERE { ?s ?p ?o } # end", 10, 5) == "SELECT * WHERE { ?s ?p ?o } # end\nLIMIT 10 OFFSET 5"
    assert paged("SELECT * WHERE { ?s ?p ?o }", None, 3).endswith("\nOFFSET 3")
    assert paged("SELECT * WHERE { ?s ?p ?o }", None, 0) == "SELECT * WHERE { ?s ?p ?o }"
    # A slice inside a subquery is the query's own business; only a top-level one is refused.
    inner = "SELECT ?s WHERE { { SELECT ?s WHERE { ?s ?p ?o } LIMIT 2 } }"
    assert paged(inner, 1).endswith("\nLIMIT 1")
    with pytest.raises(QueryError) as caught:
        paged("SELECT * WHERE { ?s ?p ?o }", -1)
    assert caught.value.field == "limit"


def _select_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("SELECT "))


def test_a_named_query_pages_in_its_page_form_or_at_its_end():
    q = get_named_query("qualified-boundaries")
    assert q.page_template is not None and "${page}" in q.page_template and "${page}" not in q.sparql
    assert _select_line(q.page_template) == _select_line(q.sparql)  # the same columns, in the same order
    assert "LIMIT 100 OFFSET 200 }" in q.text(100, 200) and not q.text(100, 200).rstrip().endswith("OFFSET 200")
    assert q.text() == q.sparql and "qualified-boundaries.page" not in named_queries()
    plain = NamedQuery("x", "", "SELECT * WHERE { ?s ?p ?o }")
    assert plain.text(5) == "SELECT * WHERE { ?s ?p ?o }\nLIMIT 5"
    assert named_queries()["qualified-boundaries"].derived_by == ("qualified-boundary",)
    assert named_queries()["evidence-by-class"].derived_by == ()


@pytest.mark.slow
def test_facts_of_an_unfinished_rules_run_are_not_read(chains):
    assert luma("rules", "run").exit_code == 0
    with KnowledgeBase.open(Settings.from_env()) as kb:  # as a run killed half-way leaves the store
        kb.store.update(f"DELETE WHERE {{ <{ID}rules> <{LUMA}runToken> ?t }}")
    result = luma("kb", "query", "--name", "qualified-boundaries")
    assert result.exit_code == 1 and "did not finish" in result.stderr and result.stderr.count("\n") == 1
    assert luma("rules", "run").exit_code == 0
    assert len(_rows(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))) == 3


#: Named queries whose pages run a page form without the whole answer's ORDER BY, and that order.
UNSORTED_PAGES = {"counter-chains": ("resource", "task", "counterChain"),
                  "stale-boundaries": ("measuredAt", "boundary", "newer")}


# Stale boundaries are rare in synthetic chains (51 of 10,000): that case needs thousands (~40 s).
@pytest.mark.parametrize("name, chains", [("counter-chains", 200),
                                          pytest.param("stale-boundaries", 6000, marks=pytest.mark.slow)])
def test_pages_without_order_hold_every_row_of_the_whole_answer(name, chains, tmp_path, monkeypatch):
    """These named queries page through a page form without ORDER BY (the engine stops at the
    page's end instead of sorting the whole answer); the pages, asked in separate commands, hold
    exactly the rows of the whole answer, which stays sorted."""
    from luma.kb.operations import runner_keys
    from luma.kb.records.synthetic import mark_bench_project, write_jsonl
    from luma.kb.trust import runners
    from luma.rules.engine import Engine

    home = tmp_path / "bench"
    settings = Settings.local(home)
    mark_bench_project(home)  # synthetic chains count as measured only in a marked bench project
    with KnowledgeBase.open(settings) as kb:
        signer = runners.signer(home, runner_keys.keygen(kb, "synthetic-bench").name)
        kb.ingest([write_jsonl(tmp_path / "records.jsonl", chains, signer=signer, software_share=0.3)],
                  submitter="bench")
        Engine(kb).run()
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
        monkeypatch.delenv(var, raising=False)

    order = UNSORTED_PAGES[name]

    def key(row: dict) -> tuple:
        return tuple(row.get(c, "") for c in order) + tuple(sorted(row.items()))

    whole = [key(r) for r in _rows(luma("kb", "query", "--name", name, "--format", "json"))]
    assert len(whole) > 10
    size = len(whole) // 3 + 1
    pages = [[key(r) for r in _rows(luma("kb", "query", "--name", name, "--format", "json", "--limit", size,
                                         "--offset", offset))] for offset in range(0, len(whole), size)]
    assert sorted(row for page in pages for row in page) == sorted(whole)
    assert [r[:3] for r in whole] == sorted(r[:3] for r in whole)  # the whole answer stays sorted
