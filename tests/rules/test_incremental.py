"""Incremental runs: skip what did not change, run `reads: records` rules over new records only,
and always end where a full recomputation ends; a cache the store does not vouch for is ignored.
The synthetic chains are signed by the project's runner key in a project marked as a throwaway
benchmark (`bench_key`), so that the would-be measured ones are measured and qualify."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.errors import RuleError
from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.rules.analysis import analyse
from luma.rules.engine import Engine, graph_of
from luma.rules.loader import parse
from luma.rules.state import StateStore
from luma.settings import Settings

from tests.conftest import _clear_server, trust_runner


def _open(home):
    return KnowledgeBase.open(Settings.from_env(home=home))


def _derived(kb) -> set[str]:
    out = kb.store.query("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } "
                         "FILTER(STRSTARTS(STR(?g), \"https://w3id.org/luma/id/graph/derived/\")) }", union=False)
    return set(out.body.decode().splitlines())


def _a_chain_graph(kb) -> str:
    """The graph of one PEX-chain record in the store."""
    return kb.store.select("SELECT ?g WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#recordKind> \"pex-chain\" } } "
                           "LIMIT 1", union=False)[0]["g"]


def _modes(report) -> dict[str, str]:
    return {r.rule: r.mode for r in report.runs}


@pytest.fixture
def bench_key(luma_home, runner_key):
    """The project's runner key, the project marked as a throwaway benchmark (kb/records/synthetic.py): the
    only kind of project in which synthetic chains it signs are measured."""
    mark_bench_project(luma_home)
    return runner_key


@pytest.mark.slow
def test_new_records_run_as_a_delta_and_end_where_a_full_run_ends(luma_home, bench_key, tmp_path):
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 300, signer=bench_key)], submitter="t")
        first = Engine(kb).run()
        assert set(_modes(first).values()) == {"full"} and first.new > 0
        again = Engine(kb).run()
        assert set(_modes(again).values()) == {"skip"} and (again.new, again.removed) == (0, 0)

        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 60, seed=8, signer=bench_key)], submitter="t")
        inc = Engine(kb).run()
        modes = _modes(inc)
        assert modes["qualified-boundary"] == modes["unqualified-evidence"] == "delta"
        assert modes["recurring-binding"] == "full"
        assert inc.new > 0
        after_delta = _derived(kb)
        # a full recomputation from the store finds nothing to add or take away
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0)
        assert _derived(kb) == after_delta
        counts = {r.rule: r.facts for r in inc.runs}
        assert counts == {r.rule: r.facts for r in full.runs}


@pytest.mark.slow
def test_a_cache_the_store_does_not_vouch_for_is_ignored(luma_home, bench_key, tmp_path):
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 120, signer=bench_key)], submitter="t")
        Engine(kb).run()
        facts = _derived(kb)
        # the token goes (as after a rebuild or another project's run) and a derived fact with it
        kb.store.update("DELETE WHERE { <https://w3id.org/luma/id/rules> ?p ?o }")
        victim = next(line for line in sorted(facts) if "/qualified>" in line.split(" ")[0])
        kb.store.update(f"DELETE DATA {{ GRAPH <{graph_of('qualified-boundary')}> {{ {victim} }} }}")
        again = Engine(kb).run()
        assert set(_modes(again).values()) == {"full"}  # nothing trusted: everything recomputed
        assert (again.new, again.removed) == (1, 0)  # the store's truth was read back, and healed
        assert _derived(kb) == facts


@pytest.mark.slow
def test_a_removed_record_graph_makes_records_rules_run_in_full(luma_home, bench_key, tmp_path):
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 120, signer=bench_key)], submitter="t")
        Engine(kb).run()
        graph = _a_chain_graph(kb)
        kb.store.update(f"DROP GRAPH <{graph}>")
        again = Engine(kb).run()
        assert _modes(again)["qualified-boundary"] == "full"
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0)


@pytest.mark.parametrize("body, message", [
    ("CONSTRUCT { ?s luma:p ?o } WHERE { GRAPH ?g { ?s luma:q ?o } GRAPH ?h { ?o luma:r ?x } }", "one graph variable"),
    ("CONSTRUCT { ?s luma:p ?o } WHERE { GRAPH ?g { ?s luma:q ?o } { SELECT ?o WHERE { GRAPH ?g { ?o luma:r ?x } } } }",
     "without selecting its graph"),
    ("CONSTRUCT { ?s luma:n ?n } WHERE { { SELECT ?s (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s luma:q ?o } } GROUP BY ?s } }",
     "group by the graph variable"),
])
def test_records_rules_must_derive_from_each_record_alone(body, message):
    head = "# id: x\n# version: 1\n# description: x\n# reads: records\nPREFIX luma: <https://w3id.org/luma/ns#>\n"
    with pytest.raises(RuleError, match=message):
        analyse(parse(head + body, "x.rq"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["disk", "server"])
def test_an_incremental_run_ends_where_a_full_run_ends_on_every_store(backend, tmp_path, monkeypatch, request):
    # On `oxigraph serve` a delta run asked for the union default graph and a list of named graphs
    # together, which the server refuses (HTTP 400: "default-graph-uri or named-graph-uri and
    # union-default-graph should not be set at the same time") after the run had cleared its
    # state token, so the next run silently recomputed everything.
    home = tmp_path / "home"
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in ("LUMA_DB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL", "LUMA_RUNNER_KEY"):
        monkeypatch.delenv(var, raising=False)
    if backend == "server":
        base = request.getfixturevalue("oxigraph_server")
        _clear_server(base)
        request.addfinalizer(lambda: _clear_server(base))
        monkeypatch.setenv("LUMA_KB_URL", base)
    else:
        monkeypatch.delenv("LUMA_KB_URL", raising=False)

    key = trust_runner(Settings.from_env(home=home))
    mark_bench_project(home)
    with _open(home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 120, signer=key)], submitter="t")
        Engine(kb).run()
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 40, seed=8, signer=key)], submitter="t")
        inc = Engine(kb).run()
        assert _modes(inc)["qualified-boundary"] == "delta" and inc.new > 0
        after_delta = _derived(kb)
        again = Engine(kb).run()  # the state the delta run left is vouched for: nothing to redo
        assert set(_modes(again).values()) == {"skip"}
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0)
        assert _derived(kb) == after_delta


def _state(kb):
    """The engine's state store of the project (its rules' context predicates too)."""
    engine = Engine(kb)
    return StateStore(kb.store, engine.cache, tuple(p for a in engine.analysed for p in a.rule.context),
                      ledger=kb.ledger)


def test_a_run_learns_its_new_graphs_from_the_ledger_when_the_graph_count_agrees(luma_home, bench_key, tmp_path,
                                                                                   monkeypatch):
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 12, signer=bench_key)], submitter="t")
        Engine(kb).run()
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 5, seed=8, signer=bench_key)], submitter="t")
        state = _state(kb)
        truth = state.asserted_graphs()  # without the last run's state: every graph listed
        prev = state.load()
        assert prev.valid and len(truth - prev.graphs) == 5
        # the graphs are not listed: the ledger's five new records and the count say it all
        monkeypatch.setattr(StateStore, "_listed", lambda self: pytest.fail("listed every graph"))
        assert state.asserted_graphs(prev) == truth
        monkeypatch.undo()
        inc = Engine(kb).run()
        assert _modes(inc)["qualified-boundary"] == "delta" and inc.changes_from == "ledger"
        # the cached list grew by the new graphs alone, and is what a listing finds
        assert {g for g in (state.folder / "graphs.txt").read_text().split("\n") if g} == truth
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0)


@pytest.mark.parametrize("change", ["drop", "foreign"])
def test_a_graph_that_came_or_went_outside_the_ledger_is_found_by_listing(luma_home, bench_key, tmp_path, change):
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 12, signer=bench_key)], submitter="t")
        Engine(kb).run()
        old = _a_chain_graph(kb)
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 3, seed=8, signer=bench_key)], submitter="t")
        if change == "drop":
            kb.store.update(f"DROP GRAPH <{old}>")
        else:
            kb.store.update("INSERT DATA { GRAPH <urn:x:foreign> { <urn:x:s> <urn:x:p> 1 } }")
        state = _state(kb)
        got = state.asserted_graphs(state.load())
        assert got == state.asserted_graphs()
        assert (old in got) == (change == "foreign") and ("urn:x:foreign" in got) == (change == "foreign")
        if change == "drop":
            assert _modes(Engine(kb).run())["qualified-boundary"] == "full"  # a record went: recomputed


def test_a_raw_update_that_swaps_graphs_is_healed_by_a_full_run(luma_home, bench_key, tmp_path):
    # The limit the docs state: a graph dropped and another added outside the ledger between two
    # runs keep the count; like an edit in place, only --full sees them.
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 12, signer=bench_key)], submitter="t")
        Engine(kb).run()
        old = _a_chain_graph(kb)
        kb.store.update(f"DROP GRAPH <{old}> ; INSERT DATA {{ GRAPH <urn:x:foreign> {{ <urn:x:s> <urn:x:p> 1 }} }}")
        Engine(kb).run(full=True)
        after = _derived(kb)
        fresh = Engine(kb).run(full=True)
        assert (fresh.new, fresh.removed) == (0, 0) and _derived(kb) == after
        state = _state(kb)
        assert state.asserted_graphs(state.load()) == state.asserted_graphs()


def test_luma_rules_run_in_its_sandboxed_child_learns_the_new_graphs_from_the_ledger(luma_home, bench_key, tmp_path):
    # The child reaches no database server: the parent reads the ledger's new records for it.
    runner = CliRunner()
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 12, signer=bench_key)], submitter="t")
    first = json.loads(runner.invoke(cli, ["rules", "run", "--format", "json"]).output)
    assert first["changes_from"] == "listing"  # no last run to start from
    with _open(luma_home) as kb:
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 4, seed=8, signer=bench_key)], submitter="t")
    second = json.loads(runner.invoke(cli, ["rules", "run", "--format", "json"]).output)
    assert second["changes_from"] == "ledger"
    assert {r["rule"]: r["how"] for r in second["rules"]}["qualified-boundary"] == "delta"
    full = json.loads(runner.invoke(cli, ["rules", "run", "--full", "--format", "json"]).output)
    assert full["changes_from"] == "listing" and (full["quads_new"], full["quads_removed"]) == (0, 0)
