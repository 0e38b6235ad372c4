"""How RDF terms read in a table for people: IRIs shortened with the project's prefixes and their
record keys, and which literal datatypes are numbers (cli/sparql_table.py, cli/spreadsheet_csv.py)."""

from __future__ import annotations

import re

from luma.kb.vocab import PREFIXES

_XSD = "http://www.w3.org/2001/XMLSchema#"
#: The XSD numeric datatypes: a literal of one is a number (a quantity here, a number in a
#: spreadsheet: cli/spreadsheet_csv.py).
NUMERIC_DATATYPES = frozenset(_XSD + t for t in (
    "integer", "decimal", "double", "float", "int", "long", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "nonPositiveInteger", "negativeInteger", "unsignedInt", "unsignedLong", "unsignedShort",
    "unsignedByte"))
INTEGER_DATATYPES = {_XSD + t for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger",
                                        "positiveInteger", "unsignedInt", "unsignedLong")}


def compact(value: str) -> str:
    """Shorten IRIs with the project's prefixes for display."""
    for prefix, ns in PREFIXES.items():
        if value.startswith(ns) and len(value) > len(ns):
            return f"{prefix}:{value[len(ns):]}"
    return value


_ENTITY_SLUG = re.compile(r"^id:(workload|architecture|intervention|model|agent)/(.+?)(?:-[0-9a-f]{8}){0,2}$")
_HASHED = re.compile(r"^id:(chain|record|state|contract)/([0-9a-f]{10})[0-9a-f]+$")


def display(value: str) -> str:
    """Tables only: IRIs shortened for reading (`id:workload/embed-minilm-1a2b3c4d` -> `embed-minilm`)."""
    short = compact(value)
    m = _ENTITY_SLUG.match(short)
    if m:
        return m.group(2)
    m = _HASHED.match(short)
    if m:
        return f"{m.group(1)}/{m.group(2)}…"
    return short
