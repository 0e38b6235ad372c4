"""The machine record: per-resource figures of one machine (a device or a host) with units.

Compute throughput per precision, memory capacity and bandwidth per tier, interconnect links,
storage, power and price. `luma machine characterize` measures this host and records it as
**measured**; `experiments/machines/*.json` ship public spec sheets as **vendor-claim** records
that name their source. Figures are per device; `count` is how many devices a node has.

Every quantity is `{"value": number, "unit": text}` (unit names joined by `*` and `/`, small powers: kb/records/unit_grammar.py) and must have the dimension
of its field: a bandwidth given in `Gbit/s` converts to bytes per second, one given in `GB` is
refused, as are negative, zero, NaN and infinite values. The analytical model reads figures
through `compute_flops`, `memory_capacity`, `memory_bandwidth`, `power_w`, `count`,
`evidence_class` and `name` (SI floats: FLOP/s, bytes, bytes/s, watts).
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr, model_validator

from luma.errors import UnknownName
from luma.kb.records import units
from luma.kb.trust.attestation import SCHEMA_NOTE, Attestation
from luma.kb.records.envelope import record_schema
from luma.kb.records.pex_chain import (
    Architecture,
    Count,
    EvidenceClass,
    Name,
    Number,
    Provenance,
    StrictModel,
)

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")
TIERS = ("hbm", "host", "cxl", "sram", "gddr")
Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"]
Tier = Literal["hbm", "host", "cxl", "sram", "gddr"]
#: A machine's name: a slug, so that it is easy to type on the command line.
Slug = Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")]
Cores = Annotated[StrictInt, Field(ge=1, le=1 << 20)]


class Quantity(StrictModel):
    """A value with its unit (unit names joined by '*' and '/' with powers up to 4, such as 'TB/s',
    'Gbit/s', 'GiB', 'TFLOP/s', 'W')."""

    value: Number
    unit: Name

    @property
    def si(self) -> float:
        """The value in its canonical SI unit (bytes, bytes/s, FLOP/s, seconds, watts)."""
        return units.normalise(self.value, self.unit)[0]


def _of(canonical: str, what: str, example: str):
    """A validator: the quantity must be positive and have the dimensionality of `canonical`.
    The wanted dimensionality is read on the first check, not at import: the unit registry takes
    ~0.3 s to build, which a command that validates no machine figure should not pay."""

    def check(q: Quantity) -> Quantity:
        wanted = units.dimensionality_of(canonical)  # cached by the unit module
        # An amount where a rate is wanted ('GB' for a bandwidth, 'TFLOPs' for a throughput) is
        # the usual slip; say so.
        amount = units.dimensionality_of(canonical.removesuffix(" / second")) if canonical.endswith(" / second") \
            else None
        try:
            have = units.dimensionality_of(q.unit)
        except units.UnitProblem as exc:
            raise ValueError(str(exc)) from None
        if have != wanted:
            hint = "; it is an amount, a rate needs '/s'" if have == amount else ""
            raise ValueError(f"unit {q.unit!r} is not a {what} (expects {canonical}, e.g. {example}){hint}")
        if not q.value > 0:
            raise ValueError(f"value must be positive, got {q.value}")
        try:
            units.normalise(q.value, q.unit)
        except units.UnitProblem as exc:
            raise ValueError(str(exc)) from None
        return q

    return AfterValidator(check)


Throughput = Annotated[Quantity, _of("FLOP / second", "throughput", "'TFLOP/s' or 'TOPS'"),
                       Field(description="Operations per second (an integer operation counts as one FLOP).")]
Capacity = Annotated[Quantity, _of("byte", "capacity", "'GB' or 'GiB'"), Field(description="Bytes.")]
Bandwidth = Annotated[Quantity, _of("byte / second", "bandwidth", "'GB/s' or 'Gbit/s'"),
                      Field(description="Bytes per second (bits convert: 8 bit = 1 byte).")]
Latency = Annotated[Quantity, _of("second", "latency", "'us' or 'ns'"), Field(description="Seconds.")]
Watts = Annotated[Quantity, _of("watt", "power", "'W' or 'kW'"), Field(description="Watts.")]


class ComputeFigure(StrictModel):
    """Peak (vendor-claim) or measured throughput of one precision, optionally on `cores` cores."""

    precision: Precision
    throughput: Throughput
    cores: Cores | None = None
    dense: StrictBool = True
    method: Name | None = None


class MemoryFigure(StrictModel):
    """Capacity and/or bandwidth of one memory tier (bandwidth optionally on `cores` cores)."""

    tier: Tier
    capacity: Capacity | None = None
    bandwidth: Bandwidth | None = None
    cores: Cores | None = None
    method: Name | None = None

    @model_validator(mode="after")
    def _something(self) -> "MemoryFigure":
        if self.capacity is None and self.bandwidth is None:
            raise ValueError("give a capacity, a bandwidth or both")
        return self


#: How the devices of a node reach each other over a device's links (see Link).
Topology = Literal["switch", "mesh", "ring"]


class Link(StrictModel):
    """One kind of interconnect link of a device (NVLink, PCIe, UPI, Infinity Fabric ...).

    One convention for every vendor: `bandwidth` is ONE link in ONE direction; `links` is how many
    such links the device has; `topology` is how a node's devices reach each other over them
    (`switch`: every link reaches every peer through a switch, e.g. NVLink with NVSwitch; `mesh`:
    one direct link to each peer, e.g. MI300X Infinity Fabric; `ring`: two neighbours). Sheets
    quote other conventions -- NVIDIA the sum over all links and both directions (H100 "900
    GB/s" = 18 links x 25 GB/s x 2 directions), AMD one link with both directions (MI300X "128
    GB/s" = 64 GB/s each way) -- so `method` says how the figure was derived from the sheet's.
    `latency` is one synchronisation step between two devices (small messages), when known."""

    name: Name
    bandwidth: Bandwidth
    links: Count = 1
    topology: Topology = "switch"
    latency: Latency | None = None
    method: Name | None = None

    @property
    def device_bandwidth(self) -> float:
        """Bytes/s one device sends in one direction over all its links of this kind."""
        return self.bandwidth.si * self.links


class Storage(StrictModel):
    """Local storage: capacity and/or bandwidth."""

    capacity: Capacity | None = None
    bandwidth: Bandwidth | None = None

    @model_validator(mode="after")
    def _something(self) -> "Storage":
        if self.capacity is None and self.bandwidth is None:
            raise ValueError("give a capacity, a bandwidth or both")
        return self


class Power(StrictModel):
    """Power figures: the thermal design power (or total board power) of one device."""

    tdp: Watts


class Price(StrictModel):
    """Price of one device-hour (or node-hour, as the notes say). Currencies are not converted."""

    value: Annotated[Number, Field(ge=0)]
    unit: Literal["EUR/h", "USD/h"]

    @property
    def currency(self) -> str:
        return self.unit[:3]


class Source(StrictModel):
    """The public document a vendor-claim record transcribes."""

    title: Name
    url: Annotated[StrictStr, Field(pattern=r"^https?://[^\s]+$", max_length=2048)]
    retrieved: date | None = None


class MachineRecord(StrictModel):
    """Machine parameters: per-device figures with units, the evidence class and where they come from."""

    record_type: Literal["machine"]
    evidence_class: EvidenceClass
    name: Slug
    architecture: Architecture
    count: Count = 1
    source: Source | None = None
    compute: Annotated[list[ComputeFigure], Field(max_length=256)] = []
    memory: Annotated[list[MemoryFigure], Field(max_length=64)] = []
    interconnect: Annotated[list[Link], Field(max_length=64)] = []
    storage: Storage | None = None
    power: Power | None = None
    price: Price | None = None
    notes: Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=2048)]], Field(max_length=32)] = []
    provenance: Provenance
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "MachineRecord":
        if self.evidence_class == "vendor-claim" and self.source is None:
            raise ValueError("source: a vendor-claim record must name its source document (title, url)")
        if not (self.compute or self.memory or self.interconnect or self.storage or self.power):
            raise ValueError("compute: the record states no figure (give compute, memory, interconnect, storage or power)")
        _unique("compute", [f"{c.precision} {'dense' if c.dense else 'sparse'}{_on(c.cores)}" for c in self.compute])
        _unique("memory", [f"tier {m.tier}{_on(m.cores)}" for m in self.memory])
        _unique("interconnect", [f"link {link.name!r}" for link in self.interconnect])
        return self

    # -- figures as SI floats --------------------------------------------------------------

    def compute_flops(self, precision: str, cores: int | None = None, dense: bool = True) -> float:
        """Throughput of `precision` in FLOP/s (on `cores` cores, or the best the device does)."""
        _known("precision", precision, PRECISIONS)
        rows = [c for c in self.compute if c.precision == precision and c.dense == dense]
        return _pick(self, rows, cores, f"{precision} compute", lambda r: r.throughput.si).throughput.si

    def memory_capacity(self, tier: str) -> float:
        """Capacity of a memory tier in bytes."""
        _known("tier", tier, TIERS)
        rows = [m for m in self.memory if m.tier == tier and m.capacity is not None]
        return _pick(self, rows, None, f"{tier} memory capacity", lambda r: r.capacity.si).capacity.si

    def memory_bandwidth(self, tier: str, cores: int | None = None) -> float:
        """Bandwidth of a memory tier in bytes/s (on `cores` cores, or the best the device does)."""
        _known("tier", tier, TIERS)
        rows = [m for m in self.memory if m.tier == tier and m.bandwidth is not None]
        return _pick(self, rows, cores, f"{tier} memory bandwidth", lambda r: r.bandwidth.si).bandwidth.si

    def link(self, name: str | None = None) -> Link:
        """The named interconnect (or the first one listed)."""
        rows = [x for x in self.interconnect if name is None or x.name == name]
        if not rows:
            have = ", ".join(x.name for x in self.interconnect) or "none"
            raise UnknownName(f"states no interconnect {name or ''} (links: {have})".replace("  ", " "), source=self.name)
        return rows[0]

    def interconnect_bandwidth(self, name: str | None = None) -> float:
        """Bytes/s of ONE link of the named interconnect (or the first one) in ONE direction;
        `link(name).device_bandwidth` is the device's total in one direction."""
        return self.link(name).bandwidth.si

    @property
    def power_w(self) -> float | None:
        """Thermal design power in watts, None when the record states none."""
        return self.power.tdp.si if self.power else None

    def figure(self, kind: str, which: str | None = None, cores: int | None = None) -> float:
        """One figure by kind: compute (which = precision), memory_capacity / memory_bandwidth
        (which = tier), interconnect_bandwidth (which = link name), power."""
        if kind == "compute":
            return self.compute_flops(which or "fp32", cores)
        if kind == "memory_capacity":
            return self.memory_capacity(which or "host")
        if kind == "memory_bandwidth":
            return self.memory_bandwidth(which or "host", cores)
        if kind == "interconnect_bandwidth":
            return self.interconnect_bandwidth(which)
        if kind == "power":
            if self.power_w is None:
                raise UnknownName("states no power figure", source=self.name)
            return self.power_w
        raise UnknownName(f"unknown figure kind {kind!r} (known: compute, memory_capacity, memory_bandwidth, "
                          "interconnect_bandwidth, power)")

    def figures(self) -> list[dict]:
        """Every figure as a row {section, key, cores, dense, value, unit, si, si_unit, method}:
        one quantity per row, in record order (the CLI's tables and the KB projection use them)."""
        rows = []

        def add(section, key, q: Quantity, cores=None, method=None, dense=None):
            si, canonical = units.normalise(q.value, q.unit)
            rows.append({"section": section, "key": key, "cores": cores, "dense": dense, "value": q.value,
                         "unit": q.unit, "si": si, "si_unit": canonical, "method": method})

        for c in self.compute:
            add("compute", c.precision, c.throughput, c.cores, c.method, c.dense)
        for m in self.memory:
            if m.capacity:
                add("memory capacity", m.tier, m.capacity, m.cores, m.method)
            if m.bandwidth:
                add("memory bandwidth", m.tier, m.bandwidth, m.cores, m.method)
        for x in self.interconnect:
            add("interconnect bandwidth", x.name, x.bandwidth, method=x.method)
            rows.append({"section": "interconnect links", "key": x.name, "cores": None, "dense": None,
                         "value": x.links, "unit": "", "si": float(x.links), "si_unit": "dimensionless",
                         "method": f"topology: {x.topology}"})
            if x.latency:
                add("interconnect latency", x.name, x.latency)
        if self.storage:
            for key in ("capacity", "bandwidth"):
                if getattr(self.storage, key):
                    add(f"storage {key}", "storage", getattr(self.storage, key))
        if self.power:
            add("power", "tdp", self.power.tdp)
        return rows


def _on(cores: int | None) -> str:
    return f" on {cores} cores" if cores else ""


def _unique(section: str, labels: list[str]) -> None:
    seen = set()
    for i, label in enumerate(labels):
        if label in seen:
            raise ValueError(f"{section}[{i}]: a second figure for {label}; each may appear once")
        seen.add(label)


def _known(what: str, value: str, known: tuple[str, ...]) -> None:
    if value not in known:
        raise UnknownName(f"unknown {what} {value!r} (known: {', '.join(known)})")


def _pick(rec: MachineRecord, rows: list, cores: int | None, what: str, value):
    """The figure for `cores`. With no core count: the device-wide figure (one without `cores`),
    else the best of the per-core-count figures -- a workload may always leave cores idle, so
    the device can do at least that (on a shared host more cores can measure lower)."""
    if cores is not None:
        found = [r for r in rows if r.cores == cores]
        if not found:
            have = ", ".join(str(r.cores) for r in rows if r.cores) or "none"
            raise UnknownName(f"states no {what} figure on {cores} cores (core counts: {have})", source=rec.name)
        return found[0]
    if not rows:
        raise UnknownName(f"states no {what} figure", source=rec.name)
    whole = [r for r in rows if r.cores is None]
    return whole[0] if whole else max(rows, key=value)


def machine_schema() -> dict:
    """JSON Schema (2020-12) of a machine record (ontology/machine.schema.json is its output)."""
    return record_schema("machine", MachineRecord, "LUMA machine record", (
        "Machine parameters: per-device figures with units (compute throughput per precision, memory "
        "capacity and bandwidth per tier, interconnect, storage, power, price), the evidence class "
        "(measured by `luma machine characterize`, vendor-claim from a named spec sheet) and provenance. "
        "Quantities are {value, unit} with pint units that must fit the field (a bandwidth in bytes or "
        "bits per second, a capacity in bytes, a throughput in FLOP/s or OP/s); values must be positive "
        "and finite. These unit checks are enforced by `luma kb ingest`, not by this schema alone."
        + SCHEMA_NOTE
    ))
