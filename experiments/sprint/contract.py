"""Accepted-service contracts as TOML files: the clauses (the PEX-chain record's clause
structure), the load that exercises them, the base machine state and the sprint's defaults.

A contract is found by path or by name (`experiments/contracts/NAME.toml`, shipped). Every
problem is a `ConfigError` naming the file and the field, raised before any trial runs.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, ValidationError, field_validator, model_validator

from luma import names
from luma.errors import ConfigError, ContractError, UnknownContract
from luma.experiments.endpoint.spec import KIND as ENDPOINT, EndpointSpec
from luma.experiments.sprint import calibration, stats
from luma.kb.records import units
from luma.kb.records.input_files import CONFIG_FILE, read_text
from luma.kb.records.documents import parse_toml
from luma.kb.records.loader import first_error
from luma.kb.records.pex_chain import Clause, Level, Name, StrictModel

#: Metrics a sprint can judge (its worker measures them); their units are the record layer's
#: (`luma.kb.records.metrics`), which the clause itself checks.
JUDGED = ("quality", "throughput", "token_throughput")
#: Percentile metrics a sprint judges: `pNN_<kind>` (the worker keeps every sample of these).
PERCENTILE_KINDS = ("latency", "ttft", "tpot")
GENERATIVE_ONLY = ("ttft", "tpot", "token_throughput")
#: Economics and reliability of the accepted service: judged per control window by the Economic
#: Control Pilot (experiments/pilot/), never by a sprint. Power and energy are simulated on a host
#: without energy counters and cost is projected (measured time x prices): only measured evidence
#: qualifies a boundary, so these clauses stay out of sprint and optimize records.
PILOT_ONLY = ("power", "energy_per_accepted", "cost_per_accepted", "error_rate", "availability")

Positive = Annotated[StrictInt, Field(ge=1, le=1_000_000)]


class Relative(StrictModel):
    """A clause's value stated for a reference host, scaled by this host's calibration
    (`luma.experiments.sprint.calibration`)."""

    figure: Literal["fp32", "bf16", "int8", "bandwidth"]
    cores: Positive = 1
    reference: Annotated[StrictFloat | StrictInt, Field(gt=0)]
    reference_host: Annotated[str, Field(min_length=1, max_length=300)]
    margin: Annotated[StrictFloat | StrictInt, Field(gt=0, le=100)] = 1.0


class ContractClause(Clause):
    """A contract file's clause: the record's clause, optionally `relative` to the host."""

    relative: Relative | None = None


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


class PilotSpec(StrictModel):
    """Defaults for `luma pilot run` (each can be overridden on the command line)."""

    trace: Name | None = None  # a shipped trace's name or a CSV path
    window_s: Annotated[StrictFloat | StrictInt, Field(ge=2, le=3600)] = 10
    #: Share of a state's predicted capacity (and of each latency threshold) kept in reserve, for
    #: every state; unset: each state's own, measured (experiments/pilot/predict.py).
    margin: Annotated[StrictFloat | StrictInt, Field(ge=0, lt=0.9)] | None = None
    #: Least predicted saving (a share of the cost per accepted output) worth a downscale.
    hysteresis: Annotated[StrictFloat | StrictInt, Field(ge=0, lt=1)] = 0.1
    #: Most controller-initiated switches per run (breach upscales and rollbacks never wait).
    switch_budget: Annotated[StrictInt, Field(ge=0, le=10_000)] = 12
    #: Windows a downscale candidate must stay predicted-passing before it is applied.
    patience: Annotated[StrictInt, Field(ge=1, le=100)] = 2
    #: INCONCLUSIVE verification windows before a switch is rolled back anyway.
    max_extensions: Annotated[StrictInt, Field(ge=0, le=10)] = 2
    #: Seconds a request may wait for its answer before it counts as an error.
    request_timeout_s: Annotated[StrictFloat | StrictInt, Field(gt=0, le=600)] = 5
    price_table: str | None = None


class Contract(StrictModel):
    """One accepted-service contract and how to qualify it."""

    name: Name
    description: str = ""
    #: An in-process service by name, or "openai-endpoint" (written as a `[service]` table with
    #: `kind = "openai-endpoint"`, kept whole in `endpoint`).
    service: Literal["embedding", "classifier", "decoder", "matvec", "openai-endpoint"]
    endpoint: EndpointSpec | None = None
    clauses: Annotated[list[ContractClause], Field(min_length=1, max_length=64)]
    load: LoadSpec = LoadSpec()
    #: Base machine state: the level of every enforced dimension not being swept.
    state: dict[str, Level | Name] = {}
    sprint: SprintSpec | None = None
    pilot: PilotSpec | None = None
    #: How each relative clause was resolved on this host (empty: every threshold is absolute).
    resolution: list[dict] = []

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        # It names the sprint's folder under $LUMA_HOME/sprints/ (and a campaign's): a file must
        # not reach outside the project through it (luma/names.py).
        why = names.problem(name)
        if why is not None:
            raise ValueError(why)
        return name

    @model_validator(mode="before")
    @classmethod
    def _service_table(cls, data):
        if not isinstance(data, dict):
            return data
        service = data.get("service")
        if isinstance(service, dict):  # the file's form
            if "endpoint" in data:
                raise ValueError("endpoint: the [service] table already describes the endpoint")
            if service.get("kind") != ENDPOINT:
                raise ValueError(f"service.kind: a [service] table describes an {ENDPOINT!r} service "
                                 f"(got {service.get('kind')!r})")
            return {**data, "service": ENDPOINT, "endpoint": service}
        # The dumped form (a sprint folder's contract_spec, re-read by `luma sprint requalify`):
        # service by name and `endpoint` beside it, None for the in-process services.
        if data.get("endpoint") is not None and service != ENDPOINT:
            raise ValueError(f"endpoint: only an {ENDPOINT} service has one; describe it as the [service] table")
        if service == ENDPOINT and data.get("endpoint") is None:
            raise ValueError(f"service: an {ENDPOINT} service is a [service] table (kind, api, launch, variants ...)")
        return data

    @property
    def generative(self) -> bool:
        """True for a service that generates tokens (TTFT / TPOT / token throughput exist)."""
        return self.service == "decoder" or (self.endpoint is not None and self.endpoint.api != "embeddings")

    @model_validator(mode="after")
    def _metrics_judged(self) -> "Contract":
        for i, clause in enumerate(self.clauses):
            if clause.metric in PILOT_ONLY:
                continue
            if not judged(clause.metric):
                known = ", ".join(JUDGED + tuple(f"pNN_{k}" for k in PERCENTILE_KINDS) + PILOT_ONLY)
                raise ValueError(f"clauses[{i}].metric: a sprint cannot judge metric {clause.metric!r} "
                                 f"(it judges {known})")
            if clause.metric.split("_", 1)[-1] in GENERATIVE_ONLY and not self.generative:
                raise ValueError(f"clauses[{i}].metric: {clause.metric} needs a generative service")
            if clause.metric == "quality" and self.endpoint is not None and self.endpoint.quality == "none":
                raise ValueError(f"clauses[{i}].metric: the endpoint service scores no quality "
                                 f"(set service.quality, e.g. \"minilm-cosine\")")
        return self

    def service_clauses(self) -> list[Clause]:
        """The clauses a sprint judges (all but the pilot's economics and reliability clauses)."""
        return [c for c in self.clauses if c.metric not in PILOT_ONLY]

    def pilot_clauses(self) -> list[Clause]:
        """The economics and reliability clauses only the pilot judges."""
        return [c for c in self.clauses if c.metric in PILOT_ONLY]

    def percentile_clauses(self) -> list[tuple[Clause, float]]:
        return [(c, q) for c in self.clauses if (q := stats.quantile_of(c.metric)) is not None]

    def requests_needed(self) -> int:
        """The contract's request count, raised to what its highest percentile needs (stats rule)."""
        qs = [q for _, q in self.percentile_clauses()]
        return max([self.load.requests] + [stats.min_requests(q) for q in qs])

    def threshold(self, clause: Clause) -> float:
        """The clause's value in its metric's canonical unit (seconds, requests/s, ...)."""
        if getattr(clause, "relative", None) is not None:
            raise ContractError(f"the {clause.metric} clause is relative to the host: resolve the contract on this "
                                "host first (calibration.resolve)", field="clauses")
        return units.normalise(clause.value, clause.unit)[0]

    def record_contract(self) -> dict:
        """The contract as a sprint's records carry it: the clauses a sprint judges (a sprint never
        judges the pilot's economics clauses, see PILOT_ONLY), each with its absolute threshold."""
        for c in self.service_clauses():
            self.threshold(c)  # a relative clause unresolved: no record may carry the reference host's value
        return {"name": self.name, "clauses": [c.model_dump(exclude_none=True, exclude={"relative"})
                                               for c in self.service_clauses()],
                "concurrency": self.load.concurrency}


def judged(metric: str) -> bool:
    """True for a metric a sprint can judge: one of JUDGED, or a `pNN_<kind>` percentile."""
    kind = metric.split("_", 1)[1] if "_" in metric else ""
    return metric in JUDGED or (stats.quantile_of(metric) is not None and kind in PERCENTILE_KINDS)


def shipped() -> dict[str, Path]:
    """The example contracts that ship with LUMA, by name."""
    root = importlib.resources.files("luma.experiments.contracts")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")}


def recorded_names() -> dict[str, Path]:
    """Shipped contracts by the `name` their records carry, where it is not the file's name
    (minilm-memory.toml is `minilm-embedding-memory` in its sprints' ids and chains): a name copied
    from a record or a report loads the same contract. The names stay as they are: the shipped
    evidence was signed under them, and a renamed contract would no longer meet its own chains."""
    out = {}
    for file_name, path in shipped().items():
        m = re.search(r'^name\s*=\s*"([^"]+)"', path.read_text(), re.M)
        if m and m.group(1) != file_name:
            out[m.group(1)] = path
    return out


def load(ref: str | Path, project=None) -> Contract:
    """A contract from a TOML file path (within the config-file limit of `project`, the
    command's Settings), or a shipped contract's name; with `project`, its relative clauses
    resolved on this host (`calibration.resolve`: ContractError when the host is not calibrated)."""
    c = read(ref, project)
    return calibration.resolve(c, project.home) if project is not None else c


def read(ref: str | Path, project=None) -> Contract:
    """A contract as its file states it (relative clauses unresolved)."""
    path = Path(ref)
    if not path.is_file():
        named = shipped().get(str(ref)) or recorded_names().get(str(ref))
        if named is None and not path.exists():
            raise UnknownContract(f"no contract file or shipped contract named {str(ref)!r} "
                              f"(shipped: {', '.join(sorted(shipped()))})", source=str(ref))
        path = named or path  # something that is not a regular file: read_text says what it is
    # An untrusted file: at most LUMA_MAX_CONFIG_FILE_BYTES, never a FIFO or a device.
    text = read_text(path, CONFIG_FILE.of(project))
    data = parse_toml(text, str(path), error=ConfigError, invalid="not valid TOML")
    if isinstance(data, dict) and "resolution" in data:  # what a relative clause resolved to: computed, never stated
        raise ContractError("resolution is computed on the host from [clauses.relative], not written in a file",
                            source=str(path), field="resolution")
    try:
        return Contract.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        if field and field.split(".")[0] == "endpoint":  # the file calls it the [service] table
            field = "service" + field[len("endpoint"):]
            message = message.replace("endpoint.", "service.", 1) if message.startswith("endpoint.") else message
        raise ContractError(message, source=str(path), field=field) from None
