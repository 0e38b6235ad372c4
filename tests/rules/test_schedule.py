"""The order ready strata take a worker in, and batches evaluated a few at a time
(rules/schedule.py)."""

from __future__ import annotations

import threading

from hypothesis import given, strategies as st

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.rules.engine import Engine
from luma.rules.schedule import each, priority
from luma.settings import Settings
from tests.rules.test_incremental import _state


def test_strata_others_wait_on_go_first_then_the_longest_then_file_order():
    # 0 <- 1, 0 <- 2 <- 3 <- 4; 5 and 6 are leaves on 0; 5 ran longest last time.
    needs = {0: set(), 1: {0}, 2: {0}, 3: {2}, 4: {3}, 5: {0}, 6: {0}}
    key = priority(needs, {5: 0.9, 6: 0.6, 1: 0.1})
    assert sorted([1, 2, 5, 6], key=key) == [2, 5, 6, 1]  # 2 has two waiting on it; then by time
    assert sorted([4, 3], key=key) == [3, 4]


def test_a_stratum_waited_on_by_many_goes_before_a_long_leaf():
    needs = {0: set(), 1: {0}, 2: {1}, 3: {0}}
    key = priority(needs, {3: 100.0, 1: 0.01})
    assert sorted([1, 3], key=key) == [1, 3]


@given(st.lists(st.integers(), max_size=30), st.integers(min_value=1, max_value=4))
def test_each_answers_every_text_in_order(texts, workers):
    assert list(each(texts, lambda x: x * 3, workers)) == [x * 3 for x in texts]


def test_each_runs_workers_at_a_time_and_takes_no_text_before_it_is_needed():
    taken = []
    together = threading.Barrier(2, timeout=10)  # passes only when two answers are under way at once

    def source():
        for i in range(6):
            taken.append(i)
            yield i

    def both(x):
        together.wait()
        return x

    answers = each(source(), both, 2)
    assert next(answers) == 0 and taken == [0, 1]  # the first window, nothing past it
    assert list(answers) == [1, 2, 3, 4, 5] and taken == list(range(6))


def test_a_run_keeps_each_rules_time_and_a_skipped_rule_its_last(luma_home, runner_key, tmp_path):
    mark_bench_project(luma_home)
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 20, signer=runner_key)], submitter="t")
        first = Engine(kb).run()
        took = {r: s["seconds"] for r, s in _state(kb).load().rules.items()}
        assert took["qualified-boundary"] == round(next(r.seconds for r in first.runs
                                                         if r.rule == "qualified-boundary"), 3) > 0
        again = Engine(kb).run()
        assert {r.mode for r in again.runs} == {"skip"}
        assert {r: s["seconds"] for r, s in _state(kb).load().rules.items()} == took
