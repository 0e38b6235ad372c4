"""State spaces for the model: the axes a SPACE.toml sweeps, and single states given as
{dimension: level} (the CLI parses its `--state "host_memory=512 MiB,compute=1 core"`).

A space file:

    name = "llama-2-70b-chat"
    model = "llama-2-70b"            # preset, config.json path, or a [model] table; omit for a
                                     # contract's own service on this host
    [axes]                           # every axis a list; an axis left out keeps its default
    accelerator_type = ["h100-sxm5-80gb", "h200-141gb"]
    accelerator_count = [1, 2, 4, 8]
    precision = ["fp16", "fp8"]
    concurrency = [1, 8, 32, 128]
    context = [1024, 4096]
    currency = "USD"                 # of every price below (ISO 4217); required with prices
    cost_source = "illustrative on-demand cloud prices, not quotes"   # where the prices come from
    [cost]                           # per accelerator-hour (or per core / per GiB of host memory)
    h100-sxm5-80gb = 2.5
    [quality]                        # assumed quality score per precision (the model does not predict it)
    fp16 = 1.0
    [machines.my-accelerator]        # hypothetical hardware (see hardware.machine_from_spec)
    [efficiency]                     # accelerators: compute, bandwidth, interconnect, runtime_memory

Every value is checked before anything is evaluated; errors name the file and the axis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from luma.errors import ConfigError, ContractError, UnknownName
from luma.experiments.model import hardware, lengths, llm, llm_config, llm_published
from luma.experiments.model.services import get as get_service
from luma.kb.records.input_files import CONFIG_FILE, read_text
from luma.kb.records.documents import parse_toml

#: axis -> (kind, applies to: "llm", "service" or "both")
AXES = {
    "accelerator_type": ("accelerator", "llm"), "accelerator_count": ("count", "llm"),
    "tp": ("count", "llm"), "pp": ("count", "llm"),
    "hbm_capacity": ("bytes", "llm"), "memory_bandwidth": ("bytes/s", "llm"), "interconnect": ("link", "llm"),
    "precision": ("precision", "llm"), "kv_precision": ("precision", "llm"),
    "compute": ("core", "service"), "host_memory": ("bytes", "service"), "kv_cache": ("bytes", "service"),
    "runtime": ("runtime", "service"), "variant": ("variant", "service"),
    "concurrency": ("count", "both"), "max_batch": ("count", "both"), "context": ("count", "both"),
    "max_new_tokens": ("count", "both"),
    # Deployment shape, engine and workload of an LLM state (llm.serve, llm_published.ENGINES).
    "replicas": ("count", "llm"), "ep": ("count", "llm"), "engine": ("engine", "llm"),
    "batching": ("batching", "llm"), "arrivals": ("arrivals", "llm"), "rate": ("rate", "llm"),
    "burstiness": ("positive", "llm"), "dataset": ("mix", "llm"), "scheduler_steps": ("count", "llm"),
}
#: Kinds whose levels are names, not quantities.
CATEGORICAL = ("accelerator", "precision", "variant", "runtime", "engine", "batching", "arrivals", "mix")
#: Axes that describe the demand (the load), not the machine: the frontier is per demand point.
DEMAND = ("concurrency", "context", "max_new_tokens", "rate", "dataset", "arrivals", "burstiness")
#: Machine axes ordered from less to more of a resource: a step down is an "adjacent" state.
ORDERED = ("accelerator_count", "hbm_capacity", "memory_bandwidth", "interconnect", "compute", "host_memory",
           "kv_cache", "max_batch")


@dataclass
class Axis:
    name: str
    labels: list[str]  # as the user wrote them
    values: np.ndarray  # numbers in base units, or category codes

    @property
    def categorical(self) -> bool:
        return AXES[self.name][0] in CATEGORICAL

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class Space:
    name: str
    axes: dict[str, Axis]
    model: llm_config.ModelConfig | None = None
    cost: dict = field(default_factory=dict)
    quality: dict = field(default_factory=dict)
    machines: dict = field(default_factory=dict)
    efficiency: dict = field(default_factory=dict)
    source: str = "state"
    currency: str | None = None  # ISO 4217 code of the prices in `cost` and `machines`
    cost_source: str | None = None  # where the prices come from ("illustrative ...", a quote, a price list)
    #: The project (Settings) whose machine records may name accelerators; None: the shipped catalog.
    project: object = field(default=None, compare=False, repr=False)

    @property
    def size(self) -> int:
        return int(np.prod([len(a) for a in self.axes.values()], dtype=np.int64)) if self.axes else 1

    @property
    def is_llm(self) -> bool:
        return self.model is not None


def _parse_value(name: str, raw, field: str, categories: tuple[str, ...] | None):
    kind = AXES[name][0]
    if kind in ("accelerator", "runtime"):
        if not isinstance(raw, str) or not raw.strip():
            raise ContractError(f"{raw!r} is not a name", field=field)
        return raw.strip()
    if kind == "precision":
        if raw not in hardware.PRECISION_BYTES:
            raise ContractError(f"unknown precision {raw!r} (known: {', '.join(hardware.PRECISION_BYTES)})", field=field)
        return raw
    if kind == "variant":
        if categories is not None and raw not in categories:
            raise ContractError(f"unknown variant {raw!r} (the service has: {', '.join(categories)})", field=field)
        return raw
    if kind in ("engine", "batching", "arrivals"):
        known = {"engine": tuple(llm_published.ENGINES), "batching": llm_published.BATCHINGS,
                 "arrivals": tuple(llm.ARRIVALS)}[kind]
        name = llm_published.engine_of(raw) if kind == "engine" else raw
        if name not in known:
            raise ContractError(f"unknown {kind} {raw!r} (known: {', '.join(known)})", field=field)
        return name
    if kind == "mix":
        if isinstance(raw, dict):
            raise ContractError("a dataset axis names a preset or 'PROMPTxOUTPUT'; give statistics in a [lengths] "
                                "table", field=field)
        lengths.parse(str(raw).strip(), field)  # refused here, with the field, when it is no mix
        return str(raw).strip()
    if kind == "rate":
        return _rate(raw, field)
    if kind == "positive":
        try:
            value = float(raw) if not isinstance(raw, bool) else float("nan")
        except (TypeError, ValueError):
            value = float("nan")
        if not np.isfinite(value) or value <= 0:
            raise ContractError(f"must be a positive number, not {raw!r}", field=field)
        return value
    if kind == "count":
        return float(hardware.count(raw, field))
    if kind == "core":
        return float(hardware.count(raw if not isinstance(raw, dict) else raw.get("value"), field))
    if kind == "link":
        return hardware.quantity(raw, "bytes/s", field, allow_bits=True)
    return hardware.quantity(raw, kind, field)


def _rate(raw, field: str) -> float:
    """Requests per second: a number, or a number with `/s`, `req/s`, `request/s`, `rps` or `qps`."""
    text = str(raw).strip()
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*(/s|req/s|requests?/s|rps|qps)?", text)
    if isinstance(raw, bool) or not m or float(m.group(1)) <= 0:
        raise ContractError(f"{raw!r} is not an arrival rate: a positive number of requests per second (e.g. 5, "
                            "'2.5 req/s')", field=field)
    return float(m.group(1))


def make_axis(name: str, raw_values: list, field: str, categories: tuple[str, ...] | None = None) -> Axis:
    if name not in AXES:
        raise ContractError(f"unknown axis {name!r} (known: {', '.join(AXES)})", field=field)
    if not isinstance(raw_values, list) or not raw_values:
        raise ContractError("an axis is a non-empty list of levels", field=field)
    parsed = [_parse_value(name, r, f"{field}[{i}]" if len(raw_values) > 1 else field, categories)
              for i, r in enumerate(raw_values)]
    labels = [str(r) if not isinstance(r, dict) else f"{r.get('value')} {r.get('unit', '')}".strip() for r in raw_values]
    if len(set(parsed)) != len(parsed):
        raise ContractError("levels repeat a value", field=field)
    if isinstance(parsed[0], str):
        codes = [categories.index(x) for x in parsed] if AXES[name][0] == "variant" and categories else range(len(parsed))
        return Axis(name, [str(x) for x in parsed], np.asarray(list(codes), dtype=np.int64))
    order = np.argsort(parsed)  # least to most of the resource
    return Axis(name, [labels[i] for i in order], np.asarray(parsed, dtype=np.float64)[order])


def check_scope(space: Space, contract, field_prefix: str) -> None:
    scope = "llm" if space.is_llm else "service"
    for name in space.axes:
        applies = AXES[name][1]
        if applies not in (scope, "both"):
            what = ("an LLM space (one that names the model served, e.g. model = \"llama-2-70b\")" if applies == "llm"
                    else "a service on this host (no model)")
            raise ContractError(f"axis {name!r} belongs to {what}", field=f"{field_prefix}{name}")
    if not space.is_llm and "kv_cache" in space.axes and contract.service != "decoder":
        raise ContractError(f"the {contract.service} service has no kv_cache", field=f"{field_prefix}kv_cache")
    if space.is_llm and contract.service != "decoder":
        raise ContractError(f"an LLM space needs a generative contract (service = \"decoder\"), not {contract.service!r}",
                          field="model")


def load(path: str | Path, contract, *, project=None) -> Space:
    """A SPACE.toml, checked against the contract it will be explored for. `project` (the
    command's Settings): its file limits, and its machine records that may name accelerators."""
    p = Path(path)
    if not p.is_file():
        named = shipped().get(str(path))
        if named is None and not p.exists():
            raise ContractError(f"no space file {str(path)!r} (shipped: {', '.join(sorted(shipped()))})", source=str(path))
        p = named or p  # something that is not a regular file: read_text says what it is
    # An untrusted file: at most LUMA_MAX_CONFIG_FILE_BYTES, never a FIFO or a device.
    data = parse_toml(read_text(p, CONFIG_FILE.of(project)), str(p), error=ConfigError, invalid="not valid TOML")
    known = {"name", "description", "model", "axes", "cost", "quality", "machines", "efficiency", "currency",
             "cost_source"}
    extra = sorted(set(data) - known)
    if extra:
        raise ContractError(f"unknown key (known: {', '.join(sorted(known))})", source=str(p), field=extra[0])
    try:
        model = llm_config.config(data["model"], project) if "model" in data else None
        variants = None if model else get_service(contract.service).variants
        axes = {}
        for name, raw in (data.get("axes") or {}).items():
            axes[name] = make_axis(name, raw, f"axes.{name}", variants)
        machines = {n: hardware.machine_from_spec(n, spec, f"machines.{n}")
                    for n, spec in (data.get("machines") or {}).items()}
        space = Space(str(data.get("name", p.stem)), axes, model, dict(data.get("cost") or {}),
                      dict(data.get("quality") or {}), machines, dict(data.get("efficiency") or {}), str(p),
                      data.get("currency"), data.get("cost_source"), project)
        check_scope(space, contract, "axes.")
        _check_tables(space)
        _check_prices(space)
        if "accelerator_type" in axes:  # a machine the file names must exist: the file's error, here
            for label in axes["accelerator_type"].labels:
                hardware.load(label, machines, project)
    except (ConfigError, UnknownName) as exc:  # a name the file gives that does not exist: the file's error
        exc.source = exc.source or str(p)
        raise ContractError(exc.message, source=exc.source, field=exc.field) from None
    return space


def _check_tables(space: Space) -> None:
    for table in ("cost", "quality"):
        for k, v in getattr(space, table).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ContractError(f"must be a number >= 0, not {v!r}", field=f"{table}.{k}")
    eff_known = {"compute", "bandwidth", "interconnect", "runtime_memory"}
    for k, v in space.efficiency.items():
        if k not in eff_known:
            raise ContractError(f"unknown efficiency {k!r} (known: {', '.join(sorted(eff_known))})", field=f"efficiency.{k}")
        if k == "runtime_memory":
            hardware.quantity(v, "bytes", f"efficiency.{k}", allow_zero=True)
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
            raise ContractError(f"an efficiency is a share in (0, 1], not {v!r}", field=f"efficiency.{k}")


def _check_prices(space: Space) -> None:
    """A price is a number in a currency from a source: prices without a currency are refused."""
    if space.currency is not None and (not isinstance(space.currency, str) or not re.fullmatch(r"[A-Z]{3}",
                                                                                               space.currency)):
        raise ContractError(f"a currency is an ISO 4217 code such as \"USD\" or \"EUR\", not {space.currency!r}",
                          field="currency")
    if space.cost_source is not None and (not isinstance(space.cost_source, str) or not space.cost_source.strip()
                                          or len(space.cost_source) > 300):
        raise ContractError("cost_source is a short text saying where the prices come from", field="cost_source")
    priced = bool(space.cost) or any(m.price_per_hour is not None for m in space.machines.values())
    if priced and space.currency is None:
        raise ContractError("prices need their currency: add currency = \"USD\" (or the ISO 4217 code of yours) "
                          "and cost_source = \"where they come from\"", field="currency")


def from_state(state: Mapping[str, object] | None, contract, model: str | None = None,
               base: Space | None = None, project=None) -> Space:
    """One state, {dimension: level} (a level as text such as "512 MiB", a number, or a name),
    over the contract's own `[state]` (services) — a space of one point. `base` (a space file)
    supplies machines, prices and quality; `project` (else base's) the project's machine records.
    Errors name the field `state.DIMENSION`."""
    if isinstance(state, str):
        raise TypeError("from_state takes {dimension: level}; parse a DIM=LEVEL,... text first")
    project = project if project is not None else getattr(base, "project", None)
    cfg = llm_config.config(model, project) if model else (base.model if base else None)
    levels: dict = {} if cfg else {k: v for k, v in contract.state.items()}
    levels.update(state or {})
    variants = None if cfg else get_service(contract.service).variants
    axes = {}
    for name, raw in levels.items():
        if hasattr(raw, "model_dump"):  # a contract's Level
            raw = raw.model_dump(exclude_none=True)
        if isinstance(raw, dict) and "unit" not in raw:
            raw = raw.get("value")
        if name == "runtime" and isinstance(raw, str):
            raw = raw.removeprefix("ATEN_CPU_CAPABILITY=")
        axes[name] = make_axis(name, [raw], f"state.{name}", variants)
    space = Space("state", axes, cfg, project=project)
    if base is not None:
        space = replace(space, cost=base.cost, quality=base.quality, machines=base.machines,
                        efficiency=base.efficiency, currency=base.currency, cost_source=base.cost_source)
    check_scope(space, contract, "state.")
    return space


def shipped() -> dict[str, Path]:
    import importlib.resources

    root = importlib.resources.files("luma.experiments.model.spaces")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}
