"""End to end on this machine (issue 16): a real `luma sprint run matvec-memory` writes frontier
shift, next binding, diagnosis and decision facts; `luma kb query --name frontier-shifts` and
`next-bindings` list them; `luma report boundary` states them as the KB holds them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.reports import boundary
from luma.reports import boundary_data as data
from luma.settings import Settings

pytestmark = pytest.mark.slow  # one real sprint: ~10-30 s


def _run(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _rows(result) -> list[dict]:
    return [{k: v["value"] for k, v in row.items()} for row in json.loads(result.stdout)["results"]["bindings"]]


def test_a_sprint_writes_its_outcomes_as_facts_and_the_report_reads_them(luma_home):
    _run("sprint", "run", "matvec-memory", "--format", "json")
    chain = json.loads(next((luma_home / "sprints").glob("*/chain.json")).read_text())
    assert chain["diagnosis"][0] == {"dimension": "host_memory", "restored_level": chain["pass_state"]["dimensions"][
        "host_memory"], "verdict": "PASS"}
    assert {r["dimension"] for r in chain["diagnosis"]} == {"host_memory", "compute"}
    shift = chain["frontier_shift"]

    [row] = _rows(_run("kb", "query", "--name", "frontier-shifts", "--format", "json"))
    assert row["dimension"] == "host_memory" and row["evidenceClass"] == "Measured"
    assert float(row["before"]) == shift["before"]["value"] * 2**20 and row["unit"] == "BYTE"
    assert float(row["absoluteChange"]) == shift["absolute_change"] < 0 and row["variant"] == "int8-weights"
    [nb] = _rows(_run("kb", "query", "--name", "next-bindings", "--format", "json"))
    assert nb["binding"] == "host_memory" and nb["nextBinding"] == (chain["next_binding"]["resource"] or "none")

    _run("rules", "run")
    with KnowledgeBase.open(Settings.from_env()) as kb:
        f = data.gather(kb, data.latest_qualified(kb))
    o = f.outcomes
    assert [r.dimension for r in o.diagnosis] == [r["dimension"] for r in chain["diagnosis"]]
    assert len(o.decisions) == 2 and o.frontier.absolute == shift["absolute_change"]
    a = boundary.analyse(f)
    assert a.decided and a.shift is o.frontier and a.requal_pass == o.frontier.after
