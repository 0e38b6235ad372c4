"""Text as inert Markdown: what `report.md` does with every string a report carries.

A report's strings hold names and free text from records (workloads, interventions, partners,
models, contracts, units …), which anyone who can ingest a record chooses. Written into Markdown
as they are, `<script>` would reach a renderer that passes HTML through, `[x](javascript:…)`
would be a link, `| a | b |` would add table columns and `# …` a heading. So every string is
written as text, escaped wherever a character could mean something (tests/reports/
test_markdown_escaping.py renders arbitrary text and checks it comes out as exactly that text):

* `<` as `&lt;` unless a space or `=` follows (no tag, comment or autolink can start; `<=`
  stays readable), `&` as `&amp;` where an entity could start; `>` only means something at the
  start of a line (a quote), where it is escaped;
* backslash-escaped: `\\`, `` ` ``, `*`, `|`, `~`, `_` at a word's edge, `]` where it could close
  a link (before `(`, `[`, `:`), a last `[` or `]` unless a table cell's ` |` or a mark
  follows, every bracket inside an image's `[…]`, and at the start of a line `#`, `-`, `+`,
  `=`, `>`, `[` and the `.` of `1.`;
* a line break becomes a space (a paragraph or a table cell is one line; HTML shows a line
  break in a paragraph as a space too).

The report builders write two bits of Markdown themselves, `` `code` `` and `**bold**`; the HTML
renderer (render._inline) honours exactly those two in paragraphs, cells and notes, and so does
`inline()` here, escaping everything else. Titles, headings, captions and column names are
plain text in both (`text()`).

A name from a record may itself hold `` ` `` or `**`: a builder inserts it with `fmt()` or
`record()`, which make a `Marked` string (equal to its plain text) that remembers the record's
spans; `inline()` and the HTML renderer find LUMA's marks around those spans, never inside them,
and show the spans' characters literally (`**{name}**` stays bold, a `*` in the name stays a `*`).
"""

from __future__ import annotations

import re
import string

_LINE_BREAK = re.compile(r"\r\n?|\n")
#: Characters that mean something wherever they are, escaped with a backslash; `_` only at a
#: word's edge (`host_memory` stays readable: CommonMark never reads an intraword `_` as emphasis).
_ALWAYS = r"[\\`*|~]|(?<![^\W_])_|_(?![^\W_])"
#: ... and `]` where it could close a link, image or reference (`](`, `][`, `]:`).
_ACTIVE = re.compile(_ALWAYS + r"|\](?=[(\[:])")
#: ... and `[` or `]` at the end, where the template's next character is unknown.
_ACTIVE_OPEN_END = re.compile(_ALWAYS + r"|\](?=[(\[:])|[\[\]]$")
#: ... and every bracket, inside a link's or image's `[…]`.
_ACTIVE_IN_BRACKETS = re.compile(_ALWAYS + r"|[\[\]]")
#: `<` before anything but a space or `=` (a tag, comment, autolink: `<=` stays as it is), `&`
#: where it could start an entity: as entities.
_HTML = re.compile(r"<(?![\s=])|&(?=[#A-Za-z0-9])")
_ENTITY = {"<": "&lt;", "&": "&amp;"}
#: What starts a block at the start of a line (after up to three spaces): a heading, a list item,
#: a block quote, a thematic break or setext underline, a link reference definition, an ordered
#: list item (`1.` / `1)` then a space).
_BLOCK_START = re.compile(r"(#|[-+=>\[])|\d{1,9}([.)])(?=\s|$)")
#: LUMA's own marks (the same two the HTML renderer honours; code first, as it does).
# Bold only where CommonMark sees it: content that neither starts nor ends with a space (`** **`
# at a line's start is a thematic break, `** x**` no emphasis); other asterisks stay text.
_MARK = re.compile(r"`([^`]+)`|\*\*([^*\s](?:[^*]*[^*\s])?)\*\*")


def text(value, at_line_start: bool = True, in_brackets: bool = False, closed: bool = False) -> str:
    """`value` as Markdown that shows exactly its characters, on one line (a leading indent,
    which a paragraph or cell drops anyway, is dropped: four spaces would start a code block).
    `in_brackets`: inside a link's or image's `[…]`, where every bracket is escaped (an unclosed
    `[` would pair with the template's `]`). `closed`: what follows is known not to continue a
    link (a table cell's ` |`, a code span), so a last `]` stays as it is."""
    s = _LINE_BREAK.sub(" ", _clean(value))
    s = _HTML.sub(lambda m: _ENTITY[m.group(0)], s)
    active = _ACTIVE_IN_BRACKETS if in_brackets else _ACTIVE if closed else _ACTIVE_OPEN_END
    s = active.sub(lambda m: "\\" + m.group(0), s)
    if at_line_start:
        s = s.lstrip(" \t")
        m = _BLOCK_START.match(s)
        if m:  # the mark (`#`, `-` …, or the `.` / `)` after the digits) escaped
            k = m.start(1) if m.group(1) else m.start(2)
            s = s[:k] + "\\" + s[k:]
    return s


def _code(content: str, in_table: bool) -> str:
    """A code span: its content shown literally by any renderer (never HTML, never a link);
    inside a table a `|` still splits the row unless escaped (GFM). Content with backticks (a
    record's) gets a longer fence and a space inside each end, which CommonMark strips."""
    content = _LINE_BREAK.sub(" ", content)
    content = content.replace("|", "\\|") if in_table else content
    if "`" not in content:
        return "`" + content + "`"
    fence = "`" * (max(len(r) for r in re.findall(r"`+", content)) + 1)
    return fence + " " + content + " " + fence


def inline(value, in_table: bool = False) -> str:
    """A paragraph, cell or note: `code` and **bold** as written, everything else as text(). A
    table cell holds inline content only, so nothing in it can start a block. Record spans of a
    `Marked` value are text wherever they are: no mark starts, ends or is found inside them."""
    s, texts = stand_ins(value)
    whole = lambda piece: restore(piece, texts)  # noqa: E731 - a piece with its records back
    out, pos = [], 0
    for m in _MARK.finditer(s):  # text before a mark is closed by it
        if m.start() > pos:
            out.append(text(whole(s[pos:m.start()]), at_line_start=pos == 0 and not in_table, closed=True))
        if m.group(1) is not None:
            out.append(_code(whole(m.group(1)), in_table))
        else:
            out.append("**" + _bold(m.group(2), in_table, whole) + "**")
        pos = m.end()
    if pos < len(s):
        out.append(text(whole(s[pos:]), at_line_start=pos == 0 and not in_table, closed=in_table))
    return "".join(out)


def _bold(content: str, in_table: bool, whole=lambda piece: piece) -> str:
    """Bold content: code spans inside it kept, the rest text (no bold within bold)."""
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`", content):
        out.append(text(whole(content[pos:m.start()]), at_line_start=False, closed=True))
        out.append(_code(whole(m.group(1)), in_table))
        pos = m.end()
    out.append(text(whole(content[pos:]), at_line_start=False, closed=True))  # closed by the `**`
    return "".join(out)


# -- record text inside LUMA's own text ------------------------------------------------------------
#
# A paragraph or cell is LUMA's text (its `code` and **bold** honoured) with values from records
# inserted. `Marked` is such a string: equal to its plain text (so `in`, `==` and the tests over
# report data see the words), with the spans that came from records remembered, so that both
# renderers show those spans literally — a `*` or `` ` `` in a workload's name never opens a mark,
# even inside `**…**` or `` `…` `` the builder wrote around it. f-strings drop the spans (they make
# a plain `str`): build such text with `fmt()`.

_FORMATTER = string.Formatter()
#: Stand-ins for record spans while marks are found (private-use characters and digits: no mark,
#: no escape); a record cannot contain them (record() and fmt() strip U+E000 and U+E001).
_OPEN, _CLOSE = "\ue000", "\ue001"
_STAND_IN = re.compile(_OPEN + r"(\d+)" + _CLOSE)


class Marked(str):
    """LUMA's text with the spans (start, end) that came from records, shown literally."""

    literal: tuple[tuple[int, int], ...] = ()

    def __new__(cls, value="", literal=()):
        s = super().__new__(cls, value)
        s.literal = tuple(literal)
        return s

    def __add__(self, other):
        return _concat([self, other])

    def __radd__(self, other):
        return _concat([other, self])


def _clean(value) -> str:
    return str(value).replace(_OPEN, "").replace(_CLOSE, "")


def record(value) -> Marked:
    """`value` (a name or free text from a record) as text both renderers show literally."""
    s = _clean(value)
    return Marked(s, [(0, len(s))] if s else [])


def own(value) -> Marked:
    """LUMA's own text (its `code` and **bold** honoured), for `fmt()` arguments."""
    return value if isinstance(value, Marked) else Marked(str(value))


def _concat(parts) -> Marked:
    text, spans = [], []
    n = 0
    for p in parts:
        p = p if isinstance(p, Marked) else own(p)
        spans.extend((a + n, b + n) for a, b in p.literal)
        text.append(str.__str__(p))
        n += len(p)
    return Marked("".join(text), spans)


def fmt(template: str, *args, **kwargs) -> Marked:
    """`template.format(*args, **kwargs)` where the template is LUMA's text and every argument
    is record text (shown literally) unless it is `Marked` (its own spans kept: `own()`,
    `record()`, another `fmt()`)."""
    parts, auto = [], 0
    for lit, field, spec, conv in _FORMATTER.parse(template):
        parts.append(own(lit))
        if field is None:
            continue
        if field == "":
            field, auto = str(auto), auto + 1
        value, _ = _FORMATTER.get_field(field, args, kwargs)
        if isinstance(value, Marked) and not spec and not conv:
            parts.append(value)
        else:
            value = _FORMATTER.convert_field(value, conv) if conv else value
            parts.append(record(format(value, spec or "")))
    return _concat(parts)


def join(sep: str, parts) -> Marked:
    """`sep.join(parts)` keeping each part's record spans (a plain `str` part is LUMA's text)."""
    out = []
    for i, p in enumerate(parts):
        if i:
            out.append(sep)
        out.append(p)
    return _concat(out)


def stand_ins(value) -> tuple[str, list[str]]:
    """`value` with each record span replaced by a stand-in (no mark can match inside it), and
    the spans' texts; `restore()` puts them back."""
    s = str.__str__(value) if isinstance(value, Marked) else str(value)
    spans = value.literal if isinstance(value, Marked) else ()
    out, texts, pos = [], [], 0
    for a, b in sorted(spans):
        if a < pos:  # overlapping spans cannot come from _concat; ignore defensively
            continue
        out.append(_clean(s[pos:a]))
        out.append(f"{_OPEN}{len(texts)}{_CLOSE}")
        texts.append(_clean(s[a:b]))
        pos = b
    out.append(_clean(s[pos:]))
    return "".join(out), texts


def restore(s: str, texts: list[str], each=lambda t: t) -> str:
    """`s` with every stand-in replaced by `each(its text)`."""
    return _STAND_IN.sub(lambda m: each(texts[int(m.group(1))]), s) if texts else s
