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

from luma.cli.output import console as output_console
from luma.cli.sparql_cells import Cell, cells

#: Narrowest a folding text column gets before the answer is shown one block per row.
TEXT_FLOOR = 12
#: Columns between two cells (right padding + the box's divider).
GAP = 2
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


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
    from rich.table import Table
    from rich.text import Text

    console = output_console(width=width)
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
