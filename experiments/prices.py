"""Price tables: what a core, a GiB of memory, an accelerator and a kWh cost per hour, each figure
with its currency, source, date and evidence class. The Design-In report prices the states of
qualified chains with one (cost per accepted output) through experiments/pricing.py, which
applies a price only to the dimension and unit it names.

A table (TOML; `kb/examples/prices.toml` is the shipped, labelled example):

    title = "My prices"
    evidence_class = "user-supplied"   # default of every entry: "vendor-claim" or "user-supplied"
    example = false                    # true: every figure is an example, and reports say so
    [lifetime]                         # optional; these are the defaults
    years = 3                          # amortization period of a `purchase` price
    utilisation = 0.5                  # share of the hours that serve accepted outputs
    [core_hour]                        # one entry: `price` per unit-hour, or a one-off `purchase`
    price = 0.04
    currency = "USD"                   # ISO 4217
    source = "where the figure comes from"
    date = 2026-11-01                  # when it was read or quoted
    [memory_gib_hour]                  # per GiB of host (or CXL) memory per hour
    [kwh]                              # per kWh of energy
    [accelerator_hour.nvidia-h100-sxm5-80gb]   # per accelerator-hour, one entry per type
    [accelerator_hour.from_space]      # or: the [cost] table of a model space file (the prices
    space = "llm-70b"                  # `luma model explore` uses), with its currency and
    date = 2026-12-01                  # cost_source, so the two never disagree

A model space file itself (`currency`, `cost_source`, `[cost]`) is read as a table too
(`from_space_doc`). Every problem is one ConfigError naming the file and the field.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import ConfigError
from luma.kb.records.input_files import CONFIG_FILE, read_text
from luma.kb.records.documents import parse_toml
from luma.kb.vocab import PRICE_CLASSES

#: Entry keys of a table, with what one price buys.
UNITS = {"core_hour": "core-hour", "memory_gib_hour": "GiB-hour", "kwh": "kWh",
         "accelerator_hour": "accelerator-hour"}
HOURS_PER_YEAR = 8760.0
DEFAULT_YEARS = 3.0
DEFAULT_UTILISATION = 0.5
_ENTRY_KEYS = {"price", "purchase", "currency", "source", "date", "evidence_class"}
_TOP_KEYS = {"title", "evidence_class", "example", "lifetime", *UNITS}
_SPACE_KEYS = {"core": "core_hour", "host_memory_gib": "memory_gib_hour"}


@dataclass(frozen=True)
class Price:
    """One figure: `price` per unit-hour (or per kWh), or a one-off `purchase` per unit that is
    amortized over the table's lifetime."""

    key: str  # "core_hour", "memory_gib_hour", "kwh" or "accelerator_hour.<type>"
    unit: str  # what one price buys: "core-hour", "GiB-hour", "kWh", "accelerator-hour"
    currency: str
    source: str
    evidence_class: str
    date: dt.date | None = None
    price: float | None = None
    purchase: float | None = None

    def hourly(self, years: float) -> float:
        """Price per unit-hour (per kWh for energy); a purchase spread over `years` of hours."""
        if self.price is not None:
            return self.price
        return float(self.purchase) / (years * HOURS_PER_YEAR)

    def cite(self) -> str:
        """`0.04 USD per core-hour (source, 2026-11-01; vendor-claim)`: the figure with where it comes from."""
        what = (f"{self.price:g} {self.currency} per {self.unit}" if self.price is not None
                else f"{self.purchase:g} {self.currency} per unit, amortized")
        when = f", {self.date.isoformat()}" if self.date else ", undated"
        return f"{what} ({self.source}{when}; {self.evidence_class})"


@dataclass(frozen=True)
class PriceTable:
    """Prices by key, the lifetime they are amortized over, and where the table comes from."""

    prices: dict[str, Price]
    source: str
    title: str = ""
    example: bool = False
    years: float = DEFAULT_YEARS
    utilisation: float = DEFAULT_UTILISATION
    notes: tuple[str, ...] = field(default_factory=tuple)

    def get(self, key: str) -> Price | None:
        return self.prices.get(key)

    def accelerator(self, kind: str) -> Price | None:
        """The accelerator-hour price of one accelerator type (its record key or slug)."""
        return self.prices.get(f"accelerator_hour.{kind}")

    def accelerators(self) -> list[str]:
        return sorted(k.split(".", 1)[1] for k in self.prices if k.startswith("accelerator_hour."))


def shipped() -> Path:
    """The shipped example table (every figure labelled as an example)."""
    return Path(str(importlib.resources.files("luma.kb.examples") / "prices.toml"))


def _fail(message: str, path: str, where: str) -> ConfigError:
    return ConfigError(message, source=path, field=where)


def _number(value, where: str, path: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(f"must be a number, not {value!r}", path, where)
    if value < 0 or (positive and value == 0):
        raise _fail(f"must be {'> 0' if positive else '>= 0'}, not {value!r}", path, where)
    return float(value)


def _text(value, where: str, path: str, most: int = 300) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > most:
        raise _fail(f"must be a non-empty text of at most {most} characters", path, where)
    return value.strip()


def _currency(value, where: str, path: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Z]{3}", value):
        raise _fail(f"must be an ISO 4217 code such as \"USD\" or \"EUR\", not {value!r}", path, where)
    return value


def _class(value, where: str, path: str) -> str:
    if value not in PRICE_CLASSES:
        raise _fail(f"must be one of {', '.join(PRICE_CLASSES)}, not {value!r}", path, where)
    return value


def _date(value, where: str, path: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    raise _fail(f"must be a TOML date such as 2026-11-01, not {value!r}", path, where)


def _entry(key: str, unit: str, doc, default_class: str | None, path: str) -> Price:
    if not isinstance(doc, dict):
        raise _fail("must be a table with price (or purchase), currency, source and date", path, key)
    extra = sorted(set(doc) - _ENTRY_KEYS)
    if extra:
        raise _fail(f"unknown key (known: {', '.join(sorted(_ENTRY_KEYS))})", path, f"{key}.{extra[0]}")
    for needed in ("currency", "source", "date"):
        if needed not in doc:
            raise _fail("missing: every price names its currency, source and date", path, f"{key}.{needed}")
    if ("price" in doc) == ("purchase" in doc):
        raise _fail("give exactly one of price (per unit-hour) and purchase (one-off, amortized)", path,
                    f"{key}.price")
    cls = doc.get("evidence_class", default_class)
    if cls is None:
        raise _fail("missing: vendor-claim or user-supplied (here or at the top of the table)", path,
                    f"{key}.evidence_class")
    return Price(key, unit, _currency(doc["currency"], f"{key}.currency", path),
                 _text(doc["source"], f"{key}.source", path), _class(cls, f"{key}.evidence_class", path),
                 _date(doc["date"], f"{key}.date", path),
                 _number(doc["price"], f"{key}.price", path) if "price" in doc else None,
                 _number(doc["purchase"], f"{key}.purchase", path) if "purchase" in doc else None)


def _space_path(ref, path: str, where: str) -> Path:
    if not isinstance(ref, str) or not ref.strip():
        raise _fail("must name a shipped model space (such as \"llm-70b\") or a space file", path, where)
    root = importlib.resources.files("luma.experiments.model.spaces")
    named = root / f"{ref}.toml"
    if named.is_file():
        return Path(str(named))
    candidate = Path(ref)
    if not candidate.is_absolute():
        candidate = Path(path).parent / candidate
    if not candidate.exists():
        raise _fail(f"no shipped model space or file {ref!r}", path, where)
    return candidate


def from_space_doc(doc: dict, path: str, *, date: dt.date | None = None, evidence_class: str = "user-supplied",
                   prefix: str = "") -> dict[str, Price]:
    """The prices of a model space file's [cost] table (`core` and `host_memory_gib` as the
    core-hour and GiB-hour prices, every other key an accelerator type), in its `currency`, from
    its `cost_source`."""
    cost = doc.get("cost") or {}
    if not isinstance(cost, dict) or not cost:
        raise _fail("the space file has no [cost] table", path, prefix + "cost")
    currency = _currency(doc.get("currency"), prefix + "currency", path)
    source = _text(doc.get("cost_source", f"the [cost] table of {Path(path).name}"), prefix + "cost_source", path)
    out = {}
    for name, value in cost.items():
        key = _SPACE_KEYS.get(name, f"accelerator_hour.{name}")
        unit = UNITS[key.split(".", 1)[0]]
        out[key] = Price(key, unit, currency, f"{source} ({Path(path).name})", evidence_class, date,
                         _number(value, f"{prefix}cost.{name}", path))
    return out


def _lifetime(doc, path: str) -> tuple[float, float]:
    if doc is None:
        return DEFAULT_YEARS, DEFAULT_UTILISATION
    if not isinstance(doc, dict):
        raise _fail("must be a table with years and utilisation", path, "lifetime")
    extra = sorted(set(doc) - {"years", "utilisation"})
    if extra:
        raise _fail("unknown key (known: utilisation, years)", path, f"lifetime.{extra[0]}")
    years = _number(doc.get("years", DEFAULT_YEARS), "lifetime.years", path, positive=True)
    util = _number(doc.get("utilisation", DEFAULT_UTILISATION), "lifetime.utilisation", path, positive=True)
    if util > 1:
        raise _fail(f"must be at most 1 (a share of the hours), not {util!r}", path, "lifetime.utilisation")
    return years, util


def parse(doc: dict, path: str, project=None) -> PriceTable:
    """A price table from its TOML document (or a model space file's)."""
    if "cost" in doc and not set(doc) & set(UNITS):  # a model space file: its [cost] table
        return PriceTable(from_space_doc(doc, path), path, str(doc.get("name", Path(path).stem)),
                          notes=("prices of a model space file: undated, user-supplied",))
    extra = sorted(set(doc) - _TOP_KEYS)
    if extra:
        raise _fail(f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})", path, extra[0])
    default = _class(doc["evidence_class"], "evidence_class", path) if "evidence_class" in doc else None
    example = doc.get("example", False)
    if not isinstance(example, bool):
        raise _fail(f"must be true or false, not {example!r}", path, "example")
    years, util = _lifetime(doc.get("lifetime"), path)
    prices: dict[str, Price] = {}
    for key in ("core_hour", "memory_gib_hour", "kwh"):
        if key in doc:
            prices[key] = _entry(key, UNITS[key], doc[key], default, path)
    accels = doc.get("accelerator_hour", {})
    if not isinstance(accels, dict):
        raise _fail("must be a table of accelerator types", path, "accelerator_hour")
    for name, entry in accels.items():
        where = f"accelerator_hour.{name}"
        if name == "from_space":
            if not isinstance(entry, dict) or set(entry) - {"space", "date", "evidence_class"} or "date" not in entry:
                raise _fail("must be a table with space and date (and evidence_class)", path, where)
            sp = _space_path(entry.get("space"), path, where + ".space")
            space_doc = parse_toml(read_text(sp, CONFIG_FILE.of(project)), str(sp), error=ConfigError,
                                   invalid="not valid TOML")
            imported = from_space_doc(space_doc, str(sp), date=_date(entry["date"], where + ".date", path),
                                      evidence_class=_class(entry.get("evidence_class", default or "user-supplied"),
                                                            where + ".evidence_class", path))
            prices.update({k: v for k, v in imported.items() if k.startswith("accelerator_hour.") and k not in prices})
        else:
            prices[where] = _entry(where, UNITS["accelerator_hour"], entry, default, path)
    if not prices:
        raise _fail("no price in the table (core_hour, memory_gib_hour, kwh or accelerator_hour.TYPE)", path,
                    "core_hour")
    title = _text(doc.get("title", Path(path).stem), "title", path)
    return PriceTable(prices, path, title, example, years, util)


def load(path: str | Path | None = None, project=None) -> PriceTable:
    """The price table at `path` (the shipped example when None). `project` (the command's
    Settings): its file limit (LUMA_MAX_CONFIG_FILE_BYTES)."""
    p = shipped() if path is None else Path(path)
    if not p.exists():
        raise ConfigError("no such price table", source=str(p))
    doc = parse_toml(read_text(p, CONFIG_FILE.of(project)), str(p), error=ConfigError, invalid="not valid TOML")
    return parse(doc, str(p), project)

