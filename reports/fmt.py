"""Quantities as people read them: the KB keeps canonical units (bytes, seconds, bytes/s ...),
reports print "8 MiB", "0.79 ms", "3.35 TB/s" and name the unit once per axis or column."""

from __future__ import annotations

import math

from luma.kb.records.units import CANONICAL_UNITS
from luma.kb.vocab import DIM, EVIDENCE_CLASSES, ID, LUMA

#: Canonical unit IRI -> canonical unit name ("byte", "second", ...).
UNIT_NAMES = {iri: name for name, iri in CANONICAL_UNITS.items()}
#: Evidence class IRI -> record spelling ("measured", "vendor-claim" ...).
CLASS_NAMES = {iri: name for name, iri in EVIDENCE_CLASSES.items()}
CLASS_ORDER = list(EVIDENCE_CLASSES)

_BINARY = [("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)]
_DECIMAL = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)]
_SHORT = {"core": "core", "accelerator": "accelerator", "token": "token", "block": "block", "request": "request",
          "watt": "W", "joule": "J", "hertz": "/s", "request / second": "request/s", "token / second": "token/s",
          "FLOP / second": "FLOP/s", "dimensionless": "", "euro": "EUR"}


def num(x: float, sig: int = 3) -> str:
    """A number without noise: integers as integers, large values grouped, others to `sig` digits."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{sig}g}"


def _exact(q: float) -> str | None:
    """`q` with at most two decimals when that is exact (8.0 -> "8", 1.5 -> "1.5"), else None."""
    if abs(q - round(q, 2)) > 1e-9 * max(1.0, abs(q)):
        return None
    return f"{round(q, 2):,.2f}".rstrip("0").rstrip(".") if abs(q) >= 10_000 else f"{round(q, 2):g}"


def bytes_text(value: float, per_second: bool = False) -> str:
    """Bytes in the shortest exact binary or decimal unit ("8 MiB", "160 GB"), else 3 digits."""
    suffix = "/s" if per_second else ""
    candidates = []
    for table in ((_DECIMAL, _BINARY) if per_second else (_BINARY, _DECIMAL)):
        for name, size in table:
            text = _exact(value / size)
            if text is not None and abs(value) >= size and abs(value) / size < 10_000:
                candidates.append(f"{text} {name}{suffix}")
                break
    if candidates:
        return min(candidates, key=len)
    if abs(value) < 1024:
        return f"{num(value)} B{suffix}"
    name, size = next(((n, s) for n, s in (_DECIMAL if per_second else _BINARY) if abs(value) >= s))
    return f"{num(value / size)} {name}{suffix}"


def binary_text(value: float) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1, to 3 digits ("74.5 GiB",
    "7.13 MiB"): one convention for figures a model computes (memory per device ...), never a
    decimal GB beside a GiB."""
    if value is None or not math.isfinite(value):
        return "n/a"
    for name, size in _BINARY:
        if abs(value) >= size:
            return f"{num(value / size)} {name}"
    return f"{num(value)} B"


def seconds_text(value: float) -> str:
    if value != 0 and abs(value) < 1e-3:
        return f"{num(value * 1e6)} µs"
    if abs(value) < 1:
        return f"{num(value * 1e3)} ms"
    return f"{num(value)} s"


def quantity(value: float | None, unit: str | None) -> str:
    """A canonical value and its unit (name or IRI) as text."""
    if value is None:
        return "n/a"
    name = UNIT_NAMES.get(unit, unit) if unit else "dimensionless"
    if name == "byte":
        return bytes_text(value)
    if name == "byte / second":
        return bytes_text(value, per_second=True)
    if name == "second":
        return seconds_text(value)
    short = _SHORT.get(name, name)
    if name in ("core", "accelerator", "token", "block", "request") and value != 1:
        short += "s"
    return f"{num(value)} {short}".strip()


def axis_scale(unit: str | None, values: list[float]) -> tuple[float, str]:
    """(divisor, axis label unit) that puts `values` in a readable range (seconds -> ms ...)."""
    name = UNIT_NAMES.get(unit, unit) if unit else "dimensionless"
    top = max((abs(v) for v in values if v is not None), default=0.0)
    if name == "second":
        return (1e-6, "µs") if 0 < top < 1e-3 else (1e-3, "ms") if top < 1 else (1.0, "s")
    if name in ("byte", "byte / second"):
        suffix = "/s" if name != "byte" else ""
        table = _DECIMAL if suffix else _BINARY
        for label, size in table:
            if top >= size:
                return float(size), label + suffix
        return 1.0, "B" + suffix
    return 1.0, _SHORT.get(name, name)


def dim_key(iri: str) -> str:
    """The record key of a resource dimension IRI (its last segment for abstract parents)."""
    return iri[len(DIM):] if iri.startswith(DIM) else iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1]


def class_name(iri: str) -> str:
    """The record spelling of an evidence class IRI."""
    return CLASS_NAMES.get(iri, iri.rsplit("#", 1)[-1])


def local(iri: str) -> str:
    """A short readable form of a LUMA IRI (`id:chain/…`, `luma:Pass` -> `Pass`)."""
    if iri.startswith(LUMA):
        return iri[len(LUMA):]
    if iri.startswith(ID):
        return "id:" + iri[len(ID):]
    return iri


def verdicts_text(verdicts: list[str]) -> str:
    """["PASS", "PASS", "FAIL"] -> "PASS ×2, FAIL"."""
    out = []
    for v in dict.fromkeys(verdicts):
        n = verdicts.count(v)
        out.append(f"{v} ×{n}" if n > 1 else v)
    return ", ".join(out)
