"""A machine state's cost per hour from a price table (experiments/prices.py), in the right unit.

A price applies only to the dimension and unit it names (BILLING): core_hour to `compute` in
cores, memory_gib_hour to `host_memory` and `cxl_memory` in bytes, accelerator_hour.<type> to an
`accelerator_count` of that type, kwh to `power` in watts. A level in any other unit is never
multiplied by a price: `compute` in FLOP/s is an accelerator's figure, paid through its
accelerator-hour when the state has priced accelerators (so are HBM, memory bandwidth, the
interconnect and the KV cache) and priced by nothing otherwise. A state that cannot be priced
gets an `Unpriced` reason (which dimension, its unit, which price it needs, what the table
prices) instead of a figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from luma.errors import NotPriced, UnitProblem
from luma.experiments.prices import UNITS, Price, PriceTable
from luma.kb.records import units


@dataclass(frozen=True)
class Amount:
    """A numeric level: `value` in `unit` (any unit text the unit grammar reads: "core", "GiB",
    "TFLOP/s", "accelerator", "W")."""

    value: float
    unit: str


@dataclass(frozen=True)
class Billing:
    """What one price key buys: `dimension` in one of `units` (canonical), `per` of them per priced unit."""

    dimension: str
    key: str  # price key ("accelerator_hour" stands for accelerator_hour.<type>)
    units: tuple[str, ...]
    per: float


#: The only products of a level and a price LUMA forms.
BILLING = {b.dimension: b for b in (
    Billing("compute", "core_hour", ("core",), 1.0),
    Billing("host_memory", "memory_gib_hour", ("byte",), 2.0**30),
    Billing("cxl_memory", "memory_gib_hour", ("byte",), 2.0**30),
    Billing("accelerator_count", "accelerator_hour", ("accelerator", "dimensionless"), 1.0),
    Billing("power", "kwh", ("watt",), 1000.0),
)}
#: Dimensions an accelerator brings with it: paid through its accelerator-hour, in whatever unit.
WITH_ACCELERATOR = frozenset({"accelerator_type", "accelerator_count", "compute", "hbm_capacity",
                              "memory_bandwidth", "interconnect", "kv_cache"})


@dataclass(frozen=True)
class Unpriced:
    """Why a state has no cost: `dimension` (its record key; "" for the state as a whole) given in
    `unit` has no price in that unit; `needs` is the price that would apply ("" when none can);
    `priced` the units the table has prices for; `why` the fault in a few words."""

    dimension: str
    unit: str
    needs: str
    priced: tuple[str, ...]
    why: str

    def text(self) -> str:
        """The reason in words, one line: `compute (FLOP / second): no price applies to FLOP / second
        (core_hour prices compute in core); the table prices core-hour, kWh`."""
        what = f"{self.dimension} ({self.unit})" if self.unit else (self.dimension or "the state")
        return f"{what}: {self.why}; the table prices {', '.join(self.priced) or 'nothing'}"


@dataclass(frozen=True)
class StateCost:
    """A priced state: `per_hour` in `currency`, from `used` (each price once), and the dimensions
    the accelerator-hour covers."""

    per_hour: float
    currency: str
    used: tuple[Price, ...]
    covered: tuple[str, ...] = ()


def priced_units(table: PriceTable) -> tuple[str, ...]:
    """What the table prices, in words: `core-hour`, `GiB-hour`, `kWh`, `accelerator-hour (type, ...)`."""
    out = [UNITS[k] for k in ("core_hour", "memory_gib_hour", "kwh") if table.get(k)]
    if table.accelerators():
        out.append(f"{UNITS['accelerator_hour']} ({', '.join(table.accelerators())})")
    return tuple(out)


def _canonical(level) -> tuple[float, str] | None:
    if isinstance(level, Amount):
        try:
            return units.normalise(level.value, level.unit)
        except UnitProblem:
            return None
    return None


def price_state(levels: dict[str, object], table: PriceTable, architecture: str = "",
                binding: str | None = None) -> StateCost | Unpriced:
    """The cost per hour of a state given as {record key: Amount or category text}, or why it has
    none. The accelerator type is `accelerator_type`, else the architecture's name as a slug.
    `binding`: the record key of the resource that binds; it must be priced in its own unit (or be
    part of a priced accelerator), else the comparison it makes would price nothing it changes."""
    priced = priced_units(table)
    amounts = {k: c for k, v in levels.items() if (c := _canonical(v)) is not None}
    odd = sorted(k for k, v in levels.items() if not isinstance(v, str) and k not in amounts)
    if odd:
        return Unpriced(odd[0], "", "", priced, "its level has no unit LUMA reads")
    used: list[Price] = []
    cost = 0.0
    kind = levels.get("accelerator_type")
    accel = None
    if kind is not None or "accelerator_count" in amounts:
        name = str(kind) if kind is not None else re.sub(r"[^a-z0-9]+", "-", architecture.lower()).strip("-")
        accel = table.accelerator(name)
        if accel is None:
            return Unpriced("accelerator_count", "accelerator", f"accelerator_hour.{name}", priced,
                            f"no accelerator_hour.{name} price for accelerator type {name}")
    covered = sorted(k for k in levels if accel is not None and k in WITH_ACCELERATOR)
    for key, (value, unit) in sorted(amounts.items()):
        rule = BILLING.get(key)
        if rule is None or (accel is not None and key in WITH_ACCELERATOR and key != "accelerator_count"):
            continue  # no price is per this dimension, or the accelerator-hour pays for it
        if unit not in rule.units:
            return Unpriced(key, unit, rule.key, priced, f"no price applies to {unit} ({rule.key} prices {key} in "
                                                         f"{' or '.join(rule.units)})")
        p = accel if key == "accelerator_count" else table.get(rule.key)
        if p is None:
            return Unpriced(key, unit, rule.key, priced, f"no {rule.key} price")
        used.append(p)
        cost += value / rule.per * p.hourly(table.years)
    if accel is not None and "accelerator_count" not in amounts:
        used.append(accel)  # a type alone: one accelerator
        cost += accel.hourly(table.years)
    if binding and binding not in covered and not (binding in BILLING and binding in amounts):
        unit = amounts[binding][1] if binding in amounts else ""
        return Unpriced(binding, unit, BILLING[binding].key if binding in BILLING else "", priced,
                        "the binding resource has no price in its unit")
    if not used:
        return Unpriced("", "", "", priced, "the state names no priced dimension (compute in cores, host_memory, "
                                            "cxl_memory, accelerator_count or accelerator_type, power)")
    currencies = sorted({p.currency for p in used})
    if len(currencies) > 1:
        return Unpriced("", "", "", priced, f"the prices mix currencies ({', '.join(currencies)}); LUMA converts none")
    return StateCost(cost, currencies[0], tuple(dict.fromkeys(used)), tuple(covered))


def state_cost(levels: dict[str, object], table: PriceTable, architecture: str = "",
               binding: str | None = None) -> StateCost:
    """`price_state`, raising NotPriced (its `reason` the Unpriced) when the state has no cost."""
    got = price_state(levels, table, architecture, binding)
    if isinstance(got, Unpriced):
        raise NotPriced(got.text(), field=got.dimension or None, reason=got)
    return got
