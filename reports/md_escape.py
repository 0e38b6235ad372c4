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
"""

from __future__ import annotations

import re

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
_MARK = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")


def text(value, at_line_start: bool = True, in_brackets: bool = False, closed: bool = False) -> str:
    """`value` as Markdown that shows exactly its characters, on one line (a leading indent,
    which a paragraph or cell drops anyway, is dropped: four spaces would start a code block).
    `in_brackets`: inside a link's or image's `[…]`, where every bracket is escaped (an unclosed
    `[` would pair with the template's `]`). `closed`: what follows is known not to continue a
    link (a table cell's ` |`, a code span), so a last `]` stays as it is."""
    s = _LINE_BREAK.sub(" ", str(value))
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
    inside a table a `|` still splits the row unless escaped (GFM)."""
    content = _LINE_BREAK.sub(" ", content)
    return "`" + (content.replace("|", "\\|") if in_table else content) + "`"


def inline(value, in_table: bool = False) -> str:
    """A paragraph, cell or note: `code` and **bold** as written, everything else as text(). A
    table cell holds inline content only, so nothing in it can start a block."""
    s, out, pos = str(value), [], 0
    for m in _MARK.finditer(s):  # text before a mark is closed by it
        if m.start() > pos:
            out.append(text(s[pos:m.start()], at_line_start=pos == 0 and not in_table, closed=True))
        if m.group(1) is not None:
            out.append(_code(m.group(1), in_table))
        else:
            out.append("**" + _bold(m.group(2), in_table) + "**")
        pos = m.end()
    if pos < len(s):
        out.append(text(s[pos:], at_line_start=pos == 0 and not in_table, closed=in_table))
    return "".join(out)


def _bold(content: str, in_table: bool) -> str:
    """Bold content: code spans inside it kept, the rest text (no bold within bold)."""
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`", content):
        out.append(text(content[pos:m.start()], at_line_start=False, closed=True))
        out.append(_code(m.group(1), in_table))
        pos = m.end()
    out.append(text(content[pos:], at_line_start=False, closed=True))  # closed by the `**`
    return "".join(out)
