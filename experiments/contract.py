"""Accepted-service contracts as TOML files: the clauses (the PEX-chain record's clause
structure), the load that exercises them, the base machine state and the sprint's defaults.

A contract is found by path or by name (`experiments/contracts/NAME.toml`, shipped). Every
problem is a `ConfigError` naming the file and the field, raised before any trial runs.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, ValidationError, model_validator

from luma.errors import ConfigError
from luma.experiments import stats
from luma.kb import units
from luma.kb.records.pex_chain import Clause, Level, Name, StrictModel

#: Metrics a clause may name, by the canonical unit their values convert to.
METRIC_UNITS = {
    "quality": ("dimensionless",),
    "throughput": ("request / second", "hertz"),  # requests/s, or plain 1/s
    "token_throughput": ("token / second", "hertz"),
}
#: Percentile metrics: `pNN_<kind>`, all times.
PERCENTILE_KINDS = ("latency", "ttft", "tpot")
GENERATIVE_ONLY = ("ttft", "tpot", "token_throughput")

Positive = Annotated[StrictInt, Field(ge=1, le=1_000_000)]


class LoadSpec(StrictModel):
    """How a trial loads the service: closed-loop clients or Poisson arrivals."""

    mode: Literal["closed", "poisson"] = "closed"
    concurrency: Annotated[StrictInt, Field(ge=1, le=1024)] = 1
    rate: Annotated[StrictFloat | StrictInt, Field(gt=0, le=1e6)] | None = None
    requests: Positive = 100
    warmup: Annotated[StrictInt, Field(ge=0, le=10_000)] = 8
    max_batch: Annotated[StrictInt, Field(ge=1, le=1024)] = 8
    context: Positive | None = None
    max_new_tokens: Positive | None = None
    seed: Annotated[StrictInt, Field(ge=0, le=2**31)] = 0
    timeout_s: Annotated[StrictFloat | StrictInt, Field(gt=0, le=3600)] = 180

    @model_validator(mode="after")
    def _rate_for_poisson(self) -> "LoadSpec":
        if self.mode == "poisson" and self.rate is None:
            raise ValueError("rate: Poisson arrivals need a rate (requests per second)")
        return self


class SprintSpec(StrictModel):
    """Defaults for `luma sprint run` (each can be overridden on the command line)."""

    dimension: Name | None = None
    levels: Annotated[list[Level | Name], Field(min_length=2, max_length=64)] | None = None
    repetitions: Annotated[StrictInt, Field(ge=1, le=20)] = 3
    intervention: Name | None = None
    max_retries: Annotated[StrictInt, Field(ge=0, le=5)] = 2


class Contract(StrictModel):
    """One accepted-service contract and how to qualify it."""

    name: Name
    description: str = ""
    service: Literal["embedding", "classifier", "decoder", "matvec"]
    clauses: Annotated[list[Clause], Field(min_length=1, max_length=64)]
    load: LoadSpec = LoadSpec()
    #: Base machine state: the level of every enforced dimension not being swept.
    state: dict[str, Level | Name] = {}
    sprint: SprintSpec | None = None

    @model_validator(mode="after")
    def _metrics_known(self) -> "Contract":
        for i, clause in enumerate(self.clauses):
            want = metric_unit(clause.metric, field=f"clauses[{i}].metric")
            if clause.metric.split("_", 1)[-1] in GENERATIVE_ONLY and self.service != "decoder":
                raise ValueError(f"clauses[{i}].metric: {clause.metric} needs a generative service")
            got = units.normalise(1, clause.unit)[1]
            if got not in want:
                raise ValueError(f"clauses[{i}].unit: {clause.unit!r} does not fit {clause.metric} "
                                 f"(expects {' or '.join(want)})")
        return self

    def percentile_clauses(self) -> list[tuple[Clause, float]]:
        return [(c, q) for c in self.clauses if (q := stats.quantile_of(c.metric)) is not None]

    def requests_needed(self) -> int:
        """The contract's request count, raised to what its highest percentile needs (stats rule)."""
        qs = [q for _, q in self.percentile_clauses()]
        return max([self.load.requests] + [stats.min_requests(q) for q in qs])

    def threshold(self, clause: Clause) -> float:
        """The clause's value in its metric's canonical unit (seconds, requests/s, ...)."""
        return units.normalise(clause.value, clause.unit)[0]

    def record_contract(self) -> dict:
        """The contract as a PEX-chain record carries it."""
        return {"name": self.name, "clauses": [c.model_dump(exclude_none=True) for c in self.clauses]}


def metric_unit(metric: str, field: str = "metric") -> tuple[str, ...]:
    """The canonical units a clause metric accepts; an unknown metric is a ValueError."""
    if metric in METRIC_UNITS:
        return METRIC_UNITS[metric]
    q = stats.quantile_of(metric)
    kind = metric.split("_", 1)[1] if "_" in metric else ""
    if q is not None and kind in PERCENTILE_KINDS:
        return ("second",)
    known = ", ".join(sorted(METRIC_UNITS) + [f"pNN_{k}" for k in PERCENTILE_KINDS])
    raise ValueError(f"{field}: unknown metric {metric!r} (known: {known})")


def shipped() -> dict[str, Path]:
    """The example contracts that ship with LUMA, by name."""
    root = importlib.resources.files("luma.experiments.contracts")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}


def load(ref: str | Path) -> Contract:
    """A contract from a TOML file path, or a shipped contract's name."""
    path = Path(ref)
    if not path.is_file():
        named = shipped().get(str(ref))
        if named is None:
            raise ConfigError(f"no contract file or shipped contract named {str(ref)!r} "
                              f"(shipped: {', '.join(sorted(shipped()))})", source=str(ref))
        path = named
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        if loc and msg.startswith(loc.split(".")[-1] + ":"):
            msg = msg.split(":", 1)[1].strip()
        raise ConfigError(msg, source=str(path), field=loc) from None
