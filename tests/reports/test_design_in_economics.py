"""The Design-In report's capabilities and economics (issue 16, item 7): on a KB with a hardware
requirement it names the candidate capability classes, ranked by support x economic gain, and the
lifetime economics with every price's source and the evidence classes; on a KB where nothing
qualifies it says plainly why (which threshold, by how much, what would be needed).

The KB: five measured, signed chains of five workloads on two architectures in which host memory
binds (2 GiB PASS, 1 GiB FAIL, 2 cores); int8-weights recovers two of them (a recurring remedy,
too few to make the requirement unnecessary), a RAM upgrade the other three. The PASS trials
observe 60 requests/s; the int8 recovered trials 45 requests/s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reports.design_in_support import build_design_in, chain_with_rates, report_table
from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments import prices
from luma.kb.knowledge_base import KnowledgeBase
from luma.rules.engine import Engine
from luma.settings import Settings

pytest.importorskip("matplotlib")

GOLDEN = Path(__file__).parent / "golden"
CONTRACT = {"name": "embed-serve", "clauses": [
    {"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"},
    {"metric": "throughput", "op": ">=", "value": 40, "unit": "request/s"}]}


def _chain(n: int, remedy: bool, evidence) -> dict:
    doc = {"record_type": "pex-chain", "evidence_class": "measured",
           "workload": {"name": f"embed-{n}", "model": f"model-{n}", "task": "embedding"},
           "architecture": {"name": f"cpu-{n % 2}", "kind": "cpu", "vendor": "AMD"},
           "contract": CONTRACT,
           "pass_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                         "host_memory": {"value": 2, "unit": "GiB"}}},
           "fail_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                         "host_memory": {"value": 1, "unit": "GiB"}}},
           "crossed_dimension": "host_memory", "binding_resource": "host_memory",
           "intervention": {"name": "int8-weights", "kind": "software"} if remedy else
           {"name": "ram-upgrade", "kind": "hardware"},
           "recovered": True, "repetitions": 3}
    return chain_with_rates(doc, evidence, 60, 45, remedy)


@pytest.fixture
def home(chain_home, evidence):
    return chain_home([_chain(n, n < 2, evidence) for n in range(5)])


_build, _table = build_design_in, report_table


@pytest.mark.slow
def test_the_requirement_names_capabilities_and_economics_with_sources(home):
    rep = _build(home)
    caps = _table(rep, "table-capabilities").rows
    # host memory -> memory hierarchy (its parent's mapping) and, from the int8 remedy, memory-side compression
    # ranked by 5 chains x gain: int8 in hardware (the 1 GiB machine at 60 req/s: 0.085 / (60 x 1800))
    # saves more over the remedy than adding the memory does
    assert [r[1] for r in caps] == ["**memory-side compute or compression**", "**memory hierarchy**"]
    assert all(r[2] == "host_memory" and r[4] == "5" for r in caps)
    assert caps[0][3] == "remedy (int8-weights)" and caps[1][3] == "resource"
    assert "5 measured qualified chains" in caps[0][8] and "user-supplied" in caps[0][8]
    econ = _table(rep, "table-economics").rows
    assert len(econ) == 1 and econ[0][0] == "host_memory" and econ[0][7] == "projected"
    # 2 cores x 0.04 + 2 GiB x 0.005 = 0.09 USD/h over 60 req/s x 3600 x 0.5; remedy 0.085 USD/h over 45 req/s
    added, remedy = 0.09 / (60 * 1800), 0.085 / (45 * 1800)
    assert econ[0][2] == f"{added:.3g} USD per request" and econ[0][4] == f"{remedy:.3g} USD per request"
    ideal = 0.085 / (60 * 1800)
    assert econ[0][3] == "int8-weights (2 paired chains)" and econ[0][5] == f"{(remedy - added) / remedy:+.0%}"
    assert caps[1][5] == f"{(remedy - added) / remedy:+.0%}" and caps[1][6] == f"{5 * (remedy - added) / remedy:.3g}"
    assert caps[0][5] == f"{(remedy - ideal) / remedy:+.0%} (remedy in hardware, at most)"
    used = {r[0]: r for r in _table(rep, "table-prices").rows}
    assert used["core_hour"][2] == used["memory_gib_hour"][2] == "yes" and used["kwh"][2] == "no"
    assert "not a quote" in used["core_hour"][1]
    text = " ".join(p for s in rep.sections for p in s.paragraphs)
    assert "Evidence class of every estimate: projected" in text and "EXAMPLE prices" in text
    assert "Top capability class: memory-side compute or compression" in rep.callout


@pytest.mark.slow
def test_the_score_is_support_times_gain_and_a_dearer_resource_ranks_nothing(home, tmp_path):
    # memory at 0.05 per GiB-hour: adding the resource costs more per request than int8 does, so the
    # memory hierarchy scores 0; doing int8's work in hardware still saves
    path = tmp_path / "dear.toml"
    path.write_text(prices.shipped().read_text().replace("price = 0.005", "price = 0.05")
                    .replace("example = true", "example = false"))
    rep = _build(home, prices.load(path))
    econ = _table(rep, "table-economics").rows[0]
    assert econ[5].startswith("-")  # a negative gain
    caps = {r[1]: r for r in _table(rep, "table-capabilities").rows}
    assert caps["**memory hierarchy**"][6] == "0" and float(caps["**memory-side compute or compression**"][6]) > 0
    assert "EXAMPLE" not in " ".join(p for s in rep.sections for p in s.paragraphs)


@pytest.mark.slow
def test_unpriced_states_say_why(home, tmp_path):
    path = tmp_path / "accel-only.toml"
    path.write_text('evidence_class = "vendor-claim"\n[kwh]\nprice = 0.1\ncurrency = "EUR"\nsource = "s"\n'
                    "date = 2026-01-01\n")
    econ = _table(_build(home, prices.load(path)), "table-economics").rows[0]
    assert econ[2] == econ[4] == "no price" and econ[5] == "n/a"
    assert econ[8] == "no price: compute (core): no core_hour price; the table prices kWh"


@pytest.mark.slow
def test_the_cli_takes_a_price_table_and_refuses_a_bad_one_in_one_line(home, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[core_hour]\nprice = 1\ncurrency = "USD"\ndate = 2026-01-01\n')
    result = CliRunner().invoke(cli, ["--home", str(home), "report", "design-in", "--prices", str(bad),
                                      "--out", str(tmp_path / "x")])
    assert result.exit_code != 0 and "core_hour.source" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = CliRunner().invoke(cli, ["--home", str(home), "report", "design-in", "--out", str(tmp_path / "ok")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "ok" / "report.md").read_text()
    assert "## Capability classes" in md and "## Lifetime economics" in md and "### Prices" in md


@pytest.mark.slow
def test_the_capabilities_named_query_lists_each_candidate(home):
    from luma.kb.query.named import get_named_query

    with KnowledgeBase.open(Settings.from_env(home=home), read_only=True) as kb:
        rows = kb.store.select(get_named_query("capabilities").sparql)
    got = sorted((r["resource"], r["capability"], r["basis"]) for r in rows)
    assert got == [("host_memory", "memory hierarchy", "resource"),
                   ("host_memory", "memory-side compute or compression", "remedy")]
    assert {r["chains"] for r in rows} == {"5"} and all("int8-weights" in r.get("evidence", "") for r in rows
                                                        if r["basis"] == "remedy")


def _sections_md(rep, first: str, stop: str) -> str:
    from luma.reports.render import render_markdown

    md = render_markdown(rep)
    return md[md.index(first):md.index(stop)]


def _golden(name: str, text: str) -> None:
    """The text equals tests/reports/golden/NAME. After a deliberate change: delete the file, run
    the test once (it writes the file and fails), read the diff, run again."""
    path = GOLDEN / name
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        pytest.fail(f"{path} written: check it and run again")
    assert text == path.read_text(), f"differs from {path}"


@pytest.mark.slow
def test_golden_capability_and_economics_sections(home):
    _golden("design-in-capabilities.md", _sections_md(_build(home), "## Capability classes", "## Counter-evidence"))


@pytest.fixture
def thin_home(luma_home, signed, evidence):
    """Two measured chains on one architecture (host memory binds in both) and one vendor claim."""
    files = [signed(_chain(n, False, evidence), f"chain-{n}.json") for n in (0, 2)]
    claim = _chain(1, False, evidence)
    claim.update(evidence_class="vendor-claim", trials=[])
    path = luma_home.parent / "claim.json"
    path.write_text(json.dumps(claim))
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([*files, path], submitter="test")
        Engine(kb).run()
    return luma_home


@pytest.mark.slow
def test_golden_why_nothing_qualifies(thin_home):
    rep = _build(thin_home)
    assert "no capability qualifies" in rep.callout
    _golden("design-in-nothing.md", _sections_md(rep, "## Capability classes", "## Counter-evidence"))

