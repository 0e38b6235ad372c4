"""What `luma rules run` counts: a rule's results (the nodes of the class it derives), not the quads
of its graph — which hold several quads per result and the derivation's bookkeeping, so that a
rule that derived nothing used to show "new 7"."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.rules.engine import Engine, graph_of
from luma.rules.loader import parse
from luma.settings import Settings

LUMA = "https://w3id.org/luma/ns#"
PAIR = parse("# id: pair\n# version: 1\n# description: a pair per edge\n# derives: ?p\n"
             "# param: weight = 1 : integer : a number written on each pair\n"
             f"PREFIX luma: <{LUMA}>\n"
             "CONSTRUCT { ?p a luma:Pair ; luma:from ?a ; luma:to ?b ; luma:weight ?w } WHERE { ?a luma:edge ?b "
             "OPTIONAL { ?a luma:edgeNote ?given } BIND(COALESCE(?given, ${weight}) AS ?w) "
             "BIND(IRI(CONCAT(STR(?a), '/pair')) AS ?p) }", "pair.rq")


def _edges(n: int) -> bytes:
    return "".join(f"<urn:n{i}> <{LUMA}edge> <urn:n{i + 1}> <urn:g:{i}> .\n" for i in range(n)).encode()


def test_a_rule_counts_its_results_new_changed_and_removed(luma_home):
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.store.load_nquads(_edges(3))
        first = Engine(kb, [PAIR]).run().runs[0]
        assert (first.derived, first.derived_new, first.derived_changed, first.derived_removed) == (3, 3, 0, 0)
        assert first.facts == 3 * 4 + 4 + 3  # 4 statements a pair, its provenance, the derivation's 4 quads
        kb.store.load_nquads(f"<urn:n0> <{LUMA}edgeNote> \"5\" <urn:g:w> .\n".encode())  # one pair's statement changes
        kb.store.update("DROP GRAPH <urn:g:2>")  # and one pair goes
        second = Engine(kb, [PAIR]).run().runs[0]
        assert (second.derived, second.derived_new, second.derived_changed, second.derived_removed) == (2, 0, 1, 1)
        # Other parameters: every derivation is new, no result is (a new derivation is not a change).
        third = Engine(kb, [PAIR]).run({"weight": "1"}).runs[0]
        assert (third.derived_new, third.derived_changed, third.derived_removed) == (0, 0, 0)
        changed = Engine(kb, [PAIR]).run({"weight": "2"}).runs[0]  # the pair without its own weight changes
        assert (changed.derived, changed.derived_changed) == (2, 1) and changed.new > 0
        skipped = Engine(kb, [PAIR]).run({"weight": "2"}).runs[0]
        assert skipped.mode == "skip" and skipped.derived == 2


def test_an_empty_kb_derives_nothing_and_says_so(luma_home):
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    out = runner.invoke(cli, ["rules", "run", "--format", "json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    by_rule = {r["rule"]: r for r in report["rules"]}
    # The derivation's bookkeeping is in the graph (7 quads for hardware-requirement), not in the counts.
    assert by_rule["hardware-requirement"]["quads"] == 7
    assert all((r["derived"], r["new"], r["changed"], r["removed"]) == (0, 0, 0, 0) for r in report["rules"])
    assert by_rule["hardware-requirement"]["derives"] == "HardwareRequirement"
    assert (report["new"], report["removed"]) == (0, 0) and report["quads_new"] > 0
    table = runner.invoke(cli, ["rules", "run"])
    assert "0 new, 0 changed and 0 removed result(s)" in table.output


@pytest.mark.slow
def test_every_shipped_rule_reports_the_results_its_graph_holds(luma_home, runner_key, tmp_path):
    mark_bench_project(luma_home)  # synthetic chains the project's key signs are measured here only
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 120, signer=runner_key)], submitter="t")
        engine = Engine(kb)
        classes = {a.rule.id: a.result_class for a in engine.analysed}
        assert all(classes.values()), classes  # every shipped rule types what it derives
        first = engine.run()
        for run in first.runs:
            n = kb.store.select(f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ GRAPH <{graph_of(run.rule)}> "
                                f"{{ ?s a <{classes[run.rule]}> }} }}", union=False)[0]["n"]
            assert run.derived == run.derived_new == int(n), run
        assert {r.rule: r.derived for r in first.runs}["qualified-boundary"] > 0
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 30, seed=8, signer=runner_key)], submitter="t")
        inc = Engine(kb).run()
        assert {r.rule: r.mode for r in inc.runs}["qualified-boundary"] == "delta"
        full = Engine(kb).run(full=True)
        assert {r.rule: r.derived for r in inc.runs} == {r.rule: r.derived for r in full.runs}
        assert full.derived_new == full.derived_removed == full.derived_changed == 0
