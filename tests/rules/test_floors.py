"""Rule floors (canonical rule 5) and exploratory runs.

`luma rules run --param min_workloads=1 --param min_architectures=1` once turned a single chain
into a hardware requirement. Now values below a rule's `# floor:` are refused with exit 2, and
`--exploratory` runs below them on a copy of the KB whose facts never reach the KB's queries or
reports.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import BelowFloor, RuleError
from luma.rules.loader import load_all, parse, resolve_params

_spec = importlib.util.spec_from_file_location("luma_test_scenarios", Path(__file__).with_name("test_scenarios.py"))
scenarios = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = scenarios  # dataclasses look their module up while the class is made
_spec.loader.exec_module(scenarios)


def _run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("override", ["min_workloads=1", "min_architectures=1", "min_repetitions=1",
                                      "recurring-remedy.min_chains=1", "hardware-requirement.min_workloads=1"])
def test_values_below_a_floor_are_refused_with_exit_2(luma_home, override):
    out = _run("rules", "run", "--param", override)
    assert out.exit_code == 2, out.output
    assert "below its floor" in out.output and "--exploratory" in out.output
    with pytest.raises(BelowFloor):
        resolve_params(load_all(), dict([override.split("=")]))


def test_every_requirement_threshold_has_a_floor():
    floors = {(r.id, name) for r in load_all() for name in r.floors}
    assert {("recurring-binding", "min_workloads"), ("recurring-binding", "min_architectures"),
            ("hardware-requirement", "min_workloads"), ("hardware-requirement", "min_architectures"),
            ("qualified-boundary", "min_repetitions"), ("recurring-remedy", "min_chains")} <= floors
    # at the floor is allowed
    resolve_params(load_all(), {"min_workloads": "2", "min_architectures": "2", "min_repetitions": "2"})


@pytest.mark.parametrize("header, message", [
    ("# floor: nope >= 2 : why", "not a numeric parameter"),
    ("# floor: n >= two : why", "not a number"),
    ("# floor: n 2", "a floor reads"),
    ("# floor: n >= 9 : why", "below its own floor"),
])
def test_malformed_floors_are_refused(header, message):
    text = f"# id: x\n# version: 1\n# description: d\n# param: n = 3 : integer : n\n{header}\nCONSTRUCT {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o }}\n"
    with pytest.raises(RuleError, match=message):
        parse(text, "x.rq")


@pytest.mark.slow
def test_an_exploratory_run_stays_out_of_the_kb(luma_home):
    """One workload on two architectures: no requirement; with --exploratory min_workloads=1 one
    appears -- in the exploratory copy only, marked so by `luma kb explain`."""
    with scenarios.derived(luma_home, scenarios.bandwidth_chains()[:1] + [
            scenarios.Chain("bwx", "w0", "chat", "arch1", level=3e11, intervention="fix-x")]) as kb:
        assert scenarios.requirements(kb) == {}
    out = _run("rules", "run", "--exploratory", "--param", "min_workloads=1", "--format", "json")
    assert out.exit_code == 0, out.output
    official = json.loads(_run("kb", "query", "--name", "hardware-requirements", "--format", "json").stdout)
    assert official["results"]["bindings"] == []
    explored = _run("kb", "query", "--exploratory", "--name", "hardware-requirements", "--format", "json")
    assert explored.exit_code == 0, explored.output
    rows = json.loads(explored.stdout)["results"]["bindings"]
    assert rows and "exploratory results" in explored.stderr
    iri = rows[0]["requirement"]["value"] if "requirement" in rows[0] else next(
        v["value"] for v in rows[0].values() if v["type"] == "uri" and "/hardware-requirement/" in v["value"])
    assert "EXPLORATORY" in _run("kb", "explain", "--exploratory", iri).output
    assert _run("kb", "explain", iri).exit_code == 2  # not in the KB: a name given that does not exist
    # A Design-In report of the KB: the exploratory requirement is not in it.
    report = _run("report", "design-in", "--out", str(luma_home / "di"))
    if report.exit_code == 0:
        assert iri.rsplit("/", 1)[-1] not in (luma_home / "di" / "report.md").read_text()
    else:
        assert "hardware requirement" in report.output or "rules have not run" in report.output


def test_explain_and_query_say_when_there_is_no_exploratory_run(luma_home):
    assert _run("kb", "init").exit_code == 0
    out = _run("kb", "query", "--exploratory", "ASK {}")
    assert out.exit_code == 1 and "no exploratory run yet" in out.output
