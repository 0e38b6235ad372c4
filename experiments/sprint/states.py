"""Machine states this host can enforce physically on a trial process, and their levels.

| dimension     | unit      | how the worker enforces it                                           |
|---------------|-----------|----------------------------------------------------------------------|
| `compute`     | core      | CPU affinity to that many cores (set before torch loads) + threads   |
| `host_memory` | byte      | RLIMIT_DATA = the runtime's measured import footprint + the level    |
| `kv_cache`    | byte      | the KV block pool the decoder allocates up front, never resized      |
| `runtime`     | category  | `ATEN_CPU_CAPABILITY=<isa>`: torch's vector ISA (default < avx2 < avx512) |

Concurrency and arrival rate are the contract's load and are enforced by the load generator.
A level this host cannot provide (more cores than it has, more memory than it has, an ISA its
CPU lacks) is a ConfigError before any trial runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from luma.errors import HardwareError, StateError
from luma.experiments.endpoint import gpu
from luma.kb.records import units
from luma.kb.records.pex_chain import Level

ENFORCED = ("compute", "host_memory", "kv_cache", "runtime")
#: Dimensions only an endpoint service's launch hooks set (experiments/endpoint/spec.py).
HOOKED = ("accelerator_count", "hbm_capacity", "power")
ISA_ORDER = ("default", "avx2", "avx512")
_ISA_FLAGS = {"default": set(), "avx2": {"avx2", "fma"}, "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq"}}
_CANONICAL = {"compute": "core", "host_memory": "byte", "kv_cache": "byte", "accelerator_count": "accelerator",
              "hbm_capacity": "byte", "power": "watt"}
#: Units a dimension also takes (an engine sizes its KV cache in tokens: llama.cpp's --ctx-size).
_ALSO = {"kv_cache": ("token",)}
_RUNTIME = re.compile(r"^ATEN_CPU_CAPABILITY=(default|avx2|avx512)$")


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def total_memory() -> int:
    """Physical memory of this host, in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cpu_flags() -> set[str]:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def parse_level(dim: str, spec) -> Level:
    """A level from a contract or the command line: `{value, unit}`, "512 MiB", "2 core", "avx2"."""
    if isinstance(spec, Level):
        return spec
    if isinstance(spec, dict):
        return Level.model_validate(spec)
    text = str(spec).strip()
    if dim == "runtime":
        return Level(value=text if text.startswith("ATEN_CPU_CAPABILITY=") else f"ATEN_CPU_CAPABILITY={text}")
    m = re.match(r"^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z/ ]*)$", text)
    if not m:
        raise StateError(f"level {text!r} is not a number with a unit (e.g. '512 MiB', '2 core')", field=dim)
    value = float(m.group(1))
    return Level(value=int(value) if value.is_integer() else value, unit=m.group(2).strip() or _CANONICAL.get(dim))


def base_value(dim: str, level: Level):
    """The level in the unit the worker enforces (cores, bytes, ISA name); checks it fits this host."""
    if dim not in ENFORCED + HOOKED:
        raise StateError(f"dimension {dim!r} cannot be enforced on this host (enforced here: "
                          f"{', '.join(ENFORCED + HOOKED)})", field="dimension")
    if dim == "runtime":
        m = _RUNTIME.match(str(level.value))
        if not m or level.unit is not None:
            raise StateError(f"runtime level {level.value!r} must be ATEN_CPU_CAPABILITY=default|avx2|avx512",
                              field=dim)
        isa = m.group(1)
        missing = _ISA_FLAGS[isa] - cpu_flags()
        if missing:
            raise HardwareError(f"this CPU cannot run ISA level {isa!r} (lacks {', '.join(sorted(missing))})", field=dim)
        return isa
    if isinstance(level.value, str) or level.unit is None:
        raise StateError(f"level of {dim} needs a number and a unit", field=dim)
    try:
        value, canonical = units.normalise(level.value, level.unit)
    except units.UnitProblem as exc:
        raise StateError(str(exc), field=dim) from None
    if canonical != _CANONICAL[dim] and canonical not in _ALSO.get(dim, ()):
        raise StateError(f"unit {level.unit!r} does not fit {dim} (expects "
                          f"{' or '.join((_CANONICAL[dim], *_ALSO.get(dim, ())))}s)", field=dim)
    if value <= 0:
        raise StateError(f"level {level.value} {level.unit} of {dim} must be positive", field=dim)
    if dim == "accelerator_count":
        if not value.is_integer() or value > gpu.count():
            raise HardwareError(f"{level.value} accelerators asked, this host has {gpu.count()} NVIDIA GPU(s) "
                              f"visible to NVML", field=dim)
    if dim == "hbm_capacity":
        if value > gpu.memory_per_gpu():
            raise HardwareError(f"{level.value} {level.unit} is more than one GPU's memory here", field=dim)
    if dim == "compute":
        if not value.is_integer():
            raise StateError(f"compute level must be a whole number of cores, got {level.value}", field=dim)
        if value > len(usable_cpus()):
            raise HardwareError(f"{int(value)} cores asked, this host lets the runner use {len(usable_cpus())}",
                              field=dim)
        return int(value)
    if dim == "host_memory" and value > total_memory():
        raise HardwareError(f"{level.value} {level.unit} is more memory than this host has "
                          f"({total_memory() / 2**30:.1f} GiB)", field=dim)
    return int(value)


def resolve(levels: dict, skip: str | None = None) -> dict[str, Level]:
    """A contract's `[state]` (plus any overrides) as checked levels; `skip` leaves out the swept
    dimension, and compute defaults to one core (clean timings on a shared machine)."""
    out = {d: parse_level(d, lv) for d, lv in levels.items() if d != skip}
    for d, lv in out.items():
        base_value(d, lv)  # an impossible level fails here, before any trial
    out.setdefault("compute", Level(value=1, unit="core"))
    return out


def unit_kind(dim: str, level: Level) -> str:
    """The canonical unit of a level ("byte", "token", "core" ...; "category" without a unit)."""
    if level.unit is None or isinstance(level.value, str):
        return "category"
    try:
        return units.normalise(level.value, level.unit)[1]
    except units.UnitProblem as exc:
        raise StateError(str(exc), field=dim) from None


def order_key(dim: str, level: Level):
    """Sort key: more of the resource sorts later (ISA by capability)."""
    value = base_value(dim, level)
    return ISA_ORDER.index(value) if dim == "runtime" else value


def reference_level(dim: str) -> Level:
    """The most this host offers: restoring a dimension during diagnosis goes here."""
    if dim == "compute":
        return Level(value=len(usable_cpus()), unit="core")
    if dim == "host_memory":
        return Level(value=total_memory() // 2**20, unit="MiB")
    if dim == "kv_cache":
        return Level(value=1024, unit="MiB")
    if dim == "accelerator_count":
        return Level(value=gpu.count(), unit="accelerator")
    if dim == "hbm_capacity":
        return Level(value=gpu.memory_per_gpu() // 2**20, unit="MiB")
    if dim == "power":
        raise StateError("the runner knows no power level above the one given", field=dim)
    best = [isa for isa in ISA_ORDER if _ISA_FLAGS[isa] <= cpu_flags()][-1]
    return Level(value=f"ATEN_CPU_CAPABILITY={best}")


@dataclass(frozen=True)
class State:
    """A machine state: a level per enforced dimension (record form)."""

    levels: tuple[tuple[str, Level], ...]

    @classmethod
    def of(cls, levels: dict[str, Level]) -> "State":
        return cls(tuple(sorted(levels.items())))

    def as_dict(self) -> dict[str, Level]:
        return dict(self.levels)

    def with_level(self, dim: str, level: Level) -> "State":
        return State.of({**self.as_dict(), dim: level})

    def enforced(self) -> dict:
        """{dimension: base value} for the worker (cores, bytes, ISA)."""
        return {dim: base_value(dim, level) for dim, level in self.levels}

    def record(self) -> dict:
        """The state as a PEX-chain record's `dimensions` map."""
        return {"dimensions": {d: lv.model_dump(exclude_none=True) for d, lv in self.levels}}

    def label(self) -> str:
        return ", ".join(f"{d}={describe(lv)}" for d, lv in self.levels)


def describe(level: Level) -> str:
    if level.unit is None:
        return str(level.value).removeprefix("ATEN_CPU_CAPABILITY=")
    return f"{level.value:g} {level.unit}"
