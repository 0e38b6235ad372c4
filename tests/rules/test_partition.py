"""Partitioned rules (rules/partition.py): a run after new or removed upstream facts recomputes
only the keys those touch, and ends exactly where a full recomputation ends; the header and the
graphs such a rule reads are checked; a key that is not a plain IRI or literal never reaches a
query."""

from __future__ import annotations

import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations import runner_keys
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.kb.vocab import record_graph
from luma.rules import partition as part
from luma.rules.analysis import analyse
from luma.rules.engine import Engine, graph_of
from luma.rules.loader import parse, render

from luma.errors import RuleError
from luma.settings import Settings
from tests.conftest import trust_runner
from tests.rules.test_closed_loop import SoftwareChain, _load, _stale

HEAD = """# id: p
# version: 1
# description: d
# derives: ?s
"""
BODY = """PREFIX luma: <https://w3id.org/luma/ns#>
PREFIX derived: <https://w3id.org/luma/id/graph/derived/>
CONSTRUCT { ?s a luma:Thing ; luma:of ?key } WHERE {
  ${partition} GRAPH derived:qualified-boundary { ?q luma:loopKey ?key }
  BIND(IRI(CONCAT("https://w3id.org/luma/id/p/", MD5(?key))) AS ?s)
}
"""


def _derived(kb) -> set[str]:
    out = kb.store.query("CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } "
                         "FILTER(STRSTARTS(STR(?g), \"https://w3id.org/luma/id/graph/derived/\")) }", union=False)
    return set(out.body.decode().splitlines())


def _count(kb, rule_id: str) -> int:
    rows = kb.store.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph_of(rule_id)}> {{ ?s ?p ?o }} }}",
                           union=False)
    return int(rows[0]["n"])


def _runs(report) -> dict:
    return {r.rule: r for r in report.runs}


def _ends_where_full_ends(kb) -> None:
    after = _derived(kb)
    full = Engine(kb).run(full=True)
    assert (full.new, full.removed) == (0, 0)
    assert _derived(kb) == after


def test_new_and_revoked_chains_recompute_only_their_keys_and_end_where_a_full_run_ends(luma_home, runner_key,
                                                                                          tmp_path):
    mark_bench_project(luma_home)
    settings = Settings.from_env(home=luma_home)
    other = trust_runner(settings, name="second-runner")
    with KnowledgeBase.open(settings) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 500, signer=runner_key, software_share=0.9)], submitter="t")
        first = _runs(Engine(kb).run())
        assert first["stale-boundary"].mode == "full" and first["stale-boundary"].derived > 0

        # New chains, some under keys the first ones hold (the synthetic workloads and machines repeat).
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 120, seed=9, signer=other, software_share=0.9)], submitter="t")
        inc = _runs(Engine(kb).run())
        assert inc["qualified-boundary"].mode == "delta"
        assert inc["stale-boundary"].mode == "partition"
        assert inc["stale-boundary"].facts == _count(kb, "stale-boundary")
        _ends_where_full_ends(kb)

        # The second runner's key revoked: its boundaries go (a full run of the qualification rule
        # that says what it removed), and with them the marks they caused and the marks on them.
        runner_keys.revoke(kb, "second-runner", reason="test")
        gone = _runs(Engine(kb).run())
        assert gone["qualified-boundary"].mode == "full" and gone["qualified-boundary"].removed > 0
        assert gone["stale-boundary"].mode == "partition"
        assert gone["stale-boundary"].facts == _count(kb, "stale-boundary")
        _ends_where_full_ends(kb)


def test_a_mark_comes_with_its_newer_chain_and_goes_with_it(luma_home):
    """The closed loop partitioned: a newer chain under other software marks the older boundary
    stale in a partitioned run, and removing the newer chain's record takes the mark away again
    (the key is found in the removed quads, no longer in the store)."""
    old = SoftwareChain("old", "w0", "chat", "arch0", software="k1", at="2026-01-01T00:00:00Z")
    new = SoftwareChain("new", "w0", "chat", "arch0", software="k2", at="2026-02-01T00:00:00Z",
                        binding="compute", unit="http://qudt.org/vocab/unit/FLOP-PER-SEC")
    elsewhere = SoftwareChain("far", "w1", "chat", "arch0", software="k1", at="2026-01-01T00:00:00Z")
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        _load(kb, old.trig() + elsewhere.trig())
        assert _runs(Engine(kb).run())["stale-boundary"].derived == 0
        _load(kb, new.trig())
        run = _runs(Engine(kb).run())["stale-boundary"]
        assert (run.mode, run.derived, run.derived_new) == ("partition", 1, 1)
        assert [r["boundary"] for r in _stale(kb)] == [old.qualified]
        _ends_where_full_ends(kb)

        kb.store.update(f"DROP GRAPH <{record_graph(new.key)}>")
        runs = _runs(Engine(kb).run())
        assert runs["qualified-boundary"].mode == "full" and runs["qualified-boundary"].removed > 0
        run = runs["stale-boundary"]
        assert (run.mode, run.derived, run.derived_removed, run.facts) == ("partition", 0, 1, _count(kb, "stale-boundary"))
        assert _stale(kb) == []
        _ends_where_full_ends(kb)


def test_a_rule_run_alone_reads_no_graph_but_those_it_names(luma_home):
    """The store is given the named derived graphs alone: a boundary stated in another graph is
    not read, in a full run as in a partitioned one."""
    rule = parse(HEAD + "# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n" + BODY, "p.rq")
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.store.load_nquads(b'<urn:q1> <https://w3id.org/luma/ns#loopKey> "k1" '
                             b'<https://w3id.org/luma/id/graph/derived/qualified-boundary> .\n'
                             b'<urn:q2> <https://w3id.org/luma/ns#loopKey> "k2" <urn:elsewhere> .\n')
        run = _runs(Engine(kb, [rule]).run())["p"]
        assert run.derived == 1


def test_render_puts_the_keys_where_the_body_says():
    rule = parse(HEAD + "# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n" + BODY, "p.rq")
    assert "${partition}" not in render(rule) and "VALUES" not in render(rule)
    assert 'VALUES ?key { "a" <urn:b> }' in render(rule, None, ['"a"', "<urn:b>"])
    assert rule.partition.var == "key"


@pytest.mark.parametrize("header, message", [
    ("# partition: ?key\n", "both"),
    ("# partition_keys: ?changed luma:loopKey ?key\n", "both"),
    ("# partition: key\n# partition_keys: ?changed luma:loopKey ?key\n", "one variable"),
    ("# partition: ?key\n# partition_keys: ?changed luma:loopKey ?other\n", "no other variable"),
    ("# partition: ?key\n# partition_keys: ?x luma:loopKey ?key\n", "no other variable"),
    ("# partition: ?nowhere\n# partition_keys: ?changed luma:loopKey ?nowhere\n", "does not occur"),
    ("# reads: records\n# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n", "record graphs"),
])
def test_a_partition_header_is_checked(header, message):
    with pytest.raises(RuleError, match=message):
        parse(HEAD + header + BODY, "p.rq")


def test_a_partitioned_body_must_say_where_the_keys_go():
    with pytest.raises(RuleError, match=r"\$\{partition\}"):
        parse(HEAD + "# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n"
              + BODY.replace("${partition} ", ""), "p.rq")


def test_an_unpartitioned_rule_may_not_use_the_placeholder():
    with pytest.raises(RuleError, match="unknown parameter"):
        parse(HEAD + BODY, "p.rq")


@pytest.mark.parametrize("pattern", [
    "${partition} GRAPH ?g { ?q luma:loopKey ?key }",  # a graph variable
    "${partition} ?q luma:loopKey ?key",  # the default graph
    "${partition} GRAPH <urn:records> { ?q luma:loopKey ?key }",  # not a derived graph
])
def test_a_partitioned_rule_reads_only_derived_graphs_it_names(pattern):
    body = BODY.replace("${partition} GRAPH derived:qualified-boundary { ?q luma:loopKey ?key }", pattern)
    rule = parse(HEAD + "# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n" + body, "p.rq")
    with pytest.raises(RuleError, match="derived graph"):
        analyse(rule)


@pytest.mark.parametrize("tsv, expected", [
    (b'?key\n"abc"\n<urn:x>\n"a\\"b"@en\n"1"^^<http://www.w3.org/2001/XMLSchema#integer>\n',
     ['"abc"', "<urn:x>", '"a\\"b"@en', '"1"^^<http://www.w3.org/2001/XMLSchema#integer>']),
    (b"?key\n_:b0\n", None),  # a blank node cannot be named in VALUES
    (b'?key\n"a" } ; DROP ALL ; #\n', None),  # anything but one term is refused, never spliced
    (b"?key\n<urn:a> <urn:b>\n", None),
    (b"?key\n", []),
])
def test_keys_are_plain_terms_or_the_run_is_a_full_one(tsv, expected):
    assert part.parse_keys(tsv) == expected


def test_removed_quads_give_their_keys_and_blank_subjects_give_up():
    rule = parse(HEAD + "# partition: ?key\n# partition_keys: ?changed luma:loopKey ?key\n" + BODY, "p.rq")
    lines = {b'<urn:q1> <https://w3id.org/luma/ns#loopKey> "k1" <urn:g> .',
             b'<urn:q1> <https://w3id.org/luma/ns#measuredAt> "x" <urn:g> .',
             b'<urn:q2> <https://w3id.org/luma/ns#other> "y" <urn:g> .'}
    subjects = part.changed_subjects(lines)
    assert subjects == {b"<urn:q1>", b"<urn:q2>"}
    assert part.keys_in(rule, subjects, lines) == ['"k1"']
    assert part.changed_subjects({b'_:b1 <urn:p> "v" <urn:g> .'}) is None
