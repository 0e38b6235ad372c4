"""`luma report pilot`: the Economic Control Report of one pilot run, from a pilot.json written by
hand to the format (tests/reports/data/pilot/pilot.json: three states, a pilot with five
decisions — one rolled back — and both baselines). Markdown and HTML hold every section in
order, the acceptance figures with their evidence classes, the timeline plot and every table
(opened in headless Chromium too); a killed run renders what it wrote and says what is missing;
a malformed file is one line naming the file and the field, exit code 1, no traceback."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")

from luma.cli.main import cli  # noqa: E402
from luma.errors import ConfigError  # noqa: E402
from luma.reports import pilot, pilot_data  # noqa: E402
from luma.reports.render import render_markdown  # noqa: E402

FIXTURE = Path(__file__).parent / "data" / "pilot" / "pilot.json"
GOLDEN = Path(__file__).parent / "golden"
RUN = "pilot-20261204T051200-3f2a"
SECTIONS = [("setup", "Setup"), ("timeline", "Timeline"), ("decisions", "Decisions"),
            ("value", "Realized value vs baselines"), ("library", "The library"), ("evidence", "Evidence classes"),
            ("notes", "Notes")]
TABLES = {"table-setup", "table-contract", "table-prices", "table-decisions", "table-segments", "table-library",
          "table-evidence", "table-figure-classes"}


def _doc() -> dict:
    return json.loads(FIXTURE.read_text())


def _store(home: Path, doc: dict | str, run: str = RUN) -> Path:
    """`doc` as the pilot.json of run `run` in the project `home`."""
    path = home / "pilots" / run / "pilot.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=1))
    return path


def _run(home: Path, *args):
    return CliRunner().invoke(cli, ["--home", str(home), "report", "pilot", *args])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    """The fixture's report, rendered by the CLI into the default folder beside the run."""
    home = tmp_path_factory.mktemp("pilot") / "home"
    _store(home, _doc())
    result = _run(home)  # no RUN: the latest run
    assert result.exit_code == 0, result.output
    out = home / "pilots" / RUN / "report"
    return {"home": home, "out": out, "stdout": result.stdout, "md": (out / "report.md").read_text(),
            "html": (out / "report.html").read_text(), "report": pilot.build(pilot_data.load(FIXTURE))}


def test_the_cli_prints_what_it_wrote_beside_the_run(rendered):
    out = rendered["out"]
    assert rendered["stdout"].splitlines() == [str(out / "report.md"), str(out / "report.html"),
                                               str(out / "plots" / "plot-timeline.svg")]


def test_every_section_in_order_in_markdown_and_html(rendered):
    md, html = rendered["md"], rendered["html"]
    assert md.startswith(f"# Economic Control Report: {RUN}\n")
    at = [md.index(f"\n## {title}\n") for _, title in SECTIONS]
    assert at == sorted(at)
    at = [html.index(f'<section id="{sid}">') for sid, _ in SECTIONS]
    assert at == sorted(at)
    assert [s.id for s in rendered["report"].sections] == [sid for sid, _ in SECTIONS]
    assert {t.id for t in rendered["report"].tables()} == TABLES
    for t in rendered["report"].tables():
        assert "| " + " | ".join(t.columns) + " |" in md, t.id
        assert f'<table id="{t.id}">' in html


def test_the_acceptance_figures_carry_their_values_and_classes(rendered):
    md = rendered["md"]
    assert re.search(r"^\| Saving vs the static largest state \| \*\*28\.9 %\*\* lower cost per accepted output "
                     r"\(pilot 2\.12e-6 USD vs static 2\.98e-6 USD\) — evidence: projected \(cost\)", md, re.M)
    assert "| **0.26 %** of the pilot's requests — evidence: measured (latency, errors)" in md
    assert "| **+42.3 %** cost per accepted output (pilot 2.12e-6 USD vs hindsight-best 1.49e-6 USD) — evidence: " \
           "projected (cost)" in md
    assert "| Contract | `minilm-embedding-pilot` (embedding): p95_latency <= 250 ms; cost_per_accepted <= 2e-6 " \
           "USD/request |" in md


def test_every_figure_names_its_evidence_class(rendered):
    md, rep = rendered["md"], rendered["report"]
    tables = {t.id: t for t in rep.tables()}
    assert "predicted (projected)" in tables["table-decisions"].columns
    assert "verification (measured)" in tables["table-decisions"].columns
    assert any(c.endswith("(simulated)") and c.startswith("energy") for c in tables["table-decisions"].columns)
    seg = tables["table-segments"]
    for row in seg.rows:
        assert row[seg.columns.index("cost evidence")] == "projected"
        assert row[seg.columns.index("energy evidence")] == "simulated"
    classes = {r[0]: r[2] for r in tables["table-figure-classes"].rows}
    assert classes["p95 latency, window and verification verdicts"] == "measured"
    assert classes["energy, energy per accepted output"] == "simulated"
    assert [r[:2] for r in tables["table-evidence"].rows] == [["latency", "measured"], ["errors", "measured"],
                                                              ["rate", "measured"], ["cost", "projected"],
                                                              ["energy", "simulated"]]
    assert "Evidence: rate measured, latency measured, cost projected." in md  # the plot's caption
    # example prices and simulated energy, prominently: the warning box, Setup, and the price citations
    assert "> **Warning.** **Example prices**" in md and "> **Warning.** **Energy is simulated**" in md
    assert '<div class="warnings" id="warnings"' in rendered["html"]
    assert "**Energy is simulated, not measured:** per-host power model" in md
    assert "| 0.04 USD per core-hour | illustrative list price, 2026-12-03; user-supplied |" in md


def test_the_decisions_and_baselines_read_as_the_run_recorded_them(rendered):
    md = rendered["md"]
    assert "| 3 | 9 (90 s) | downscale | S3 → S2 | predicted saving 50 % at 10/s (margin 25 %) | PASS · 2.3e-6 USD · " \
           "p95 90 ms | FAIL (1 window) | rolled-back | 2e-6 [1.92e-6 – 2.08e-6] USD → 2.37e-6 [2.27e-6 – 2.46e-6] USD" in md
    assert "| `9c56cc51b374` |" in md
    assert "| Static: largest qualified state | S3 (4 cores · 256 MiB · fp32 · batch 16) | 1812 | 1812 | 0 (0 %) | " \
           "2.98e-6 [2.86e-6 – 3.1e-6] USD | projected | 553 [531 – 575] mJ | simulated | 0.711× | 0.687× |" in md
    assert "| S1 | 1 core · 96 MiB · int8-weights · batch 8 | `3b9c0d1e2f4a` | 41.2 requests/s | 118 ms | 53 % |" in md


def test_the_timeline_plot(rendered):
    out, md, html = rendered["out"], rendered["md"], rendered["html"]
    assert "](plots/plot-timeline.svg)" in md
    assert re.search(r'<figure id="plot-timeline" class="plot">\s*<svg', html)
    svg = (out / "plots" / "plot-timeline.svg").read_text()
    assert svg.startswith("<?xml")
    for text in ("S1", "S2", "S3", "SLO 250 ms", "verification window", "switch", "rollback", "breach",
                 "static-largest", "hindsight-best", "window PASS", "window FAIL", "trace time (s)", "requests/s",
                 "cost per accepted (×1e-6 USD)"):
        assert f">{text}<" in svg or f"> {text}<" in svg or text in svg, text


def test_rendering_twice_gives_the_same_bytes(rendered, tmp_path):
    result = _run(rendered["home"], RUN, "--out", str(tmp_path / "again"))
    assert result.exit_code == 0, result.output
    for rel in ("report.md", "report.html", "plots/plot-timeline.svg"):
        assert (tmp_path / "again" / rel).read_bytes() == (rendered["out"] / rel).read_bytes(), rel


def test_golden_markdown():
    """The whole Markdown of the fixture. After a deliberate change: delete the golden file, run
    the test once (it writes the file and fails), read the diff, run again."""
    text = render_markdown(pilot.build(pilot_data.load(FIXTURE), "pilot.json"))
    path = GOLDEN / "pilot.md"
    if not path.exists():
        path.write_text(text)
        pytest.fail(f"{path} written: check it and run again")
    assert text == path.read_text(), f"differs from {path}"


def _killed() -> dict:
    """The fixture as a run killed in its pilot segment would leave it: not finished, the pilot's
    first six windows and its first two decisions, no totals, baselines or figures."""
    doc = _doc()
    doc["finished"] = None
    seg = doc["segments"][0]
    seg["windows"] = seg["windows"][:6]
    del seg["totals"]
    doc["segments"] = [seg]
    doc["decisions"] = doc["decisions"][:2]
    del doc["figures"]
    seg["windows"][5]["p95_latency"] = None  # its requests were still in flight: no value, a gap in the plot
    seg["windows"][5]["state"] = "ffffeeee0000"  # a state the library lacks
    return doc


def test_a_killed_run_renders_what_it_wrote_and_says_what_is_missing(tmp_path):
    path = _store(tmp_path / "home", _killed(), "killed")
    result = _run(tmp_path / "home", str(path.parent), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "report.md").read_text()
    for _, title in SECTIONS:
        assert f"\n## {title}\n" in md
    assert "| Finished | **not finished** (killed, or still running) |" in md
    assert "> **Warning.** **The run did not finish**" in md
    assert "| Saving vs the static largest state | not available: no static-largest segment in this run (it did " \
           "not finish) |" in md
    assert "| Pilot vs the hindsight-best state | not available: no hindsight-best segment in this run" in md
    # the share outside the contract still stands: from the pilot's own windows, and it says so
    assert "computed here from the pilot's windows" in md
    assert "No `static-largest` segment: the saving vs the static largest state cannot be given." in md
    assert "The pilot segment covers 60 s of the 120 s trace." in md
    assert "The file has no `figures`" in md
    assert "| Static: largest qualified state | not recorded |" in md
    assert "States the run names that its library lacks: `ffffeeee0000`." in md
    assert (tmp_path / "out" / "plots" / "plot-timeline.svg").is_file()  # six windows are still drawn
    assert "ffffeeee?" in (tmp_path / "out" / "plots" / "plot-timeline.svg").read_text()  # on the state axis


def test_the_required_keys_alone_render_with_every_section():
    doc = {"format": 1, "run": "r1", "started": "2026-12-04T05:12:00+00:00", "finished": None,
           "contract": {"name": "c"}}
    rep = pilot.build(pilot_data.parse(json.dumps(doc), "pilot.json"))
    md = render_markdown(rep)
    assert [s.id for s in rep.sections] == [sid for sid, _ in SECTIONS] and rep.plots() == []
    assert "No window of the pilot segment was recorded: nothing to draw." in md
    assert "*No decision was recorded" in md and "*The run recorded no library.*" in md
    for key in ("machine", "trace", "library", "segments", "decisions", "figures", "evidence"):
        assert f"The file has no `{key}`" in md, key


def _mutate(path: list, value) -> dict:
    doc = _doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


BAD = [
    ('{"format": 1, "run": ', "not valid JSON (line 1, column 22"),
    ("[1, 2]", "expected a JSON object (the pilot summary), got list"),
    (_mutate(["run"], KeyError), "run: missing (a required key of the pilot summary)"),
    (_mutate(["contract", "name"], KeyError), "contract.name: missing"),
    (_mutate(["segments", 0, "windows", 2, "p95_latency"], "fast"),
     'segments[0].windows[2].p95_latency: expected a number, got "fast"'),
    (_mutate(["decisions", 1, "sequence"], "1"), 'decisions[1].sequence: expected an integer, got "1"'),
    (_mutate(["price_table", "example"], "yes"), 'price_table.example: expected true or false, got "yes"'),
    (_mutate(["segments", 1, "totals", "cost_per_accepted"], 3e-6), "segments[1].totals.cost_per_accepted: expected "
                                                                     "an object, got 3e-06"),
    (_mutate(["trace", "points", 0], [0.0]), "trace.points[0]: expected a pair [a, b]"),
    (_mutate(["library"], {"a": 1}), "library: expected a list"),
    (_mutate(["format"], 2), "format: 2 is not a format this luma reads (it reads format 1)"),
]


@pytest.mark.parametrize("doc, says", BAD, ids=[b[1].split(":")[0][:40] for b in BAD])
def test_a_malformed_file_is_one_line_naming_the_field(tmp_path, doc, says):
    path = _store(tmp_path / "home", doc)
    result = _run(tmp_path / "home", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines == [f"Error: {path}: {says}"] or (len(lines) == 1 and lines[0].startswith(f"Error: {path}: {says}")), \
        lines
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_file_that_is_no_regular_file_or_too_large_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file"):
        pilot_data.load(tmp_path)
    big = tmp_path / "pilot.json"
    big.write_text(json.dumps(_doc()))
    limit = pilot_data.PILOT_FILE

    class Small:  # the command's Settings, with LUMA_MAX_RECORD_FILE_BYTES set low
        @staticmethod
        def file_limit(variable, default):
            return 1000 if variable == limit.variable else default

    with pytest.raises(ConfigError, match=r"pilot\.json: file is over the pilot summary limit of 1000 bytes"):
        pilot_data.load(big, Small())


def test_finding_the_run(tmp_path):
    home = tmp_path / "home"
    older, newer = _store(home, _doc(), "pilot-a"), _store(home, _doc(), "pilot-b")
    os.utime(newer, (1_000, 1_000))  # pilot-b's summary was written first: pilot-a is the newest run
    os.utime(older, (2_000, 2_000))
    assert pilot_data.locate(None, home) == older
    assert pilot_data.locate("pilot-b", home) == newer
    assert pilot_data.locate(str(newer.parent), home) == newer and pilot_data.locate(str(newer), home) == newer
    (home / "pilots" / "pilot-a" / "report").mkdir()  # a report written into a run changes nothing
    assert pilot_data.locate(None, home) == older
    with pytest.raises(ConfigError, match=r"no pilot run 'nope': .* \(runs there: pilot-b, pilot-a\)"):
        pilot_data.locate("nope", home)
    result = _run(tmp_path / "empty", "--latest")
    assert result.exit_code == 1 and result.stderr.startswith("Error: --home: no pilot run under "), result.output
    assert _run(home, "pilot-a", "--latest").exit_code == 2  # a usage error


def test_nan_from_a_lax_writer_is_no_value():
    doc = json.dumps(_doc()).replace('"p95_latency": 0.101', '"p95_latency": NaN', 1)
    p = pilot_data.parse(doc, "pilot.json")
    assert p.segments[0].windows[2].p95_latency is None


def test_chromium_sees_every_section_table_and_the_plot(rendered, tmp_path):
    from tests.reports.test_reports import _dom  # noqa: PLC0415 - the shared Chromium helper

    rep = rendered["report"]
    dom = _dom(rendered["out"] / "report.html", tmp_path)
    assert {sid for sid, _ in SECTIONS} <= dom.ids
    assert TABLES <= dom.ids and dom.tags["table"] == len(TABLES) + 1  # + the facts table
    assert "plot-timeline" in dom.figures_with_svg and dom.tags["svg"] == len(rep.plots()) == 1
    assert {"title", "facts", "warnings"} <= dom.ids
    assert dom.repeated == []


def test_markers_only_where_the_state_changed_and_no_bare_after(tmp_path):
    # Issue 32: a rollback marker where the state did not change ("rolled back (already the most
    # capable state)") and "→ —" on a decision whose verification failed.
    doc = _doc()
    ws = doc["segments"][0]["windows"]
    same = next(i for i in range(len(ws) - 1) if ws[i]["state"] == ws[i + 1]["state"] and not ws[i].get("event"))
    ws[same]["event"] = "rolled back (already the most capable state)"
    failed = next(d for d in doc["decisions"] if d["verification"]["verdict"] == "FAIL")
    failed["realized"]["after"] = {"cost_per_accepted": None, "energy_per_accepted": None}
    p = pilot_data.parse(json.dumps(doc), "test")
    events = pilot._events(p, p.segment(pilot_data.PILOT).windows)
    assert ws[same]["start_s"] not in [t for t, _ in events]
    changed = [w["start_s"] for w, nxt in zip(ws, ws[1:]) if w.get("event") and nxt["state"] != w["state"]]
    assert [t for t, _ in events] == changed and len(changed) >= 4
    md = render_markdown(pilot.build(p))
    row = next(line for line in md.splitlines() if line.startswith(f"| {failed['sequence']} |"))
    assert "→ —" not in row and "no accepted output (verification FAIL)" in row
