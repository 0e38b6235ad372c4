"""Conclusions are sealed (DESIGN §8): every query LUMA ships reads each sealed term only inside the
graphs of whoever states it (rules/sealing.py), and the ontology's marks stay equal to what the
shipped rules' templates write. A query that reads a derived class, a runner's revocation or the
resource hierarchy from the union of all graphs fails here, naming the pattern."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.query.named import get_named_query, named_queries
from luma.kb.records.sealed import sealed
from luma.kb.store.embedded import EmbeddedStore
from luma.kb.vocab import LUMA
from luma.rules.loader import load_all, render
from luma.rules.sealing import unsealed_reads, writers
from tests.kb.projects import _build_project, use_home

RULES = load_all()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_reads_sealed_terms_only_inside_their_graphs(rule):
    assert unsealed_reads(render(rule)) == []


@pytest.mark.parametrize("name", sorted(named_queries()))
def test_every_named_query_reads_sealed_terms_only_inside_their_graphs(name):
    assert unsealed_reads(get_named_query(name).sparql) == []


def test_the_rules_marks_are_what_the_rules_templates_write():
    """luma:Rules states exactly the luma: predicates the shipped templates write (and the
    derivation's own luma:rule and luma:ruleVersion, and luma:partitionKey, which the engine adds to
    a partitioned rule's nodes): a new rule predicate is sealed the day it ships, and the load gate
    refuses documents that state it."""
    written = {t for t in writers(RULES).by_term if t.startswith(LUMA)}
    marked = {t for t, who in sealed().by_term.items() if "rules" in who}
    assert {t for t in written if not t[len(LUMA):][0].isupper()} | {LUMA + "rule", LUMA + "ruleVersion", LUMA + "partitionKey"} == \
        {t for t in marked if not t[len(LUMA):][0].isupper()}
    assert {t for t in written if t[len(LUMA):][0].isupper()} <= marked


P = "PREFIX luma: <https://w3id.org/luma/ns#> PREFIX derived: <https://w3id.org/luma/id/graph/derived/> "


@pytest.mark.parametrize("query, flagged", [
    ("SELECT * WHERE { ?h a luma:HardwareRequirement ; luma:confidence ?c }", True),
    ("SELECT * WHERE { GRAPH derived:hardware-requirement { ?h a luma:HardwareRequirement ; luma:confidence ?c } }",
     False),
    ("SELECT * WHERE { GRAPH derived:recurring-binding { ?h a luma:HardwareRequirement } }", True),
    ("SELECT ?h WHERE { GRAPH ?g { ?h a luma:HardwareRequirement } }", True),
    # the caller gets the graph of every row and judges it (luma kb explain)
    ("SELECT ?h ?g WHERE { GRAPH ?g { ?h a luma:HardwareRequirement } }", False),
    ("SELECT ?h WHERE { VALUES ?g { derived:hardware-requirement } GRAPH ?g { ?h luma:confidence ?c } }", False),
    ("SELECT ?h WHERE { VALUES ?g { derived:hardware-requirement <urn:x> } GRAPH ?g { ?h luma:confidence ?c } }",
     True),
    ("SELECT * WHERE { ?r luma:revokedAt ?t }", True),
    ('SELECT ?r WHERE { GRAPH ?t { ?t luma:recordKind "runner-revocation" ; luma:revokes ?r } }', False),
    ("SELECT * WHERE { ?d luma:broader* ?p }", True),
    ("SELECT * WHERE { GRAPH <https://w3id.org/luma/id/graph/ontology> { ?d luma:broader* ?p } }", False),
    ('SELECT ?d WHERE { GRAPH ?g { ?g luma:recordKind "pex-chain" . ?d luma:broader ?p } }', True),
    ("SELECT * WHERE { FILTER NOT EXISTS { ?r luma:revokes ?x } }", True),
    ("SELECT * WHERE { ?x <https://example.org/p> ?y }", False),
])
def test_the_check_itself(query, flagged):
    assert bool(unsealed_reads(P + query)) is flagged


@pytest.fixture(scope="module")
def sent(tmp_path_factory, evidence):
    """Every SPARQL text the reports and `luma kb explain` (of a requirement, a recurring binding and
    a qualified boundary) send to the store, on a benchmark project of 60 signed synthetic chains
    with the rules run."""
    home = tmp_path_factory.mktemp("sealed") / "home"
    _build_project(home, evidence, 60)
    run = CliRunner().invoke
    assert run(cli, ["--home", str(home), "rules", "run"]).exit_code == 0
    texts: list[str] = []
    query, bounded = EmbeddedStore.query, EmbeddedStore.query_bounded
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        mp.setattr(EmbeddedStore, "query", lambda self, sparql, **kw: (texts.append(sparql), query(self, sparql, **kw))[1])
        mp.setattr(EmbeddedStore, "query_bounded",
                   lambda self, sparql, *a, **kw: (texts.append(sparql), bounded(self, sparql, *a, **kw))[1])
        for args in (["report", "design-in", "--out", str(home / "r1")],
                     ["report", "boundary", "--latest", "--out", str(home / "r2")]):
            result = run(cli, ["--home", str(home), *args])
            assert result.exit_code == 0, result.output
        nodes = []
        for name, column in (("hardware-requirements", "requirement"), ("recurring-bindings", None),
                             ("qualified-boundaries", "chain")):
            answer = json.loads(run(cli, ["--home", str(home), "kb", "query", "--name", name, "--format", "json"]).stdout)
            column = column or answer["head"]["vars"][0]
            nodes += [row[column]["value"] for row in answer["results"]["bindings"][:1]]
        assert len(nodes) == 3, nodes
        for iri in nodes:
            result = run(cli, ["--home", str(home), "kb", "explain", iri])
            assert result.exit_code == 0, result.output
    return [t for t in texts if "WHERE" in t.upper()]


def test_every_query_of_the_reports_and_explain_reads_sealed_terms_only_inside_their_graphs(sent):
    assert len(sent) > 10
    problems = {}
    for text in sent:
        found = unsealed_reads(text)
        if found:
            problems[text[:300]] = found
    assert problems == {}


def test_a_project_rule_reading_derived_facts_from_every_graph_is_refused(luma_home):
    """A rule file in $LUMA_HOME/rules is untrusted like a query: one that reads a derived class from
    the union of all graphs is refused before anything runs, naming the file and the pattern."""
    (luma_home / "rules").mkdir(parents=True, exist_ok=True)
    (luma_home / "rules" / "loose.rq").write_text(
        "# id: loose\n# version: 1\n# description: reads requirements from every graph\n# derives: ?x\n"
        "PREFIX luma: <https://w3id.org/luma/ns#>\n"
        "CONSTRUCT { ?x luma:note \"seen\" } WHERE { ?x a luma:HardwareRequirement }\n")
    result = CliRunner().invoke(cli, ["rules", "check"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "loose.rq" in result.output and "HardwareRequirement" in result.output
    (luma_home / "rules" / "loose.rq").write_text(
        "# id: loose\n# version: 1\n# description: reads requirements where they are derived\n# derives: ?x\n"
        "PREFIX luma: <https://w3id.org/luma/ns#>\n"
        "CONSTRUCT { ?x luma:note \"seen\" } WHERE { GRAPH <https://w3id.org/luma/id/graph/derived/hardware-requirement> "
        "{ ?x a luma:HardwareRequirement } }\n")
    assert CliRunner().invoke(cli, ["rules", "check"]).exit_code == 0
