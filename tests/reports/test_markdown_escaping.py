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


# -- record text inside LUMA's own marks (md_escape.Marked: fmt / record) ------------------------

from luma.reports.md_escape import Marked, fmt, own, record  # noqa: E402
from luma.reports.render import _inline  # noqa: E402

#: What a record's name may hold that LUMA's own two marks (and Markdown) would act on.
MARKY = ["`tick`", "_u_", "a ``` b", "`", "x*y", "*", "**", "a\\", "` x `"]
PRIVATE = re.compile("[\ue000\ue001]")


def _texts(html: str) -> str:
    """The text of rendered HTML, tags dropped and entities read."""
    import html as html_lib

    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


@pytest.mark.parametrize("name", MARKY + HOSTILE)
def test_record_text_inside_the_reports_marks_is_literal_in_both_outputs(name):
    para = fmt("Deploy **{}** at `{}` and {} (**{}**)", name, name, name, own("`own code`"))
    want = _one_line(f"Deploy {name} at {name} and {name} (own code)")
    cell = MD.render("| h |\n| --- |\n| " + inline(para, in_table=True) + " |\n")
    assert cell.count("<td") == 1
    for md in (MD.render(inline(para)), re.search(r"<td>(.*)</td>", cell, re.S).group(1)):
        assert re.sub(r"\s+", " ", _texts(md)).strip() == re.sub(r"\s+", " ", want).strip(), md
        assert md.count("<strong>") == 2 and md.count("<code>") == 2, md  # LUMA's own marks, no more
        assert "<script" not in md and "<a " not in md and "<em>" not in md
    html = str(_inline(para))
    assert html.count("<strong>") == 2 and html.count("<code>") == 2 and "<script" not in html
    assert _texts(html) == f"Deploy {name} at {name} and {name} (own code)"
    assert not PRIVATE.search(inline(para) + html)


def test_marked_text_is_its_words_and_ordinary_names_render_as_before():
    s = fmt("Deploy `{}` on {}", "embed-minilm", "cpu-1") + " and **more**"
    assert isinstance(s, Marked) and s == "Deploy `embed-minilm` on cpu-1 and **more**"
    assert inline(s) == inline(str(s)) and str(_inline(s)) == str(_inline(str(s)))
    assert record("a\ue000b\ue001") == "ab"  # the stand-ins' characters cannot come from a record
    assert inline("x \ue0000\ue001 y") == "x 0 y" and not PRIVATE.search(str(_inline("\ue0000\ue001")))


def test_a_whole_cell_from_a_record_is_literal():
    rep = Report("boundary", "t", "s", [("Workload", record("**bold** `tick`"))],
                 [Section("s", "S", [record("_u_ **b**")], [Table("t", ["a"], [[record("`tick` | a | b |")]])])])
    md, html = render_markdown(rep), render_html(rep)
    rendered = MD.render(md)
    assert "<strong>b" not in rendered and "<code>tick" not in rendered and "<em>" not in rendered
    assert "<strong>b" not in html and "<code>tick" not in html
    assert "**bold** `tick`" in _texts(rendered) and "`tick` | a | b |" in _texts(rendered)
    assert not PRIVATE.search(md + html)


MARKED_NAME = "**bold** `tick` _u_ [x](javascript:alert(1)) <script>alert(1)</script> | a | b |"


def _marked_chain(n: int, evidence) -> dict:
    chain = _chain(n, evidence)
    chain["workload"]["name"] = f"wl {MARKED_NAME} {n}"
    chain["intervention"]["name"] = f"iv {MARKED_NAME}"
    chain["contract"] = dict(CONTRACT, name=f"c {MARKED_NAME}")
    chain["architecture"]["name"] = f"arch {MARKED_NAME} {n}"
    return chain


@pytest.fixture
def marked_home(luma_home, signed, evidence):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.rules.engine import Engine
    from luma.settings import Settings

    files = [signed(json.loads(json.dumps(_marked_chain(n, evidence))), f"chain-{n}.json") for n in range(2)]
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest(files, submitter="test")
        Engine(kb).run()
    return luma_home


@pytest.mark.parametrize("kind", ["boundary", "design-in"])
def test_record_names_with_marks_render_literally_in_markdown_and_html(marked_home, tmp_path, kind):
    """Workload, intervention, contract and architecture names holding `**bold**`, `` `tick` ``,
    `_u_`, a link, a script and a table row: shown as those characters in report.md (as
    markdown-it renders it) and in report.html, while LUMA's own bold and code still render."""
    pytest.importorskip("matplotlib")
    out = tmp_path / kind
    result = CliRunner().invoke(cli, ["--home", str(marked_home), "report", kind, "--out", str(out)])
    assert result.exit_code == 0, result.output
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert not PRIVATE.search(md + page)
    for html in (MD.render(md), page):
        assert "<strong>bold</strong>" not in html and "<code>tick</code>" not in html and "<em>u</em>" not in html
        assert "<script>alert" not in html and 'href="javascript' not in html
        assert "<strong>" in html and "<code>" in html  # LUMA's own marks
        assert MARKED_NAME in re.sub(r"\s+", " ", _texts(html))
    if kind == "boundary":  # each of the four names, with the marks the builder puts around some of them
        for html in (MD.render(md), page):
            text = _texts(html)
            for what in ("wl", "iv", "c", "arch"):
                assert f"{what} {MARKED_NAME}" in text, what
