"""Markdown reports show record text as text (issue 28, item 8): names and free text from records
(`<script>`, `| a | b |`, `**bold**`, `[x](javascript:…)`, `# heading` …) come out of
`report.md` inert — no HTML, link, image, heading, list or extra table column — whatever
renderer opens it (checked with markdown-it, raw HTML passed through: the most permissive
setting); the HTML report stays as it was (escaped by Jinja2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luma.cli.main import cli
from luma.reports.md_escape import inline, text
from luma.reports.render import Plot, Report, Section, Table, Tree, render_html, render_markdown

markdown_it = pytest.importorskip("markdown_it")

#: CommonMark with GFM tables and strikethrough, raw HTML passed through (as many viewers do).
MD = markdown_it.MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
HOSTILE = ["<script>alert(1)</script>", "| a | b |", "**bold**", "[x](javascript:alert(1))",
           "# heading", "- item", "1. item", "> quote", "`code`", "_em_", "~~del~~", "&lt;b&gt;", "line\nbreak",
           "![i](javascript:alert(1))", "[r]: javascript:alert(1)", "<http://x.example>", "<!-- c -->", "\\"]
NAME = "<script>alert(1)</script> | a | b | **bold** [x](javascript:alert(1))"
#: Single characters and pieces that mean something in Markdown, for the property tests.
PIECES = st.sampled_from([*"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\rab1é", "javascript:", "<script>", "http://x",
                          "&#60;", "1. ", "    ", "**", "](", "<a href=x>"])
TEXT = st.lists(PIECES, max_size=25).map("".join)
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def _escaped(s: str) -> str:
    """`s` as markdown-it writes text into HTML."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _one_line(s: str) -> str:
    return re.sub(r"\r\n?|\n", " ", s).strip(" \t")


@PROPERTY
@given(TEXT)
def test_any_text_is_a_paragraph_of_exactly_that_text(s):
    want = _one_line(s)
    assert MD.render(text(s)) == (f"<p>{_escaped(want)}</p>\n" if want else "")


@PROPERTY
@given(TEXT)
def test_any_text_is_one_table_cell_of_exactly_that_text(s):
    for closed in (False, True):  # closed: the cell's ` |` follows, so a last `]` needs no escape
        html = MD.render("| h |\n| --- |\n| " + text(s, at_line_start=False, closed=closed) + " |\n")
        assert html.count("<td") == 1 and f"<td>{_escaped(_one_line(s).strip())}</td>" in html


@PROPERTY
@given(TEXT)
def test_any_text_is_an_images_alt_text_exactly(s):
    html = MD.render("![" + text(s, at_line_start=False, in_brackets=True) + "](plots/x.svg)")
    alt = _escaped(re.sub(r"\r\n?|\n", " ", s))  # alt text keeps its spaces
    assert html == f'<p><img src="plots/x.svg" alt="{alt}" /></p>\n'


@PROPERTY
@given(TEXT)
def test_text_with_the_two_marks_makes_no_other_element(s):
    """`code` and **bold** are LUMA's own marks (kept, as in HTML); nothing else becomes markup."""
    for md in (MD.render(inline(s)), MD.render("| h |\n| --- |\n| " + inline(s, in_table=True) + " |\n")):
        tags = set(re.findall(r"</?([a-z0-9]+)", md))
        assert tags <= {"p", "code", "strong", "table", "thead", "tbody", "tr", "th", "td"}, (s, md)
        assert md.count("<td") <= 1


def test_the_reports_own_marks_and_ordinary_names_stay_as_written():
    assert inline("Deploy `embed-minilm` at **host_memory** ≥ 8 MiB (p95 <= 50 ms)") == \
        "Deploy `embed-minilm` at **host_memory** ≥ 8 MiB (p95 <= 50 ms)"
    assert inline("a `x|y` cell", in_table=True) == "a `x\\|y` cell"
    assert text("9.18e-6 [8.82e-6 – 9.55e-6] USD") == "9.18e-6 [8.82e-6 – 9.55e-6] USD"
    assert text("<script>alert(1)</script>") == "&lt;script>alert(1)&lt;/script>"
    assert text("see [x](javascript:alert(1))") == "see [x\\](javascript:alert(1))"
    assert text("[x](javascript:alert(1))") == "\\[x\\](javascript:alert(1))"  # a line's start: a definition


def _hostile_report(name: str) -> Report:
    """A report with `name` in every field a record's text can reach."""
    table = Table("table-x", [name, "value"], [[name, f"`{name}`"], [f"**{name}**", name]], caption=name, note=name)
    tree = Tree("tree-x", {"text": name, "children": [{"text": name, "children": []}]}, caption=name)
    blocks = [table, tree, Plot("plot-x", "<svg/>", name)]
    return Report("boundary", f"Report: {name}", name, [(name, name), ("Workload", f"`{name}` on {name}")],
                  [Section("s", name, [name, f"Workload `{name}` under **{name}**"], blocks),
                   Section("e", name, [], [], empty=name)], callout=name, footer=name)


@pytest.mark.parametrize("name", [NAME, *HOSTILE])
def test_every_field_of_a_report_is_inert_in_markdown(name):
    md = render_markdown(_hostile_report(name))
    html = MD.render(md)
    assert "<script" not in html and re.findall(r'\b(?:href|src)="([^"]*)"', html) == ["plots/plot-x.svg"]
    assert set(re.findall(r"<([a-z0-9]+)", html)) <= {"h1", "h2", "p", "em", "code", "strong", "table", "thead",
                                                      "tbody", "tr", "th", "td", "ul", "li", "img", "hr", "blockquote"}
    assert re.findall(r"<img [^>]*>", html) == [f'<img src="plots/plot-x.svg" alt="{_escaped(_one_line(name))}" />']
    assert html.count("<h1>") == 1 and html.count("<h2>") == 2 and "<a " not in html
    for row in re.findall(r"<tr>.*?</tr>", html, re.S):  # every table keeps its columns
        assert len(re.findall(r"<t[hd][ >]", row)) == 2, row
    assert len(re.findall(r"<li>", html)) == 2  # the tree's two nodes, no list made by a name


def test_the_html_report_is_unchanged_by_the_markdown_escaping():
    rep = _hostile_report(NAME)
    html = render_html(rep)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# -- end to end: names in records, through ingest, the rules and `luma report` -------------------

CONTRACT = {"name": "embed-serve", "clauses": [{"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"}]}


def _chain(n: int, evidence) -> dict:
    return evidence.with_trials({
        "record_type": "pex-chain", "evidence_class": "measured",
        "workload": {"name": f"{NAME} {n}", "model": f"model {HOSTILE[2]}", "task": "embedding"},
        "architecture": {"name": f"cpu-{n}", "kind": "cpu", "vendor": "AMD"}, "contract": CONTRACT,
        "pass_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                      "host_memory": {"value": 2, "unit": "GiB"}}},
        "fail_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                      "host_memory": {"value": 1, "unit": "GiB"}}},
        "crossed_dimension": "host_memory", "binding_resource": "host_memory",
        "intervention": {"name": f"int8 {NAME}", "kind": "software"}, "recovered": True, "repetitions": 3})


@pytest.fixture
def hostile_home(luma_home, signed, evidence):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.rules.engine import Engine
    from luma.settings import Settings

    files = [signed(json.loads(json.dumps(_chain(n, evidence))), f"chain-{n}.json") for n in range(2)]
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest(files, submitter="test")
        Engine(kb).run()
    return luma_home


@pytest.mark.parametrize("kind", ["boundary", "design-in"])
def test_a_report_over_hostile_record_names_is_inert(hostile_home, tmp_path, kind):
    pytest.importorskip("matplotlib")
    out = tmp_path / kind
    result = CliRunner().invoke(cli, ["--home", str(hostile_home), "report", kind, "--out", str(out)])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert "alert(1)" in md  # the name is there (inside `code` spans as it is: shown literally)
    html = MD.render(md)
    assert "<script" not in html and "<a " not in html
    assert not re.search(r"<(?!/?(?:h[1-4]|p|em|code|strong|table|thead|tbody|tr|th|td|ul|li|img|hr|blockquote)\b)",
                         html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown, not run
    for table in re.findall(r"<table>.*?</table>", html, re.S):  # a `|` in a name adds no column
        counts = {len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table, re.S)}
        assert len(counts) == 1, table
    assert "<script>alert" not in (out / "report.html").read_text()
