"""The machines the analytical model runs on, and the quantities that describe them.

The model needs only a few figures per device: peak FLOP/s per precision, memory capacity and
bandwidth per tier, interconnect bandwidth and latency, power. `MachineLike` is that contract;
the machine parameter records of `luma.kb.records.machine` (vendor-claim catalog, or this host
characterised) satisfy it, and so does `Machine`, the plain form used for hypothetical hardware
declared in a space file and for tests.

Quantities are parsed with LUMA's unit registry and checked against what they describe: a
memory bandwidth in bits per second, a capacity in Gbit, a negative or zero figure are refused
with the field named, never silently converted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from luma.errors import HardwareError, LumaError, UnknownName
from luma.kb.records import units
from luma.kb.records.machine_catalog import load_machine

#: Bytes per element of each precision the model knows.
PRECISION_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
#: The precision whose peak FLOP/s a weight precision computes at (int4 weights dequantise to fp16).
COMPUTE_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8",
                     "int8": "int8", "int4": "fp16"}

#: How a node's devices reach each other over a link (Link.topology in kb/records/machine.py),
#: as the code llm.serve takes: a switch (every link reaches every peer), a mesh (one direct link
#: per peer), a ring (two neighbours).
TOPOLOGY = {"switch": 0.0, "mesh": 1.0, "ring": 2.0}
#: One synchronisation step between devices when a record states no link latency. A small
#: all-reduce on a switch or mesh takes two such steps (reduce-scatter, then all-gather) whatever
#: the device count: measured 3.7 / 4.8 / 5.9 us at tp 2 / 4 / 8 on H100 NVLink for 512 B
#: (custom all-reduce, https://github.com/sgl-project/sglang/pull/2904) and ~6 us at tp 2
#: with NCCL NVLS (https://github.com/NVIDIA/nccl/issues/1259).
STEP_LATENCY_S = 2.5e-6

#: What each kind of quantity normalises to, and the words an error uses for it.
KINDS = {
    "bytes": ("byte", "a memory capacity in bytes (e.g. '80 GB', '512 MiB')"),
    "bytes/s": ("byte / second", "a bandwidth in bytes per second (e.g. '3.35 TB/s', '450 GB/s')"),
    "flop/s": ("FLOP / second", "a compute rate (e.g. '989 TFLOP/s')"),
    "watt": ("watt", "a power (e.g. '700 W')"),
    "second": ("second", "a time (e.g. '5 us', '50 ms')"),
    "core": ("core", "a number of cores (e.g. '2 core')"),
}


@runtime_checkable
class MachineLike(Protocol):
    """What the model reads from a machine record (per device; `count` devices)."""

    name: str
    count: int
    power_w: float
    evidence_class: str

    def compute_flops(self, precision: str) -> float:
        """Peak FLOP/s (or OP/s) of one device at `precision`."""

    def memory_capacity(self, tier: str) -> float:
        """Bytes of one device's memory tier (e.g. "hbm", "dram")."""

    def memory_bandwidth(self, tier: str) -> float:
        """Bytes per second of one device's memory tier."""


def _is_bits(unit_text: str) -> bool:
    """True when a unit counts bits (Gbit, Gbit/s, Mibit): pint would convert them, but for memory
    a bit-based figure is almost always a GB-vs-Gbit mistake."""
    return "bit" in units.long_form(unit_text)


def _in_bytes(unit_text: str) -> str:
    """The bit unit spelt in bytes ("Gbit/s" -> "GB/s"), or a description when pint's long form of
    it is no unit text the grammar takes (a long product of bits)."""
    try:
        return f"{units.parse_unit(str(units.parse_unit(unit_text)).replace('bit', 'byte')):~P}"
    except units.UnitProblem:
        return "as many bytes"


def quantity(value, kind: str, field: str, *, allow_bits: bool = False, allow_zero: bool = False) -> float:
    """A quantity ("80 GB", {"value": 80, "unit": "GB"}, or a bare number for counts) in the
    canonical unit of `kind`, checked positive (or zero when `allow_zero`) and finite."""
    canonical, words = KINDS[kind]
    if isinstance(value, dict):
        number, unit = value.get("value"), value.get("unit")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number, unit = value, ("core" if kind == "core" else None)
    else:
        m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*(.*?)\s*$", str(value))
        if not m:
            raise HardwareError(f"{value!r} is not a number with a unit: expected {words}", field=field)
        number, unit = float(m.group(1)), m.group(2) or None
    if unit is None or isinstance(number, bool) or not isinstance(number, (int, float)):
        raise HardwareError(f"{value!r} has no unit: expected {words}", field=field)
    try:
        base, got = units.normalise(number, unit)
    except units.UnitProblem as exc:
        raise HardwareError(f"{exc}: expected {words}", field=field) from None
    if got != canonical:
        raise HardwareError(f"unit {unit!r} does not fit: expected {words}", field=field)
    if kind in ("bytes", "bytes/s") and not allow_bits and _is_bits(unit):
        raise HardwareError(f"unit {unit!r} counts bits, but memory figures are in bytes: {number:g} {unit} is "
                          f"{number / 8:g} {_in_bytes(unit)} — write that, or check the datasheet "
                          "(GB/s vs Gbit/s)", field=field)
    if base < 0 or (base == 0 and not allow_zero):
        raise HardwareError(f"{value!r} must be {'zero or more' if allow_zero else 'positive'}", field=field)
    return base


def count(value, field: str, *, minimum: int = 1) -> int:
    """A whole count (accelerators, requests, tokens) given as a number or a number with a unit."""
    if isinstance(value, str):
        m = re.match(r"^\s*(-?[0-9]+)\s*[A-Za-z ]*$", value)
        value = int(m.group(1)) if m else value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise HardwareError(f"{value!r} is not a whole number", field=field)
    if value < minimum:
        raise HardwareError(f"{value} must be at least {minimum}", field=field)
    return value


@dataclass(frozen=True)
class Machine:
    """A machine in the model's terms (per-device figures; `count` devices in the state)."""

    name: str
    flops: dict[str, float]  # precision -> FLOP/s per device
    capacity: dict[str, float]  # tier -> bytes per device
    bandwidth: dict[str, float]  # tier -> bytes/s per device
    power_w: float = 0.0
    count: int = 1
    interconnect: float = 0.0  # bytes/s of one link in one direction (0: no link, no tensor parallelism)
    link_latency_s: float = STEP_LATENCY_S  # one synchronisation step
    links: int = 1
    topology: str = "switch"
    price_per_hour: float | None = None
    evidence_class: str = "vendor-claim"
    kind: str = "gpu"
    extra: dict = field(default_factory=dict)

    def compute_flops(self, precision: str) -> float:
        if precision not in self.flops:
            raise HardwareError(f"{self.name} has no figure for {precision} compute (it has: "
                              f"{', '.join(sorted(self.flops)) or 'none'})", field="precision")
        return self.flops[precision]

    def memory_capacity(self, tier: str) -> float:
        return _tier(self.capacity, tier, self.name)

    def memory_bandwidth(self, tier: str) -> float:
        return _tier(self.bandwidth, tier, self.name)

    @property
    def main_tier(self) -> str:
        """The tier the model keeps weights and KV in: HBM if the machine has it, else DRAM."""
        return next((t for t in ("hbm", "dram", "host") if t in self.capacity), next(iter(self.capacity)))


def _tier(table: dict, tier: str, name: str) -> float:
    if tier not in table:
        raise HardwareError(f"{name} has no memory tier {tier!r} (it has: {', '.join(sorted(table))})", field="tier")
    return table[tier]


def machine_from_spec(name: str, spec: dict, field: str) -> Machine:
    """A machine declared in a space file:
    `{flops = {fp16 = "989 TFLOP/s"}, memory = {hbm = "80 GB"}, bandwidth = {hbm = "3.35 TB/s"},
    interconnect = "450 GB/s", link_latency = "2.5 us", power = "700 W", price = 2.5}`.
    `interconnect` is what one device sends in one direction through a switch; or a table in the
    machine records' convention: `{bandwidth = "25 GB/s", links = 18, topology = "switch"}` (one
    link, one direction)."""
    known = {"flops", "memory", "bandwidth", "interconnect", "link_latency", "power", "price", "kind"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise HardwareError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})", field=f"{field}.{unknown[0]}")
    for key in ("flops", "memory", "bandwidth"):
        if not isinstance(spec.get(key), dict) or not spec[key]:
            raise HardwareError(f"needs a table of {key} figures", field=f"{field}.{key}")
    for p in spec["flops"]:
        if p not in PRECISION_BYTES:
            raise HardwareError(f"unknown precision {p!r} (known: {', '.join(PRECISION_BYTES)})", field=f"{field}.flops")
    price = spec.get("price")
    if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0):
        raise HardwareError(f"price must be a number >= 0 (per accelerator-hour), not {price!r}", field=f"{field}.price")
    link, links, topology = _link_spec(spec.get("interconnect", "0 B/s"), f"{field}.interconnect")
    return Machine(
        name=name,
        flops={p: quantity(v, "flop/s", f"{field}.flops.{p}") for p, v in spec["flops"].items()},
        capacity={t: quantity(v, "bytes", f"{field}.memory.{t}") for t, v in spec["memory"].items()},
        bandwidth={t: quantity(v, "bytes/s", f"{field}.bandwidth.{t}") for t, v in spec["bandwidth"].items()},
        power_w=quantity(spec.get("power", "0 W"), "watt", f"{field}.power", allow_zero=True),
        interconnect=link, links=links, topology=topology,
        link_latency_s=quantity(spec.get("link_latency", f"{STEP_LATENCY_S * 1e6:g} us"), "second",
                                f"{field}.link_latency", allow_zero=True),
        price_per_hour=None if price is None else float(price), evidence_class="projected",
        kind=str(spec.get("kind", "accelerator")),
    )


def _link_spec(value, field: str) -> tuple[float, int, str]:
    """(bytes/s of one link one way, links, topology) of a space file's `interconnect`."""
    if not isinstance(value, dict) or set(value) <= {"value", "unit"}:
        return quantity(value, "bytes/s", field, allow_bits=True, allow_zero=True), 1, "switch"
    unknown = sorted(set(value) - {"bandwidth", "links", "topology"})
    if unknown:
        raise HardwareError(f"unknown key {unknown[0]!r} (known: bandwidth, links, topology)", field=f"{field}.{unknown[0]}")
    topology = value.get("topology", "switch")
    if topology not in TOPOLOGY:
        raise HardwareError(f"unknown topology {topology!r} (known: {', '.join(TOPOLOGY)})", field=f"{field}.topology")
    return (quantity(value.get("bandwidth"), "bytes/s", f"{field}.bandwidth", allow_bits=True, allow_zero=True),
            count(value.get("links", 1), f"{field}.links"), topology)


def load(name: str, declared: dict[str, Machine] | None = None, project=None) -> MachineLike:
    """A machine by name: one declared in the space file first, then LUMA's machine records (the
    own records of `project` (Settings), e.g. this host characterised, then the shipped
    vendor-claim catalog)."""
    if declared and name in declared:
        return declared[name]
    try:
        return load_machine(name, project)
    except UnknownName as exc:
        raise UnknownName(f"{exc.message} — or declare it under [machines.{name}] in the space file",
                          source=exc.source, field="accelerator_type") from None


def vendor(machine) -> str:
    """The machine's vendor in lower case ("nvidia", "amd", "intel"; "" when its record names none)."""
    return str(getattr(getattr(machine, "architecture", None), "vendor", "") or "").lower()


def figures(machine: MachineLike, precision: str) -> dict:
    """The per-device figures the model uses, read through `MachineLike` (plus the link and price
    figures a record may carry). A precision the machine has no figure for gives NaN FLOP/s: the
    state is unsupported, not an error."""
    tier = getattr(machine, "main_tier", None) or _guess_tier(machine)
    try:
        flops = machine.compute_flops(COMPUTE_PRECISION.get(precision, precision))
    except (LumaError, KeyError, ValueError):
        flops = float("nan")
    link, links, topology, latency = _link(machine)
    return {"flops": flops, "capacity": machine.memory_capacity(tier), "bandwidth": machine.memory_bandwidth(tier),
            "interconnect": link, "links": float(links), "topology": TOPOLOGY[topology], "link_latency": latency,
            "power": float(machine.power_w or 0.0), "price": price(machine)}


def _link(machine) -> tuple[float, int, str, float]:
    """(bytes/s of one link in one direction, links, topology, seconds per synchronisation step)
    of the machine's first (fastest listed) interconnect."""
    link = getattr(machine, "interconnect", 0.0)
    if isinstance(link, (int, float)):
        return (float(link), int(getattr(machine, "links", 1)), getattr(machine, "topology", "switch"),
                float(getattr(machine, "link_latency_s", STEP_LATENCY_S)))
    listed = list(link or [])
    if not listed:
        return 0.0, 1, "switch", STEP_LATENCY_S
    first = listed[0]
    latency = float(first.latency.si) if getattr(first, "latency", None) else STEP_LATENCY_S
    return float(first.bandwidth.si), int(first.links), str(first.topology), latency


def price(machine) -> float | None:
    """Price per device-hour, when the record states one."""
    p = getattr(machine, "price_per_hour", None)
    if p is None and getattr(machine, "price", None) is not None:
        p = machine.price.value
    return None if p is None else float(p)


def prices_currency(space, machines) -> str | None:
    """The one currency of the prices a space evaluates with: the space's (its [cost] table and
    its own machines) and any machine record's stated price (`EUR/h`, `USD/h`); mixed currencies
    are refused (nothing converts them)."""
    seen = {space.currency} if space.currency else set()
    for m in machines:
        if m.name not in space.cost and getattr(m, "price", None) is not None and hasattr(m.price, "currency"):
            seen.add(m.price.currency)
    if len(seen) > 1:
        raise HardwareError(f"prices in more than one currency ({', '.join(sorted(seen))}): give every price in one "
                          "(the space's [cost] table overrides a machine record's price)", field="currency")
    return next(iter(seen), None)


def _guess_tier(machine) -> str:
    for tier in ("hbm", "gddr", "host", "dram"):
        try:
            if machine.memory_capacity(tier):
                return tier
        except Exception:  # noqa: BLE001 - a record without that tier
            continue
    raise HardwareError(f"{machine.name} declares no memory tier the model knows (hbm, gddr, host)", field="memory")
