"""The rendering layer every report shares: a report is data (sections of paragraphs, tables,
plots and trees), and two Jinja2 templates turn it into `report.md` and one self-contained
`report.html` (inline CSS, plots as inline `<svg>`: no scripts, fonts or other files).

A report module (boundary, design-in, partner) only builds a `Report`; `write()` renders it.
`reports/templates/report.{md,html}.j2` lay out any report (record text escaped in both: as
HTML by Jinja2's autoescape, as Markdown by `environment(markdown=True)`);
`<kind>.{md,html}.j2`, when present, extend them (a lead paragraph, a call-out). Output is a
pure function of the `Report`: no clock, no random ids, so rendering the same KB twice gives the
same bytes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import LumaError
from luma.reports import md_escape
from luma.reports.plots import standalone

TEMPLATES = Path(__file__).resolve().parent / "templates"


@dataclass
class Table:
    """Rows of text cells under named columns; `note` says what was left out."""

    id: str
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    note: str = ""


@dataclass
class Plot:
    """One SVG figure (text from `luma.reports.plots`) with its caption."""

    id: str
    svg: str
    caption: str


@dataclass
class Tree:
    """A nested list: each node is {"text": str, "children": [...]} (a derivation tree)."""

    id: str
    root: dict
    caption: str = ""


@dataclass
class Section:
    """One headed part of a report. `empty` is printed when it has no blocks ("none in this KB")."""

    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    blocks: list = field(default_factory=list)
    empty: str = ""
    level: int = 2


@dataclass
class Report:
    """What a template renders. `kind` picks `<kind>.md.j2` / `<kind>.html.j2` when present."""

    kind: str
    title: str
    subtitle: str
    facts: list[tuple[str, str]]
    sections: list[Section]
    callout: str = ""
    footer: str = ""

    def plots(self) -> list[Plot]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Plot)]

    def tables(self) -> list[Table]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Table)]


@dataclass
class Written:
    """Paths a render wrote and how long it took."""

    markdown: Path
    html: Path
    plots: list[Path]
    seconds: float

    def paths(self) -> list[Path]:
        return [self.markdown, self.html, *self.plots]


# -- Jinja2 -------------------------------------------------------------------------------------

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*\s](?:[^*]*[^*\s])?)\*\*")  # as md_escape._MARK: what CommonMark makes bold


def _inline(text):
    """HTML of a paragraph: escaped, then the two bits of Markdown reports use (`code`, **bold**);
    the record spans of a `Marked` text (reports/md_escape.py) only escaped, never marks."""
    # jinja2/markupsafe (~0.1 s) load only when a report is written, not with its types
    from markupsafe import Markup, escape

    plain, records = md_escape.stand_ins(text)
    html = str(escape(plain))
    html = _CODE.sub(r"<code>\1</code>", html)
    html = _BOLD.sub(r"<strong>\1</strong>", html)
    return Markup(md_escape.restore(html, records, lambda t: str(escape(t))))


def _html_finalize(value):
    """Every `{{ … }}` of an HTML template: a private-use character a record smuggled in (the
    Markdown side's stand-ins) removed, as in Markdown."""
    if isinstance(value, str) and ("\ue000" in value or "\ue001" in value):
        return value.replace("\ue000", "").replace("\ue001", "")
    return value


def _md_finalize(value) -> str:
    """Every `{{ … }}` of a Markdown template: text (reports/md_escape.py) unless a filter already
    made it Markdown (Markup: `md_inline`, `md_cell`, `md_row`, `md_bracketed`, or an explicit
    `| safe` on a macro's output). Escaping is the default, so a new template cannot forget it;
    forgetting `| safe` only escapes twice."""
    return str(value) if hasattr(value, "__html__") else md_escape.text(value)


def _md_filter(fn):
    def markdown(value, *args, **kwargs):
        # jinja2/markupsafe (~0.1 s) load only when a report is written, not with its types
        from markupsafe import Markup

        return Markup(fn(value, *args, **kwargs))
    return markdown


def _md_row(cells, marks: bool = True) -> str:
    """A Markdown table row: cells with LUMA's `code`/**bold** (as HTML's <td>), or plain text
    (`marks=False`, as HTML's <th>)."""
    cell = ((lambda c: md_escape.inline(c, in_table=True)) if marks else
            (lambda c: md_escape.text(c, at_line_start=False, closed=True)))
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def environment(markdown: bool = False):
    """The Jinja2 environment over `reports/templates/`: HTML templates autoescaped as HTML; with
    `markdown`, every value written into a Markdown template escaped as Markdown text."""
    # jinja2 (~0.1 s) loads only when a report is written, not with its types
    import jinja2

    common = dict(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                  trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    if markdown:
        env = jinja2.Environment(autoescape=False, finalize=_md_finalize, **common)
        env.filters.update(md_inline=_md_filter(md_escape.inline),
                           md_cell=_md_filter(lambda v: md_escape.inline(v, in_table=True)),
                           md_row=_md_filter(_md_row),
                           md_bracketed=_md_filter(lambda v: md_escape.text(v, False, in_brackets=True)))
    else:
        env = jinja2.Environment(autoescape=lambda name: bool(name) and ".html" in name,
                                 finalize=_html_finalize, **common)
        env.filters.update(inline=_inline)
    env.tests.update(table=lambda b: isinstance(b, Table), plot=lambda b: isinstance(b, Plot),
                     tree=lambda b: isinstance(b, Tree))
    return env


def _template(env, kind: str, ext: str):
    name = f"{kind.replace('-', '_')}.{ext}.j2"
    return env.get_template(name if (TEMPLATES / name).is_file() else f"report.{ext}.j2")


def render_markdown(report: Report, env=None) -> str:
    """The report as Markdown (plots referenced as `plots/<id>.svg`); every string from the
    report written as inert text (reports/md_escape.py), as the HTML escapes it."""
    env = env or environment(markdown=True)
    return _template(env, report.kind, "md").render(report=report)


def render_html(report: Report, env=None) -> str:
    """The report as one self-contained HTML page."""
    # jinja2/markupsafe (~0.1 s) load only when a report is written, not with its types
    from markupsafe import Markup

    env = env or environment()
    # The SVG is matplotlib's output (its text already escaped), embedded as markup.
    svgs = {p.id: Markup(p.svg) for p in report.plots()}
    return _template(env, report.kind, "html").render(report=report, svgs=svgs)


def write(report: Report, out: Path) -> Written:
    """Render `report` into the folder `out`: report.md, report.html and plots/<id>.svg."""
    start = time.perf_counter()
    out = Path(out)
    try:
        (out / "plots").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LumaError(f"cannot create the output folder: {exc.strerror}", source=str(out)) from None
    md, html = out / "report.md", out / "report.html"
    md.write_text(render_markdown(report), encoding="utf-8")
    html.write_text(render_html(report), encoding="utf-8")
    plots = []
    for plot in report.plots():
        path = out / "plots" / f"{plot.id}.svg"
        path.write_text(standalone(plot.svg), encoding="utf-8")
        plots.append(path)
    return Written(md, html, plots, time.perf_counter() - start)
