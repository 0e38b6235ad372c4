"""Rule files are untrusted like queries (issue 28 item 3): a rule file in `$LUMA_HOME/rules/`
that would fetch a URL, write, or run without end is refused or stopped in one line, a local
listener sees no request, and the derived graphs stay as they were.

The `<'>` differential came first: `FILTER(!(?c<'>')) SERVICE <…> {…} #'` was an IRI and a string
to the lexical scan and a federated call to Oxigraph, and rule files had no other check, so a
rule fetched the listener's answer into derived facts. A three-way product ran until a Rust
allocation panic ended the process with a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RuleError
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.safety import CheckedQuery
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.rules import analysis
from luma.rules.analysis import analyse
from luma.rules.engine import Engine
from luma.rules.loader import load_all
from luma.rules.state import DERIVED
from luma.settings import Settings
from tests.listener import LEAKED

HEAD = "# id: attack\n# version: 1\n# description: a rule file that must never run as written\n"
PFX = "PREFIX luma: <https://w3id.org/luma/ns#>\n"
C = "CONSTRUCT { ?s luma:leaked ?o } WHERE { "
REMOTE = "rules never fetch remote data or write"


def attacks(url: str) -> dict[str, str]:
    """Rule bodies that would reach `url` or write; each must be refused."""
    return {
        "plain": f"{C}SERVICE <{url}> {{ ?s ?p ?o }} }}",
        "lower-case": f"construct {{ ?s luma:leaked ?o }} where {{ service <{url}> {{ ?s ?p ?o }} }}",
        "silent": f"{C}SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}",
        "glued-to-braces": f"CONSTRUCT{{?s luma:leaked ?o}}WHERE{{SERVICE<{url}>{{?s ?p ?o}}}}",
        "in-optional": f"{C}?s ?q ?z OPTIONAL {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        "in-subquery": f"{C}{{ SELECT ?s ?o WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }} }}",
        "in-exists": f"{C}?s ?p ?o FILTER EXISTS {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
        # `<` after a term is less-than to Oxigraph; the scan read `<'>` as an IRI, then a string.
        "less-than-quote": f"{C}BIND(1 AS ?c) FILTER(!(?c<'>')) SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "less-or-equal-quote": f"{C}BIND(1 AS ?c) FILTER(!(?c<='>')) SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "less-than-and-quote": f"{C}BIND(1 AS ?c) FILTER(?c<?c&&'>') SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "less-than-double-quote": f'{C}BIND(1 AS ?c) FILTER(!(?c<"\'>")) SERVICE <{url}> {{ ?s ?p ?o }} }}',
        "less-than-brace": f"{C}BIND(1 AS ?c) FILTER(?c<'{{') SERVICE <{url}> {{ ?s ?p ?o }} #'\n}}",
        "escape": f'{C}BIND("\\u0022" AS ?a) SERVICE <{url}> {{ ?s ?p ?o }} BIND("\\u0022" AS ?b) }}',
        "insert": "INSERT DATA { GRAPH <https://w3id.org/luma/id/graph/derived/x> { <urn:a> luma:leaked 1 } }",
        "delete": "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
        "load": f"LOAD <{url}>",
        "load-into-derived": f"LOAD SILENT <{url}> INTO GRAPH <https://w3id.org/luma/id/graph/derived/x>",
        "drop": "DROP ALL",
        "construct-then-load": f"{C}?s ?p ?o }} ; LOAD <{url}>",
    }


def _place(home: Path, body: str, extra: str = "") -> Path:
    (home / "rules").mkdir(exist_ok=True)
    path = home / "rules" / "90-attack.rq"
    path.write_text(HEAD + extra + PFX + body + "\n")
    return path


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def _refusal(message: str) -> bool:
    return REMOTE in message or "does not parse" in message or "not allowed" in message


def test_rule_file_attacks_are_refused_when_loaded(tmp_path, listener):
    url = listener.url()
    home = tmp_path / "home"
    home.mkdir()
    assert len(attacks(url)) >= 10
    for name, body in attacks(url).items():
        path = _place(home, body)
        rule = next(r for r in load_all(home / "rules") if r.path == str(path))
        with pytest.raises(RuleError) as err:
            analyse(rule)
        assert err.value.source == str(path) and _refusal(err.value.message), (name, err.value.message)
    assert listener.seen == []


def test_the_check_sees_the_rendered_text(tmp_path):
    """A parameter is substituted as a typed literal before the text is checked: a string value
    cannot leave its quotes, and one that breaks the syntax is refused before anything runs."""
    from luma.rules.analysis import check_rule_text
    from luma.rules.loader import parse, render

    rule = parse(HEAD + "# param: label = x : string : a label\n" + PFX
                 + "CONSTRUCT { ?s luma:label ${label} } WHERE { ?s a luma:Chain }\n", "attack.rq")
    breakout = 'x" } WHERE { SERVICE <http://127.0.0.1:9/q> { ?s ?p ?o } } #'
    checked = check_rule_text(rule, render(rule, {"label": breakout}))
    assert checked.form == "construct"  # all of it inside one string literal
    with pytest.raises(RuleError, match="does not parse"):
        check_rule_text(rule, render(rule, {"label": "a\nb"}))


@pytest.fixture
def project(luma_home):
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    return luma_home


@pytest.mark.slow  # every attack through `luma rules check` and `luma rules run` (~60 s)
def test_rule_file_attacks_are_refused_by_check_and_run(project, listener):
    runner = CliRunner()
    for name, body in attacks(listener.url()).items():
        _place(project, body)
        for args in (["rules", "check"], ["rules", "run"]):
            line = _one_line_error(runner.invoke(cli, args))
            assert "90-attack.rq" in line and _refusal(line), (name, args, line)
    assert listener.seen == []


@pytest.mark.slow
def test_a_parameter_value_is_checked_in_place(project, listener):
    _place(project, "CONSTRUCT { ?s luma:label ${label} } WHERE { ?s a luma:Chain }",
           "# param: label = x : string : a label\n")
    runner = CliRunner()
    breakout = f'label=x" }} WHERE {{ SERVICE <{listener.url()}> {{ ?s ?p ?o }} }} #'
    result = runner.invoke(cli, ["rules", "run", "--param", breakout])
    assert result.exit_code == 0, result.output  # a string: nothing to refuse, nothing fetched
    line = _one_line_error(runner.invoke(cli, ["rules", "run", "--param", "label=a\nb"]))
    assert "does not parse" in line, line
    assert listener.seen == []


@pytest.mark.slow
def test_the_sandbox_alone_stops_a_rule_that_passed_the_checks(project, listener, monkeypatch, tmp_path):
    """The second wall, with the checks bypassed: their verdicts are planted in the project's
    cache by a run in this process, which is also the control (it does reach the listener);
    `luma rules run` then finds them and runs the rule in its sandboxed child, which cannot."""
    _place(project, f"CONSTRUCT {{ ?x luma:leaked ?s }} WHERE {{ BIND(<urn:x> AS ?x) "
                    f"SERVICE SILENT <{listener.url()}> {{ ?s ?p ?o }} }}")

    def unchecked(rule, text):
        from rdflib.plugins.sparql.parser import parseQuery

        return CheckedQuery(text, "graph", form="construct", tree=parseQuery(text))

    # The verdicts this process remembers (analysis._PASSED, _ANALYSED) start empty and are put
    # back after the test, and the machine's cache of them is this test's own, so the planted
    # ones never reach another test.
    monkeypatch.setenv("LUMA_RULES_CACHE", str(tmp_path / "rules-cache"))
    monkeypatch.setattr(analysis, "_PASSED", set())
    monkeypatch.setattr(analysis, "_ANALYSED", {})
    with monkeypatch.context() as patch:
        patch.setattr(analysis, "check_rule_text", unchecked)
        with KnowledgeBase.open(Settings.from_env(home=project)) as kb:
            Engine(kb).run()
    assert listener.seen, "the control: in this process, without the sandbox, the rule calls out"
    assert LEAKED.decode() in json.dumps(_derived(project))
    listener.seen.clear()
    analysis._PASSED.clear()  # the run below finds the planted verdicts on disk, as a new process would
    analysis._ANALYSED.clear()
    result = CliRunner().invoke(cli, ["rules", "run", "--full"])
    assert result.exit_code == 0, result.output
    assert listener.seen == []
    assert LEAKED.decode() not in json.dumps(_derived(project))  # recomputed without the fetch


def _derived(home: Path) -> list:
    """Every quad of every derived graph, and the rules' bookkeeping, sorted."""
    with KnowledgeBase.open(Settings.from_env(home=home), read_only=True) as kb:
        rows = kb.store.select("SELECT ?g ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o } "
                               f'FILTER(STRSTARTS(STR(?g), "{DERIVED}")) }}', union=False)
        token = kb.store.select("SELECT ?p ?o WHERE { <https://w3id.org/luma/id/rules> ?p ?o }", union=False)
    return sorted(tuple(sorted(r.items())) for r in rows) + sorted(tuple(sorted(r.items())) for r in token)


@pytest.mark.slow
def test_a_runaway_rule_is_stopped_and_the_derived_graphs_stay_as_they_were(luma_home, runner_key, tmp_path):
    """A three-way product: stopped at --timeout or --memory in one line (exit 1), after the
    shipped rules had written what the new chains add; the derived graphs and the rules'
    bookkeeping are put back as they were, and the next run derives what the new chains add."""
    mark_bench_project(luma_home)
    runner = CliRunner()
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 60, signer=runner_key)], submitter="t")
    assert runner.invoke(cli, ["rules", "run"]).exit_code == 0
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "b.jsonl", 20, seed=8, signer=runner_key)], submitter="t")
    before = _derived(luma_home)
    _place(luma_home, "CONSTRUCT { ?a luma:pairedWith ?g } WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }")
    for limits in (["--timeout", "4"], ["--memory", "200MiB", "--timeout", "120"]):
        line = _one_line_error(runner.invoke(cli, ["rules", "run", *limits]))
        assert ("longer than 4 s" in line if "4" in limits else "memory" in line), line
        assert "as they were before the run" in line, line
        assert _derived(luma_home) == before
    (luma_home / "rules" / "90-attack.rq").unlink()
    result = runner.invoke(cli, ["rules", "run", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new"] > 0  # what the stopped runs had written, derived again
    assert _derived(luma_home) != before


def test_rule_limits_come_from_the_settings():
    from luma.rules.isolated_run import RunLimits

    s = Settings.from_env(environ={"LUMA_RULES_TIMEOUT": "90", "LUMA_RULES_MEMORY": "1GiB"})
    assert RunLimits.of(s) == RunLimits(90.0, 2**30, False)
    assert RunLimits.of(s, timeout=5, memory_bytes=2**28) == RunLimits(5, 2**28, False)
    assert RunLimits.of(Settings.from_env(environ={})) == RunLimits(3600.0, 8 * 2**30, False)
    assert RunLimits.of(Settings.from_env(environ={"LUMA_RULES_TIMEOUT": "0"})).timeout is None


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["server"], indirect=True)
def test_on_an_endpoint_the_checks_are_the_guard(store_url, luma_home, monkeypatch, listener):
    """An endpoint evaluates the rules itself (no child process, no sandbox of ours): the text
    checks refuse the rule before a query is sent, in one line."""
    monkeypatch.setenv("LUMA_KB_URL", store_url)
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    for name in ("less-than-quote", "in-subquery", "load"):
        _place(luma_home, attacks(listener.url())[name])
        line = _one_line_error(runner.invoke(cli, ["rules", "run"]))
        assert "90-attack.rq" in line and _refusal(line), (name, line)
    assert listener.seen == []


def _children_of(pid: int) -> list[int]:
    """Rule-run child processes (rules/isolated_run.py) started by `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"luma.rules.isolated_run" in argv and str(pid).encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_killed_run_takes_its_child_along_and_the_next_run_recomputes(luma_home, runner_key, tmp_path):
    """`kill -9` of `luma rules run` while a runaway rule holds the store: the child goes too (it
    must not write on without the parent's lock), and the next run finds no valid cache token,
    recomputes every rule from the store and ends where a fresh full run ends."""
    import os
    import signal
    import subprocess
    import sys
    import time

    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc")
    mark_bench_project(luma_home)
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([write_jsonl(tmp_path / "a.jsonl", 40, signer=runner_key)], submitter="t")
    _place(luma_home, "CONSTRUCT { ?a luma:pairedWith ?g } WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }")
    env = {**os.environ, "LUMA_HOME": str(luma_home)}
    proc = subprocess.Popen([sys.executable, "-m", "luma.cli.main", "rules", "run", "--memory", "1GiB"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not _children_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    children = _children_of(proc.pid)
    assert children, "the run never started its child"
    time.sleep(8)  # the shipped rules write, the runaway rule holds the store
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{c}").exists() for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [c for c in children if Path(f"/proc/{c}").exists()
             and Path(f"/proc/{c}/stat").read_text().split()[2] != "Z"]
    assert alive == [], "the rule run's child outlived its parent"
    (luma_home / "rules" / "90-attack.rq").unlink()
    runner = CliRunner()
    result = runner.invoke(cli, ["rules", "run", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {r["how"] for r in json.loads(result.stdout)["rules"]} == {"full"}  # no cache vouched for
    after = _derived(luma_home)
    again = runner.invoke(cli, ["rules", "run", "--full", "--format", "json"])
    assert again.exit_code == 0 and (json.loads(again.stdout)["new"], json.loads(again.stdout)["removed"]) == (0, 0)
    assert [q for q in _derived(luma_home) if "runToken" not in str(q) and "runThrough" not in str(q)] == \
        [q for q in after if "runToken" not in str(q) and "runThrough" not in str(q)]
