"""Literal terms in N-Quads form, read by the XSD lexical rules (as Oxigraph reads them).

Each parser returns the value, or None for a form outside the datatype's lexical space; the
shape checker (`luma.kb.ingest.shacl`) builds its datatype tests on them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache

from luma.kb.vocab import RDF, XSD

_XSD_STRING = XSD + "string"

_DATETIME = re.compile(r"[0-9]{4,}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?")
_SPECIAL_DOUBLES = {"INF": math.inf, "+INF": math.inf, "-INF": -math.inf, "NaN": math.nan}


def double_value(lex: str) -> float | None:
    # Python's float() reads a superset of the XSD forms; outside these characters it accepts
    # only its own spellings ("inf", "nan", "1_0", " 1"), which XSD does not.
    if lex.strip("0123456789.eE+-"):
        return _SPECIAL_DOUBLES.get(lex)
    try:
        return float(lex)
    except ValueError:
        return None


def integer_value(lex: str) -> int | None:
    if lex.strip("0123456789+-"):
        return None
    try:
        return int(lex)
    except ValueError:
        return None


BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
_boolean = BOOLEANS.get


@lru_cache(maxsize=1024)  # a batch shares its ingestion time
def datetime_value(lex: str) -> datetime | None:
    if not _DATETIME.fullmatch(lex):
        return None
    try:  # month, day and time ranges
        return datetime.fromisoformat(lex)
    except ValueError:
        return None


#: datatype IRI -> parser of its lexical forms
LEXICAL: dict[str, Callable[[str], object]] = {
    XSD + "double": double_value,
    XSD + "integer": integer_value,
    XSD + "boolean": _boolean,
    XSD + "dateTime": datetime_value,
}
NUMERIC = {XSD + "double", XSD + "integer"}

_UNESCAPE = re.compile(r'\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[tbnrf"\'\\])')
_SIMPLE_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda m: _SIMPLE_ESCAPES.get(m[1]) or chr(int(m[1][1:], 16)), text)


def literal(term: str) -> tuple[str, str] | None:
    """(escaped lexical form, datatype IRI) of an N-Quads literal term, None for IRIs and blank nodes."""
    if term[:1] != '"':
        return None
    end = term.rfind('"')
    rest = term[end + 1 :]
    if not rest:
        return term[1:end], _XSD_STRING
    if rest[0] == "@":
        return term[1:end], RDF + "langString"
    return term[1:end], rest[3:-1]


def string_of(term: str) -> str | None:
    """SPARQL str(): the lexical form of a literal, the text of an IRI; None for a blank node."""
    if term[:1] == "<":
        return term[1:-1]
    lit = literal(term)
    return None if lit is None else unescape(lit[0])
