"""`reads: records` rules over some records: the record graphs bound with VALUES, a batch at a
time (rules/engine.py `_record_batches`), derive what the whole-KB query derives, in a delta run
and in a full run done batch by batch; a text that does not show its graph variable where the
analysis found it falls back to the named-graph dataset."""

from __future__ import annotations

import threading

import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.rules import engine as engine_module
from luma.rules.analysis import analyse
from luma.rules.engine import Engine
from luma.rules.loader import load_all, parse, render

from luma.settings import Settings
from tests.rules.test_partition import _derived, _runs


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(engine_module, "RECORD_BATCH", 17)
    monkeypatch.setattr(engine_module, "DELTA_BOUND_SHARE", 1.0)  # bound whatever the share of new graphs


def test_batches_of_records_derive_what_the_whole_kb_query_derives(luma_home, runner_key, tmp_path, small_batches):
    mark_bench_project(luma_home)
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 120, signer=runner_key, software_share=0.5)], submitter="t")
        Engine(kb).run()
        whole = _derived(kb)

        batched = Engine(kb)
        batched.batch_full_above = 0  # every full run of a `reads: records` rule goes batch by batch
        report = batched.run(full=True)
        assert (report.new, report.removed) == (0, 0) and _derived(kb) == whole

        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 30, seed=9, signer=runner_key, software_share=0.5)],
                  submitter="t")
        calls = []
        engine = Engine(kb)
        batches = engine._record_batches

        def counted(*args):
            texts = batches(*args)
            calls.append(None if texts is None else list(texts))
            return None if texts is None else iter(calls[-1])

        engine._record_batches = counted
        inc = _runs(engine.run())  # 30 new graphs in batches of 17
        # bound: the qualification rule and unqualified-evidence (several GRAPH blocks); not the others (one)
        assert [len(b) for b in calls if b] == [2, 2]
        assert inc["qualified-boundary"].mode == "delta" and inc["qualified-boundary"].new > 0
        after = _derived(kb)
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0) and _derived(kb) == after

        # More than a quarter of the KB new: the record rules run in full, not as a delta.
        kb.ingest([write_jsonl(tmp_path / "c.jsonl", 100, seed=10, signer=runner_key, software_share=0.5)],
                  submitter="t")
        assert _runs(Engine(kb).run())["qualified-boundary"].mode == "full"


def test_a_delta_split_over_the_workers_derives_what_one_batch_derives(luma_home, runner_key, tmp_path, monkeypatch):
    # 20 new graphs, two workers, batches of at least 5: each bound rule answers in 10-graph halves
    # evaluated at the same time, and the derived graphs are those of a full run.
    monkeypatch.setattr(engine_module, "MIN_SPLIT", 5)
    monkeypatch.setattr(engine_module, "DELTA_BOUND_SHARE", 1.0)
    mark_bench_project(luma_home)
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 100, signer=runner_key, software_share=0.5)], submitter="t")
        Engine(kb).run()
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 20, seed=9, signer=runner_key, software_share=0.5)],
                  submitter="t")
        engine, sizes, threads = Engine(kb), [], set()
        batches, query = engine._record_batches, kb.store.query

        def counted(*args):
            texts = batches(*args)
            sizes.append(None if texts is None else args[3])
            return texts

        def seen(*args, **kwargs):
            threads.add(threading.current_thread().name)
            return query(*args, **kwargs)

        engine._record_batches = counted
        monkeypatch.setattr(kb.store, "query", seen)
        inc = _runs(engine.run(workers=2))
        monkeypatch.setattr(kb.store, "query", query)
        assert [s for s in sizes if s] == [10, 10]
        assert len({t for t in threads if "ThreadPoolExecutor" in t}) >= 3  # the strata's pool and the batches'
        assert inc["qualified-boundary"].mode == "delta" and inc["qualified-boundary"].new > 0
        after = _derived(kb)
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0) and _derived(kb) == after


def test_the_shipped_record_rules_can_be_bound():
    for rule in load_all():
        if rule.reads == "records":
            a = analyse(rule)
            assert a.record_var == "g" and a.record_reads >= 1, rule.id
    assert analyse(next(r for r in load_all() if r.id == "qualified-boundary")).record_reads > 20


RULE = """# id: r
# version: 1
# description: d
# derives: ?x
# reads: records
PREFIX luma: <https://w3id.org/luma/ns#>
CONSTRUCT { ?x a luma:Thing } WHERE {
  # a comment that says GRAPH ?g { is not a pattern
  { SELECT ?g WHERE { GRAPH ?g { ?g luma:recordKind "pex-chain" } } }
  { SELECT ?g ?x WHERE { GRAPH ?g { ?x luma:workload ?w } } }
}
"""


def test_a_text_that_does_not_show_its_graph_variable_where_the_analysis_found_it_is_not_bound(luma_home):
    rule = parse(RULE, "r.rq")
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        engine = Engine(kb, [rule])
        assert engine._record_batches("r", render(rule), ["urn:g1"]) is None
        plain = parse(RULE.replace("  # a comment that says GRAPH ?g { is not a pattern\n", ""), "r.rq")
        engine = Engine(kb, [plain])
        (text,) = list(engine._record_batches("r", render(plain), ["urn:g1", "urn:g2"]))
        assert text.count("GRAPH ?g { VALUES ?g { <urn:g1> <urn:g2> } ") == 2
