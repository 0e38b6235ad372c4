"""CSV that people open in a spreadsheet (`--format csv`), safe to open.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (and Excel strips a
leading tab or carriage return first), so a workload named `=HYPERLINK(…)` in a record would run
on the reader's machine. Every text cell starting with one of those characters gets a leading
`'`, OWASP's recommendation against CSV injection: Excel, LibreOffice and Google Sheets show the
text and do not evaluate it.

Numbers stay numbers: a cell is escaped by its *type*, not by its text, so `-3.5` from a numeric
column (a Python int/float/Decimal, or a SPARQL literal typed xsd:decimal, xsd:double …) is
written as it is while the text `-x` becomes `'-x`. A numeric literal whose lexical form is not
a finite number (`"=1+1"^^xsd:integer`, `"-INF"^^xsd:double`) is written as text, escaped: the
type is a claim of the record, the text is what the spreadsheet reads.

`--raw` (cli/output.py) writes every cell as it is: for programs, never for a spreadsheet. For
`luma kb query`, `--format csv --raw` is the W3C SPARQL 1.1 CSV results format byte for byte and
`--format json` the W3C JSON results format; `--format csv` alone is this module's CSV.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from numbers import Real

import click

from luma.cli.terms import NUMERIC_DATATYPES
from luma.errors import StoreError

#: First characters a spreadsheet reads as a formula (OWASP "CSV Injection": =, +, -, @, tab, CR).
FORMULA_START = frozenset("=+-@\t\r")
#: A finite number as XSD writes one (what a spreadsheet also reads as a number).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Rows buffered before they are written out (a streamed answer may have millions).
_CHUNK_ROWS = 10_000


def escape_text(text: str) -> str:
    """`text` as a spreadsheet shows it without evaluating it: a leading `'` when it would start
    a formula."""
    return "'" + text if text[:1] in FORMULA_START else text


def cell(value):
    """One cell of a row of Python values: finite numbers (and booleans) as they are, None empty,
    everything else as escaped text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, (Real, Decimal)) and math.isfinite(value):
        return value
    return escape_text(str(value))


def rows_csv(rows: Iterable[dict], columns: Sequence[str], raw: bool = False) -> str:
    """Rows (dicts of scalars) as CSV text under `columns`; cells escaped unless `raw`."""
    buf = io.StringIO()
    # CRLF, as RFC 4180 and SPARQL CSV end lines; it also makes the csv module quote a cell
    # holding a bare CR, which with "\n" it leaves unquoted (a broken row).
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(columns if raw else [escape_text(c) for c in columns])
    for row in rows:
        values = [row.get(c) for c in columns]
        writer.writerow(values if raw else [cell(v) for v in values])
    return buf.getvalue()


def sparql_csv(answer) -> Iterator[str]:
    """A SELECT or ASK answer spooled as SPARQL TSV (kb/store/base.QueryOutput), as chunks of
    escaped CSV in the layout of SPARQL CSV (header of variable names, CRLF line ends). TSV,
    not CSV, is read because it keeps each term's kind and datatype, which escaping needs."""
    import pyoxigraph as ox

    tsv = ox.QueryResultsFormat.TSV
    try:
        parsed = (ox.parse_query_results(path=answer.file, format=tsv) if answer.file is not None
                  else ox.parse_query_results(answer.body, tsv))
        if isinstance(parsed, ox.QueryBoolean):
            yield "true" if bool(parsed) else "false"  # as SPARQL CSV writes an ASK answer
            return
        cell = _term_cell(ox)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n")
        writer.writerow([escape_text(v.value) for v in parsed.variables])
        for n, solution in enumerate(parsed, 1):
            writer.writerow(map(cell, solution))  # terms in the order of the variables, None unbound
            if n % _CHUNK_ROWS == 0:
                yield buf.getvalue()
                buf.seek(0)
                buf.truncate()
    except SyntaxError as exc:  # an endpoint's answer that broke off, or is not TSV
        raise StoreError(f"the store's answer broke off or is not SPARQL TSV: {exc}") from None
    yield buf.getvalue()


def print_sparql_csv(answer) -> None:
    """A SELECT/ASK answer spooled as SPARQL TSV, as CSV for people (formula-leading text
    escaped, numeric literals as they are: cli/spreadsheet_csv.py), streamed."""
    last = ""
    for chunk in sparql_csv(answer):
        if chunk:
            click.echo(chunk, nl=False)
            last = chunk
    if not last.endswith("\n"):
        click.echo()  # an ASK answer: every answer ends with a newline, as the raw one does


def _term_cell(ox):
    """cell(term): one SPARQL term as SPARQL CSV writes it (IRIs and literals as their value,
    blank nodes as `_:id`, unbound as empty), escaped; a numeric literal that is a number as it
    is. Names are bound once: this runs for every cell of answers of a million rows."""
    literal, blank = ox.Literal, ox.BlankNode
    starts, numeric, number = FORMULA_START, NUMERIC_DATATYPES, _NUMBER.fullmatch

    def cell(term) -> str:
        if term is None:
            return ""
        kind = type(term)
        if kind is blank:
            return "_:" + term.value
        value = term.value
        if value[:1] not in starts:
            return value
        if kind is literal and term.datatype.value in numeric and number(value):
            return value  # a number (-3.5): only text is escaped
        return "'" + value

    return cell
