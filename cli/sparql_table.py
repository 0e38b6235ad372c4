"""SPARQL answers as tables for people (`luma kb query --format table`); json and csv stay the
canonical SPARQL results, untouched.

A table cell reads the way the reports write it:

* a number in a column paired with a unit column (`unit` pairs with every `…Level` / `…Value`
  column, `fooUnit` with `foo`, `fooLevel`, `fooValue`) becomes a quantity — `1610612736` with
  `unit:BYTE` is `1.5 GiB` — and the unit column, once every unit it holds is shown that way, is
  left out;
* a resource dimension IRI is its record key (`host_memory`); other IRIs are shortened
  (`id:workload/embed-minilm-1a2b3c4d` → `embed-minilm`, a content hash to its first 8 digits,
  without the kind when the column already names it: `chain/c0e34cb7…` under `chain` is
  `c0e34cb7…`); other numbers are written without noise (`2.0E11` → `200,000,000,000`).

The table fits the terminal: columns are as wide as their longest value when that fits, text
columns fold down to a floor when it does not, and an answer that still does not fit is shown
one block per row (psql's expanded display), with full IRIs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_XSD = "http://www.w3.org/2001/XMLSchema#"
#: The XSD numeric datatypes: a literal of one is a number (a quantity here, a number in a
#: spreadsheet: cli/spreadsheet_csv.py).
NUMERIC_DATATYPES = frozenset(_XSD + t for t in (
    "integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "nonPositiveInteger", "negativeInteger", "unsignedInt", "unsignedLong", "unsignedShort",
    "unsignedByte"))
_INTEGER = {_XSD + t for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                               "unsignedInt", "unsignedLong")}
#: Narrowest a folding text column gets before the answer is shown one block per row.
TEXT_FLOOR = 12
#: Columns between two cells (right padding + the box's divider).
GAP = 2
_HASHED = re.compile(r"^(?:id:)?([a-z][a-z-]*)/([0-9a-f]{8})[0-9a-f]{8,}((?:/[0-9a-z-]+)*)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass
class Cell:
    text: str  # as the table shows it
    full: str  # as the expanded display shows it (IRIs whole)
    folds: bool = True  # text that may fold; quantities and numbers never do


def _unit_pairs(variables: Sequence[str]) -> dict[str, list[str]]:
    """{unit variable: the variables whose numbers it gives the unit of}."""
    out = {}
    for u in variables:
        if u != "unit" and not u.endswith("Unit"):
            continue
        stem = u[:-4]
        if stem:
            paired = [v for v in variables if v in (stem, stem + "Level", stem + "Value")]
        else:
            paired = [v for v in variables if v != u and (v in ("level", "value") or v.endswith(("Level", "Value")))]
        if paired:
            out[u] = paired
    return out


def _is_unit(binding: dict | None) -> bool:
    from luma.reports.fmt import UNIT_NAMES

    return binding is not None and binding["type"] == "uri" and binding["value"] in UNIT_NAMES


def _number(binding: dict | None) -> float | None:
    if binding is None or binding.get("type") not in ("literal", "typed-literal"):
        return None
    if binding.get("datatype") not in NUMERIC_DATATYPES:
        return None
    try:
        return float(binding["value"])
    except ValueError:
        return None


def _iri(value: str, column: str) -> Cell:
    from luma.cli.output import compact, display
    from luma.kb.vocab import DIM
    from luma.reports.fmt import dim_key

    if value.startswith(DIM):
        key = dim_key(value)
        return Cell(key, key)
    short, full = display(value), compact(value)
    m = _HASHED.match(full)
    if m:
        kind, digits, rest = m.groups()
        rest = re.sub(r"/([0-9a-f]{8})[0-9a-f]{8,}", r"/\1…", rest)
        short = (f"{digits}…" if kind == column else f"{kind}/{digits}…") + rest
    return Cell(short, full)


def _literal(binding: dict) -> Cell:
    from luma.reports.fmt import num

    x = _number(binding)
    if x is None:
        return Cell(binding["value"], binding["value"])
    text = f"{int(x):,}" if binding.get("datatype") in _INTEGER and x.is_integer() else num(x, 4)
    return Cell(text, binding["value"], folds=False)


def cells(answer: dict) -> tuple[list[str], list[list[Cell]]]:
    """(the columns shown, one row of cells per solution) of a SELECT answer."""
    from luma.reports.fmt import quantity

    variables = list(answer["head"]["vars"])
    bindings = answer["results"]["bindings"]
    pairs = _unit_pairs(variables)
    absorbed = {u: True for u in pairs}
    rows = []
    for b in bindings:
        row: dict[str, Cell] = {}
        for u, paired in pairs.items():
            if not _is_unit(b.get(u)):
                absorbed[u] = absorbed[u] and b.get(u) is None
                continue
            used = False
            for v in paired:
                x = _number(b.get(v))
                if x is not None:
                    text = quantity(x, b[u]["value"])
                    row[v] = Cell(text, f"{text} ({b[v]['value']} {_iri(b[u]['value'], u).full})", folds=False)
                    used = True
            absorbed[u] = absorbed[u] and used
        for v in variables:
            if v in row:
                continue
            term = b.get(v)
            row[v] = (Cell("", "") if term is None else _iri(term["value"], v) if term["type"] == "uri"
                      else Cell(term["value"], term["value"]) if term["type"] == "bnode" else _literal(term))
        rows.append(row)
    shown = [v for v in variables if not absorbed.get(v)]
    return shown, [[r[v] for v in shown] for r in rows]


def _header(name: str, width: int) -> str:
    """The variable's name; split at its camelCase words when the column is narrower."""
    return name if len(name) <= width else _CAMEL.sub(" ", name)


def _widths(columns: list[str], rows: list[list[Cell]]) -> tuple[list[int], list[int], list[int]]:
    """(natural width, width of the values alone, narrowest width) per column."""
    natural, values, floor = [], [], []
    for i, name in enumerate(columns):
        longest = max((len(r[i].text) for r in rows), default=0)
        word = max(len(w) for w in _CAMEL.sub(" ", name).split())
        folds = all(r[i].folds for r in rows)
        natural.append(max(longest, len(name)))
        values.append(max(longest, word))
        floor.append(max(word, min(longest, TEXT_FLOOR) if folds else longest))
    return natural, values, floor


def fit(natural: list[int], values: list[int], floor: list[int], room: int) -> list[int] | None:
    """Column widths that fit `room` terminal columns (gaps included): the natural widths when
    they fit; else headers wrap at their camelCase words first, then the widest text columns fold
    towards their floors; None when even the floors do not fit."""
    gaps = GAP * len(natural) - 1 if natural else 0
    if sum(floor) + gaps > room:
        return None
    widths = list(natural)
    # A header wider than its values wraps onto two lines at once (at any narrower width the
    # header takes two lines anyway), the largest saving first.
    for k in sorted(range(len(widths)), key=lambda k: values[k] - natural[k]):
        if sum(widths) + gaps <= room:
            return widths
        widths[k] = values[k]
    while sum(widths) + gaps > room:  # then fold the widest text column, one terminal column at a time
        k = max((k for k in range(len(widths)) if widths[k] > floor[k]), key=lambda k: widths[k])
        widths[k] -= 1
    return widths


def print_table(answer: dict, width: int | None = None) -> None:
    """A SPARQL JSON answer for people, fitted to `width` columns (default: the terminal's)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(soft_wrap=False, width=width)
    if "boolean" in answer:
        console.print("true" if answer["boolean"] else "false")
        return
    columns, rows = cells(answer)
    count = f"{len(rows)} row{'s' if len(rows) != 1 else ''}"
    widths = fit(*_widths(columns, rows), console.width)
    if widths is None:
        _print_expanded(console, columns, rows, count)
        return
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False, caption=count,
                  collapse_padding=True)
    for name, w in zip(columns, widths, strict=True):
        table.add_column(Text(_header(name, w)), overflow="fold", width=w)
    for r in rows:
        table.add_row(*(Text(c.text) for c in r))
    console.print(table)


def _print_expanded(console, columns: list[str], rows: list[list[Cell]], count: str) -> None:
    """One block per row: `name  value` lines, values folded to the terminal."""
    from rich.table import Table
    from rich.text import Text

    label = max(len(c) for c in columns)
    for n, r in enumerate(rows, 1):
        head = f"-[ row {n} ]"
        console.print(head + "-" * max(console.width - len(head), 0), markup=False, highlight=False)
        grid = Table.grid(padding=(0, 2, 0, 0))
        grid.add_column(min_width=label, no_wrap=True)
        grid.add_column(overflow="fold")
        for name, c in zip(columns, r, strict=True):
            grid.add_row(Text(name), Text(c.full))
        console.print(grid)
    console.print(f"{count} (one block per row: as a table it is wider than {console.width} columns; "
                  "--format csv or json gives the canonical values)", markup=False, highlight=False)
