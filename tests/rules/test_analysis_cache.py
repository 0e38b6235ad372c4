"""The rule analysis is cached per rule text (rules/analysis.py `analyse_cached`): the cached
analysis equals a fresh one, a changed rule is analysed again, a broken cache file is ignored,
and a rule that does not analyse raises every time. A process keeps what it analysed and the
texts that passed the checks, for every project it opens, and still writes each project's cache."""

from __future__ import annotations

import dataclasses

import pytest

from luma.errors import RuleError
from luma.rules import analysis
from luma.rules.analysis import analyse, analyse_cached, check_rule_cached
from luma.rules.loader import load_all, parse, render


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    """Each test starts with nothing remembered in this process (as a new process would)."""
    monkeypatch.setattr(analysis, "_ANALYSED", {})
    monkeypatch.setattr(analysis, "_PASSED", set())


def _fields(a):
    return {f.name: getattr(a, f.name) for f in dataclasses.fields(a) if f.name != "rule"}


#: Two rules in the default run (one per-record rule, one that reads derived facts); every rule
#: in the slow run (rdflib parses each in 0.1-1 s).
_FAST = {"unrecovered-boundary", "binds-before"}


@pytest.mark.parametrize("rule", [r if r.id in _FAST else pytest.param(r, marks=pytest.mark.slow) for r in load_all()],
                         ids=lambda r: r.id)
def test_a_cached_analysis_equals_a_fresh_one(rule, tmp_path):
    first = analyse_cached(rule, tmp_path)  # analysed (a fresh analysis) and written
    assert len(list(tmp_path.glob(f"{rule.id}-*.json"))) == 1
    again = analyse_cached(rule, tmp_path)  # read back
    assert _fields(again) == _fields(first)


def test_a_changed_rule_is_analysed_again_and_a_broken_cache_file_is_ignored(tmp_path):
    text = """# id: t
# version: 1
# description: test
# derives: ?x
PREFIX luma: <https://w3id.org/luma/ns#>
CONSTRUCT { ?x a luma:A } WHERE { ?x a luma:B }
"""
    rule = parse(text, "t.rq")
    assert ("type", "https://w3id.org/luma/ns#B") in analyse_cached(rule, tmp_path).reads
    changed = parse(text.replace("luma:B }", "luma:C }"), "t.rq")
    assert ("type", "https://w3id.org/luma/ns#C") in analyse_cached(changed, tmp_path).reads
    for f in tmp_path.glob("t-*.json"):
        f.write_text("{not json")
    assert _fields(analyse_cached(rule, tmp_path)) == _fields(analyse(rule))


def test_a_rule_that_does_not_analyse_is_never_cached(tmp_path):
    rule = parse("# id: bad\n# version: 1\n# description: d\nPREFIX luma: <https://w3id.org/luma/ns#>\n"
                 "SELECT ?x WHERE { ?x a luma:B }\n", "bad.rq")
    for _ in range(2):
        with pytest.raises(RuleError):
            analyse_cached(rule, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_second_project_in_one_process_parses_no_rule_again_and_gets_its_cache(tmp_path, monkeypatch):
    rule = next(r for r in load_all() if r.id == "binds-before")
    text = render(rule)
    first = analyse_cached(rule, tmp_path / "a")
    check_rule_cached(rule, text, tmp_path / "a" / "checked")
    calls = []
    monkeypatch.setattr(analysis, "analyse", lambda r: calls.append(r.id))
    monkeypatch.setattr(analysis, "check_rule_text", lambda r, t: calls.append(r.id))
    again = analyse_cached(rule, tmp_path / "b")
    check_rule_cached(rule, text, tmp_path / "b" / "checked")
    assert calls == [] and _fields(again) == _fields(first)
    assert len(list((tmp_path / "b").glob("binds-before-*.json"))) == 1  # the next process's
    assert len(list((tmp_path / "b" / "checked").iterdir())) == 1


def test_a_refused_text_is_checked_every_time_in_one_process(tmp_path):
    rule = parse("# id: svc\n# version: 1\n# description: d\n# derives: ?x\nPREFIX luma: <https://w3id.org/luma/ns#>\n"
                 "CONSTRUCT { ?x a luma:A } WHERE { SERVICE <http://127.0.0.1:9/q> { ?x a luma:B } }\n", "svc.rq")
    for _ in range(2):
        with pytest.raises(RuleError, match="SERVICE"):
            check_rule_cached(rule, render(rule), tmp_path / "project", tmp_path / "machine")
    assert analysis._PASSED == set() and list(tmp_path.iterdir()) == []


def test_a_new_process_in_a_new_project_finds_the_machine_s_verdicts(tmp_path, monkeypatch):
    rule = next(r for r in load_all() if r.id == "binds-before")
    text = render(rule)
    first = analyse_cached(rule, tmp_path / "a", tmp_path / "machine" / "analysis")
    check_rule_cached(rule, text, tmp_path / "a" / "checked", tmp_path / "machine" / "checked")
    monkeypatch.setattr(analysis, "_ANALYSED", {})  # a new process
    monkeypatch.setattr(analysis, "_PASSED", set())
    calls = []
    monkeypatch.setattr(analysis, "analyse", lambda r: calls.append(r.id))
    monkeypatch.setattr(analysis, "check_rule_text", lambda r, t: calls.append(r.id))
    again = analyse_cached(rule, tmp_path / "b", tmp_path / "machine" / "analysis")
    check_rule_cached(rule, text, tmp_path / "b" / "checked", tmp_path / "machine" / "checked")
    assert calls == [] and _fields(again) == _fields(first)
    assert len(list((tmp_path / "b").glob("binds-before-*.json"))) == 1  # and the project's own
    assert len(list((tmp_path / "b" / "checked").iterdir())) == 1


def test_a_broken_machine_cache_file_is_analysed_again_and_replaced(tmp_path):
    rule = next(r for r in load_all() if r.id == "binds-before")
    analyse_cached(rule, None, tmp_path)
    (cached,) = tmp_path.glob("binds-before-*.json")
    good = cached.read_text()
    cached.write_text('{"writes": 1}')
    analysis._ANALYSED.clear()
    assert _fields(analyse_cached(rule, None, tmp_path)) == _fields(analyse(rule))
    assert cached.read_text() == good


_OWN = """# id: mine
# version: 1
# description: a project's own rule that reads derived facts inside their graph
# derives: ?n
PREFIX luma: <https://w3id.org/luma/ns#>
PREFIX derived: <https://w3id.org/luma/id/graph/derived/>
CONSTRUCT { ?n a luma:Mine ; luma:mineCount ?c } WHERE {
  { SELECT (COUNT(?q) AS ?c) WHERE { GRAPH derived:qualified-boundary { ?q a luma:QualifiedBoundary } } }
  BIND(<urn:luma:mine> AS ?n) }
"""


def test_rules_check_and_list_answer_from_the_machine_s_analyses(tmp_path, monkeypatch):
    """`luma rules check` and `list`, and the sealed-read check of a project's own rule, parse the
    shipped rules once per machine, not once per command; a rule that does not analyse is
    refused every time."""
    from click.testing import CliRunner

    from luma.cli.main import cli
    from luma.rules import sealing

    home = tmp_path / "home"
    (home / "rules").mkdir(parents=True)
    (home / "rules" / "90-mine.rq").write_text(_OWN)
    monkeypatch.setenv("LUMA_HOME", str(home))
    monkeypatch.setenv("LUMA_RULES_CACHE", str(tmp_path / "machine"))
    monkeypatch.setattr(sealing, "_shipped_writers", sealing._shipped_writers.__wrapped__)  # no lru: a new process
    parsed = []
    real = analysis.analyse
    monkeypatch.setattr(analysis, "analyse", lambda r: parsed.append(r.id) or real(r))
    runner = CliRunner()
    first = runner.invoke(cli, ["rules", "check"])
    assert first.exit_code == 0 and "15 rule(s)" in first.output, first.output
    assert sorted(parsed) == sorted([r.id for r in load_all()] + ["mine"])  # each once, not twice
    for args in (["rules", "check"], ["rules", "list", "--format", "json"]):
        monkeypatch.setattr(analysis, "_ANALYSED", {})  # a new process
        parsed.clear()
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert parsed == [], (args, parsed)
    # The sealed-read check still refuses an own rule that reads a boundary outside its graph.
    inside = "GRAPH derived:qualified-boundary { ?q a luma:QualifiedBoundary }"
    (home / "rules" / "90-mine.rq").write_text(_OWN.replace(inside, "?q a luma:QualifiedBoundary"))
    for _ in range(2):
        result = runner.invoke(cli, ["rules", "check"])
        assert result.exit_code == 1 and "sealed term" in result.output, result.output
    (home / "rules" / "90-mine.rq").write_text(_OWN.replace("CONSTRUCT", "SELECT ?n ?c WHERE {} CONSTRUCT"))
    for _ in range(2):
        result = runner.invoke(cli, ["rules", "check"])
        assert result.exit_code == 1 and "90-mine.rq" in result.output, result.output
