"""The rule loader and engine: malformed rules refused naming file and line, cycles through
negation refused, parameters, re-runs, and retraction when a record goes away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RuleError
from luma.kb.knowledge_base import KnowledgeBase
from luma.rules.analysis import analyse, strata
from luma.rules.engine import Engine
from luma.rules.loader import load_all, parse, resolve_params
from luma.settings import Settings

HEAD = "# id: {id}\n# version: 1\n# description: test rule\n"
PFX = "PREFIX luma: <https://w3id.org/luma/ns#>\n"


def rule(id_, body, extra=""):
    return parse(HEAD.format(id=id_) + extra + PFX + body, f"{id_}.rq")


@pytest.mark.parametrize("text, message, where", [
    ("# version: 1\n# description: x\nCONSTRUCT {} WHERE {}", "no `# id:` line", "line 1"),
    (HEAD.format(id="x") + "# colour: red\nCONSTRUCT {} WHERE {}", "unknown header key 'colour'", "line 4"),
    (HEAD.format(id="x") + "# param: n = three : integer : a count\nCONSTRUCT {} WHERE {}", "not an integer", "line 4"),
    (HEAD.format(id="x") + "# param: n 3\nCONSTRUCT {} WHERE {}", "a parameter reads", "line 4"),
    (HEAD.format(id="x") + PFX + "CONSTRUCT { ?s ?p ?o } WHERE {\n ?s ?p ?o FILTER(?o > ${limit}) }",
     "unknown parameter ${limit}", "line 6"),
    (HEAD.format(id="Bad_Id") + "CONSTRUCT {} WHERE {}", "lower-case", "id"),
    (HEAD.format(id="x"), "no SPARQL body", None),
])
def test_malformed_rule_files_are_refused_with_file_and_line(text, message, where):
    with pytest.raises(RuleError) as err:
        parse(text, "bad.rq")
    assert message in err.value.message and err.value.source == "bad.rq"
    if where:
        assert err.value.field == where


@pytest.mark.parametrize("body, message", [
    ("SELECT * WHERE { ?s ?p ?o }", "must be a CONSTRUCT"),
    ("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ", "does not parse"),
    ("CONSTRUCT { _:b luma:x ?o } WHERE { ?s luma:y ?o }", "blank node"),
    # Rules never fetch: SERVICE glued to a brace once passed `"SERVICE" in text.upper().split()`.
    ("CONSTRUCT { ?s luma:x ?o } WHERE {SERVICE <http://127.0.0.1:9/q> { ?s luma:y ?o }}", "remote data"),
    ("CONSTRUCT { ?s luma:x ?o } WHERE { service silent <http://x/q> { ?s luma:y ?o } }", "remote data"),
    ('CONSTRUCT { ?s luma:x ?o } WHERE { BIND("\\u0022" AS ?a) SERVICE <http://x/q> { ?s luma:y ?o } '
     'BIND("\\u0022" AS ?b) }', "remote data"),
])
def test_bad_sparql_is_refused(body, message):
    with pytest.raises(RuleError, match=message):
        analyse(rule("x", body))


@pytest.mark.slow
def test_a_rule_file_with_service_is_refused_by_check_and_run(luma_home, tmp_path):
    """A project rule (`$LUMA_HOME/rules/*.rq`) that would call out: `luma rules check` and
    `luma rules run` refuse it in one line, and nothing is sent."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    (luma_home / "rules").mkdir()
    (luma_home / "rules" / "90-fetch.rq").write_text(
        "# id: fetch\n# version: 1\n# description: calls out\nPREFIX luma: <https://w3id.org/luma/ns#>\n"
        f"CONSTRUCT {{ ?s luma:x ?o }} WHERE {{SERVICE <http://127.0.0.1:{port}/q>{{ ?s luma:y ?o }}}}\n")
    runner = CliRunner()
    for args in (["rules", "check"], ["rules", "run"]):
        out = runner.invoke(cli, args)
        assert out.exit_code == 1 and "remote data" in out.output and "Traceback" not in out.output, out.output
    try:
        listener.accept()
        raise AssertionError("a rule reached the network")
    except TimeoutError:
        pass
    finally:
        listener.close()


def test_a_cycle_through_negation_is_refused():
    a = rule("a", "CONSTRUCT { ?s luma:p ?o } WHERE { ?s luma:q ?o FILTER NOT EXISTS { ?s luma:r ?o } }")
    b = rule("b", "CONSTRUCT { ?s luma:r ?o } WHERE { ?s luma:p ?o }")
    with pytest.raises(RuleError, match="cycle through negation or aggregation: .*a.*b|.*b.*a"):
        strata([analyse(a), analyse(b)])


def test_positive_recursion_is_one_stratum_and_negation_orders_strata():
    closure = rule("closure", "CONSTRUCT { ?a luma:reaches ?c } WHERE { ?a luma:reaches ?b . ?b luma:edge ?c }")
    seed = rule("seed", "CONSTRUCT { ?a luma:reaches ?b } WHERE { ?a luma:edge ?b }")
    lonely = rule("lonely", "CONSTRUCT { ?a luma:lonely true } WHERE { ?a luma:edge ?b "
                            "FILTER NOT EXISTS { ?x luma:reaches ?a } }")
    order = [[a.rule.id for a in s] for s in strata([analyse(r) for r in (lonely, closure, seed)])]
    assert order.index(["lonely"]) == len(order) - 1
    assert ["closure"] in order or ["closure", "seed"] in order


def test_unknown_parameter_override_is_refused():
    with pytest.raises(RuleError, match="no rule has a parameter 'min_widgets'"):
        resolve_params(load_all(), {"min_widgets": "3"})


def _chain_kb(home: Path):
    return KnowledgeBase.open(Settings.from_env(home=home))


def test_transitive_fixpoint_rerun_and_retraction(luma_home):
    seed = rule("seed", "CONSTRUCT { ?a luma:reaches ?b } WHERE { ?a luma:edge ?b }")
    # It reads what it and seed derive inside their graphs (a project rule reads derived facts only there).
    closure = rule("closure", "CONSTRUCT { ?a luma:reaches ?c } WHERE { VALUES ?d { "
                              "<https://w3id.org/luma/id/graph/derived/seed> <https://w3id.org/luma/id/graph/derived/closure> } "
                              "GRAPH ?d { ?a luma:reaches ?b } ?b luma:edge ?c }")
    edges = "".join(f"<urn:n{i}> <https://w3id.org/luma/ns#edge> <urn:n{i + 1}> <urn:g:{i}> .\n" for i in range(5))
    with _chain_kb(luma_home) as kb:
        kb.store.load_nquads(edges.encode())
        first = Engine(kb, [seed, closure]).run()
        assert sum(r.facts for r in first.runs) == 15 + 2 * 3  # 5+4+3+2+1 pairs, plus 3 facts per derivation
        again = Engine(kb, [seed, closure]).run()
        assert again.new == 0 and again.removed == 0  # nothing new on unchanged data
        kb.store.update("DROP GRAPH <urn:g:2>")  # the edge n2 -> n3 goes away
        third = Engine(kb, [seed, closure]).run()
        assert third.removed == 15 - 6 and third.new == 0  # 6 pairs remain: 0-1, 1-2, 0-2, 3-4, 4-5, 3-5


@pytest.mark.slow
def test_cli_rules_list_check_run(luma_home):
    runner = CliRunner()
    assert runner.invoke(cli, ["rules", "check"]).exit_code == 0
    listed = json.loads(runner.invoke(cli, ["rules", "list", "--format", "json"]).stdout)
    ids = [r["id"] for r in listed]  # in run order: every rule after the rules it reads from
    assert ids[:2] == ["qualified-boundary", "qualified-optimum"]
    assert ids.index("recurring-binding") < ids.index("tier-remedy")
    assert ids.index("stale-boundary") < ids.index("recurring-binding")
    assert runner.invoke(cli, ["rules", "run"]).exit_code == 1  # no project yet: nothing to derive from
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    out = runner.invoke(cli, ["rules", "run", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert {r["rule"] for r in json.loads(out.stdout)["rules"]} >= {"qualified-boundary", "recurring-binding"}
    bad = runner.invoke(cli, ["rules", "run", "--param", "min_widgets=3"])
    assert bad.exit_code == 2 and "no rule has a parameter 'min_widgets'" in bad.output
    assert runner.invoke(cli, ["rules", "run", "--param", "nonsense"]).exit_code == 2


def test_reads_records_needs_every_pattern_in_a_graph():
    bad = rule("x", "CONSTRUCT { ?s luma:p ?o } WHERE { ?s luma:q ?o }", extra="# reads: records\n")
    with pytest.raises(RuleError, match="needs every pattern inside GRAPH"):
        analyse(bad)
    good = rule("y", "CONSTRUCT { ?s luma:q ?o } WHERE { GRAPH ?g { ?g luma:recordKind \"pex-chain\" . ?s luma:q ?o } }",
                extra="# reads: records\n")
    assert analyse(good).reads == set()  # asserted facts only: not even its own output feeds it


def test_predicate_lists_inside_not_exists_are_understood():
    a = rule("a", "CONSTRUCT { ?s luma:p ?o } WHERE { ?s luma:q ?o FILTER NOT EXISTS { ?s luma:r ?o ; luma:t ?x } }")
    keys = analyse(a).negative
    assert ("pred", "https://w3id.org/luma/ns#r") in keys and ("pred", "https://w3id.org/luma/ns#t") in keys


def test_predicate_keys_carry_the_classes_of_their_subject():
    from luma.rules.analysis import keys_meet

    # reads luma:p of A nodes, writes luma:p of B nodes: not its own input
    typed = analyse(rule("t", "CONSTRUCT { ?y a luma:B ; luma:p ?v } WHERE { ?x a luma:A ; luma:p ?v "
                              "BIND(IRI(CONCAT(STR(?x), '/b')) AS ?y) }"))
    assert not keys_meet(typed.reads, typed.writes)
    # luma:p of any node: it reads what it writes
    untyped = analyse(rule("u", "CONSTRUCT { ?y a luma:B ; luma:p ?v } WHERE { ?x luma:p ?v "
                                "BIND(IRI(CONCAT(STR(?x), '/b')) AS ?y) }"))
    assert keys_meet(untyped.reads, untyped.writes)
    # a write without a class meets a typed read of the same predicate
    bare = analyse(rule("w", "CONSTRUCT { ?x luma:p ?v } WHERE { ?x luma:q ?v }"))
    assert keys_meet(typed.reads, bare.writes)
