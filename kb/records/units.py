"""Units: parsing with pint, dimension checks, normalisation and unit IRIs.

Unit text is untrusted: it passes the unit grammar (`unit_grammar`) before pint sees it, and
every failure, pint's own included, is a UnitProblem.

pint (0.25) treats `bit`/`byte` as dimensionless, which would let "GB" pass where a core count
is expected; LUMA's registry makes information a base dimension again and adds the counted
things of this domain (cores, accelerators, tokens, KV blocks, requests, FLOPs).
"""

from __future__ import annotations

import importlib.resources
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from luma.errors import UnitProblem
from luma.kb.records import unit_grammar, unit_table
from luma.kb.vocab import LUNIT, UNIT

if TYPE_CHECKING:
    import pint

_EXTRA_UNITS = (
    "core = [core] = cores",
    "FLOP = [operation] = flop = FLOPs",
    "accelerator = [accelerator] = accelerators = device = gpu",
    "token = [token] = tok = tokens",
    "block = [block] = blocks",
    "request = [request] = req = requests",
    # Spec sheets state integer throughput in OP/s ("TOPS") and float throughput in "TFLOPS";
    # an integer operation counts as one FLOP, so int8 and fp16 figures compare directly.
    "OP = FLOP = op = OPs",
    "OPS = OP / second",
    "FLOPS = FLOP / second",
)

#: Currencies besides the euro (ISO 4217), each its own dimension: LUMA converts no currency, so
#: a USD price and a EUR clause never compare (price tables refuse mixed currencies too).
CURRENCIES = ("USD", "GBP", "CHF", "JPY", "CNY", "CAD", "AUD", "INR", "KRW", "SEK", "NOK", "DKK", "PLN", "SGD",
              "TWD", "HKD")

#: Canonical units: every quantity is normalised to the first of these with its dimensionality.
CANONICAL_UNITS = {
    "byte": UNIT + "BYTE",
    "byte / second": UNIT + "BYTE-PER-SEC",
    "second": UNIT + "SEC",
    "watt": UNIT + "W",
    "joule": UNIT + "J",
    "hertz": UNIT + "HZ",
    "dimensionless": UNIT + "UNITLESS",
    "FLOP": LUNIT + "FLOP",
    "FLOP / second": UNIT + "FLOP-PER-SEC",
    "core": LUNIT + "Core",
    "accelerator": LUNIT + "Accelerator",
    "token": LUNIT + "Token",
    "token / second": LUNIT + "TokenPerSecond",
    "block": LUNIT + "Block",
    "request": LUNIT + "Request",
    "request / second": LUNIT + "RequestPerSecond",
    "euro": LUNIT + "Euro",
    "euro / request": LUNIT + "EuroPerRequest",
    "euro / token": LUNIT + "EuroPerToken",
    **{c: LUNIT + c for c in CURRENCIES},
    **{f"{c} / request": LUNIT + f"{c}PerRequest" for c in CURRENCIES},
    **{f"{c} / token": LUNIT + f"{c}PerToken" for c in CURRENCIES},
    "joule / request": LUNIT + "JoulePerRequest",
    "joule / token": LUNIT + "JoulePerToken",
    # Silicon area of a partner's hardware mechanism (intervention-parameters records).
    "meter ** 2": UNIT + "M2",
}


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """The shared unit registry (built once; ~0.3 s)."""
    import pint  # reason: ~60 ms of imports, paid only by a command that reads a unit

    root = importlib.resources.files("pint")
    text = (root / "default_en.txt").read_text()
    text = text.replace("\nbit = []\n", "\nbit = [information]\n")
    # load_definitions() on a string cannot follow @import lines; inline them.
    text = re.sub(r"^@import\s+(\S+)\s*$", lambda m: (root / m.group(1)).read_text(), text, flags=re.M)
    reg = pint.UnitRegistry(None)
    reg.load_definitions(text.splitlines())
    for line in _EXTRA_UNITS:
        reg.define(line)
    reg.define("euro = [currency] = EUR")
    for code in CURRENCIES:
        reg.define(f"{code} = [currency_{code.lower()}]")
    return reg


#: How far a unit may lie from its canonical unit: a yotta or yocto prefix to the power 4 stays
#: inside; beyond it conversions overflow or lose every digit (`YB**4/yB**3` is 1e168 bytes).
_SCALE = (1e-100, 1e100)


def parse_unit(text: str) -> pint.Unit:
    """Parse a unit expression ("GiB", "GB/s", "ms", "core", "TFLOP/s"); UnitProblem otherwise."""
    return _parse(_checked(text))


def _checked(text) -> str:
    """The unit text without padding, in the grammar (the key of the caches below)."""
    if not isinstance(text, str):
        raise UnitProblem(f"unit must be text, got {type(text).__name__}")
    return _checked_text(text)


@lru_cache(maxsize=4096)
def _checked_text(text: str) -> str:
    # Cached: a 100k-record batch names the same few units a million times (refusals are not
    # cached, and the grammar bounds what one costs).
    try:
        return unit_grammar.check(text)
    except unit_grammar.UnitSyntaxError as exc:
        raise UnitProblem(str(exc)) from None


@lru_cache(maxsize=4096)
def _parse(text: str) -> pint.Unit:
    try:
        return registry().parse_units(unit_grammar.pint_text(text))
    # pint raises an open set of types on text it cannot read (AssertionError, AttributeError,
    # OffsetUnitCalculusError, ...); for an untrusted unit any of them means "not a unit".
    except Exception:
        raise UnitProblem(f"unknown unit {text!r}") from None


@lru_cache(maxsize=4096)
def _canonical_for(text: str) -> tuple[str, float]:
    # The units records name most come from the table pint built (unit_table.py, tested against
    # pint): a command that reads a contract or a machine record then never builds the registry.
    known = unit_table.UNITS.get(text)
    if known is not None:
        return known[0], known[1]
    return pint_canonical(text)


def pint_canonical(text: str) -> tuple[str, float]:
    """(canonical unit, factor to it) of checked unit text, asked of pint itself."""
    unit = _parse(text)
    dims = unit.dimensionality
    reg = registry()
    for canonical in CANONICAL_UNITS:
        target = reg.parse_units(canonical)
        if target.dimensionality == dims:
            try:
                factor = float(reg.Quantity(1.0, unit).to(target).magnitude)
            except Exception:  # OverflowError from a large prefix power, or pint refusing
                raise UnitProblem(f"unit {text!r} cannot be converted to {canonical}") from None
            if not _SCALE[0] <= factor <= _SCALE[1]:
                raise UnitProblem(f"unit {text!r} is out of range ({factor:g} {canonical})")
            return canonical, factor
    raise UnitProblem(f"unit {text!r} has no supported dimension ({dims})")


def normalise(value: float, unit_text: str) -> tuple[float, str]:
    """(value in the canonical unit, canonical unit name); the result is always finite."""
    canonical, factor = _canonical_for(_checked(unit_text))
    try:
        result = float(value) * factor
    except OverflowError:
        raise UnitProblem("value is too large") from None
    if not math.isfinite(result):
        raise UnitProblem(f"value is too large once converted to {canonical}")
    return result, canonical


def dimensionality_of(text: str) -> str:
    """A comparable string form of a unit's dimensionality."""
    return _dimensionality(_checked(text))


@lru_cache(maxsize=4096)
def _dimensionality(text: str) -> str:
    known = unit_table.UNITS.get(text)
    if known is not None:
        return known[2]
    return str(_parse(text).dimensionality)  # pint's formatting costs ~30 us: once per unit


def long_form(text: str) -> str:
    """pint's long form of a unit ("Gbit/s" -> "gigabit / second")."""
    known = unit_table.UNITS.get(_checked(text))
    return known[3] if known is not None else str(parse_unit(text))


def unit_iri(canonical: str) -> str:
    """QUDT (or LUMA) IRI of a canonical unit name."""
    return CANONICAL_UNITS[canonical]
