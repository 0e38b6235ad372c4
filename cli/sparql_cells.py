"""The cells of a SPARQL answer's table for people (cli/sparql_table.py lays them out): a number
paired with a unit column becomes a quantity, a resource dimension IRI its record key, other IRIs
shortened, other numbers written without noise."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from luma.cli.terms import INTEGER_DATATYPES as _INTEGER, NUMERIC_DATATYPES, compact, display
from luma.kb.vocab import DIM

#: Columns a plain `unit` column gives the unit of, besides `*Level` and `*Value`: a frontier
#: shift's levels and its absolute change (frontier-shifts); a relative change has none.
_MEASURES = ("level", "value", "before", "after", "absoluteChange")
_HASHED = re.compile(r"^(?:id:)?([a-z][a-z-]*)/([0-9a-f]{8})[0-9a-f]{8,}((?:/[0-9a-z-]+)*)$")


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
            paired = [v for v in variables if v != u and (v in _MEASURES or v.endswith(("Level", "Value")))]
        if paired:
            out[u] = paired
    return out


def _unit_iri(binding: dict | None) -> str | None:
    """The canonical unit a cell names: its IRI, or its local name as a query gives it with
    STRAFTER (`BYTE`, frontier-shifts); None for anything else."""
    from luma.reports.fmt import UNIT_NAMES  # pint (luma.kb.records.units): loaded only for a table

    if binding is None:
        return None
    if binding["type"] == "uri":
        return binding["value"] if binding["value"] in UNIT_NAMES else None
    by_local = {iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1]: iri for iri in UNIT_NAMES}
    return by_local.get(binding["value"]) if binding["type"] in ("literal", "typed-literal") else None


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
    from luma.reports.fmt import dim_key  # pint (luma.kb.records.units): loaded only for a table

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
    from luma.reports.fmt import num  # pint (luma.kb.records.units): loaded only for a table

    x = _number(binding)
    if x is None:
        return Cell(binding["value"], binding["value"])
    text = f"{int(x):,}" if binding.get("datatype") in _INTEGER and x.is_integer() else num(x, 4)
    return Cell(text, binding["value"], folds=False)


def cells(answer: dict) -> tuple[list[str], list[list[Cell]]]:
    """(the columns shown, one row of cells per solution) of a SELECT answer."""
    from luma.reports.fmt import quantity  # pint (luma.kb.records.units): loaded only for a table

    variables = list(answer["head"]["vars"])
    bindings = answer["results"]["bindings"]
    pairs = _unit_pairs(variables)
    absorbed = {u: True for u in pairs}
    rows = []
    for b in bindings:
        row: dict[str, Cell] = {}
        for u, paired in pairs.items():
            unit = _unit_iri(b.get(u))
            if unit is None:
                absorbed[u] = absorbed[u] and b.get(u) is None
                continue
            used = False
            for v in paired:
                x = _number(b.get(v))
                if x is not None:
                    text = quantity(x, unit)
                    row[v] = Cell(text, f"{text} ({b[v]['value']} {_iri(unit, u).full})", folds=False)
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
