"""The PEX-chain record: the public interchange format of one boundary qualification.

The pydantic model is the single source of truth; `ontology/pex-chain.schema.json` is generated
from it (`luma kb schema`) and a test keeps the two equal. Checks that need the ontology
(dimension names, units that fit a dimension) run in the model validator with the dimension
index passed as validation context.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from luma.kb.records import metrics, units
from luma.kb.trust.attestation import Attestation
from luma.kb.records.dimensions import Dimension, record_dimensions
from luma.kb.vocab import EvidenceClass
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

SCHEMA_VERSION = 1
#: Caps on what one chain carries: a sprint's chain cites a few dozen trials of a dozen
#: observations each (at most 20 repetitions per state), so these leave a wide margin while
#: keeping one record (YAML aliases included) from expanding into millions of facts.
MAX_TRIALS = 1_000
MAX_OBSERVATIONS_PER_TRIAL = 256
MAX_OBSERVATIONS = 20_000

Name = Annotated[StrictStr, Field(min_length=1, max_length=256, pattern=r"\S")]
# Integers are bounded to 64 bits (pydantic's finiteness check overflows on larger ones).
Number = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)] | Annotated[StrictFloat, Field(allow_inf_nan=False)]
#: A count (repetitions): at least 1, and within xsd:integer's 64-bit range in the store.
Count = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]


class StrictModel(BaseModel):
    """Base of the record models: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload(StrictModel):
    """What is served."""

    name: Name
    model: Name
    task: Name


class Architecture(StrictModel):
    """The physical platform family."""

    name: Name
    kind: Literal["cpu", "gpu", "accelerator", "system"]
    vendor: Name


class Clause(StrictModel):
    """One accepted-service clause: `metric op value unit` (e.g. p99_latency <= 200 ms)."""

    metric: Annotated[StrictStr, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    op: Literal["<=", ">=", "<", ">"]
    value: Number
    unit: Name

    @model_validator(mode="after")
    def _converts(self) -> "Clause":
        # A clause is judged, so its metric must be one whose unit LUMA knows.
        if metrics.kind_of(self.metric) is None:
            raise ValueError(f"metric: unknown metric {self.metric!r} (known: {metrics.known()})")
        check_convertible(self.value, self.unit)
        check_fits(self.metric, self.value, self.unit)
        return self


class Contract(StrictModel):
    """A frozen accepted-service contract."""

    name: Name
    clauses: Annotated[list[Clause], Field(min_length=1, max_length=256)]
    #: The concurrent requests the clauses are held at (the contract's load), when it states one:
    #: the rules read it to tell a KV cache that limits concurrency (rules/80-kv-concurrency.rq).
    concurrency: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None


class Level(StrictModel):
    """The level of one dimension: a non-negative quantity, or a category (no unit)."""

    value: Number | Name
    unit: Name | None = None


class MachineState(StrictModel):
    """A complete assignment of levels to dimensions."""

    dimensions: Annotated[dict[StrictStr, Level], Field(min_length=1, max_length=64)]

    @field_validator("dimensions", mode="after")
    @classmethod
    def _sorted(cls, dims: dict[str, Level]) -> dict[str, Level]:
        # Key order is part of the canonical JSON (the content hash), so it must not depend
        # on the order the submitter wrote the dimensions in.
        return dict(sorted(dims.items()))

    @model_validator(mode="after")
    def _levels_fit_dimensions(self, info: ValidationInfo) -> "MachineState":
        dims = _dimensions(info)
        for key, level in self.dimensions.items():
            _check_level(key, level, dims)
        return self


Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class SoftwareConfig(StrictModel):
    """The software a state was measured with: the service variant (fp32, int8 …), its runtime
    settings, the model artifact and the library versions. Two chains measured with different
    configurations are not the same experiment: a boundary measured under an older
    configuration can go stale (rules/) when a newer one exists."""

    service: Name
    variant: Name
    #: Service-side settings in place (batching, KV policy, flags …), by name.
    settings: Annotated[dict[Name, Name | Number | StrictBool], Field(max_length=64)] = {}
    #: SHA-256 of the model artifact the service loaded (its bytes, or its files' in order).
    artifact: Sha256 | None = None
    #: Versions of the libraries the service ran on, by name (python, numpy, torch …).
    libraries: Annotated[dict[Name, Name], Field(max_length=64)] = {}

    def key(self) -> str:
        """The configuration's identity: SHA-256 of its canonical JSON (same config, same key)."""
        import hashlib
        import json

        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True,
                                         separators=(",", ":")).encode()).hexdigest()


class Intervention(StrictModel):
    """The mechanism applied at the FAIL state; `software`: the configuration with it in place."""

    name: Name
    kind: Literal["software", "hardware", "partner"]
    software: SoftwareConfig | None = None


class Observation(StrictModel):
    """One observed metric of a trial."""

    metric: Annotated[StrictStr, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    value: Number
    unit: Name

    @model_validator(mode="after")
    def _converts(self) -> "Observation":
        # Telemetry beyond the clauses may have any name; a registered one must fit its unit.
        check_convertible(self.value, self.unit)
        check_fits(self.metric, self.value, self.unit)
        return self


class Trial(StrictModel):
    """One physical trial behind the chain: embedded (its observations), referenced (`record`:
    the content hash of a pex-trial record in the ledger), or both."""

    state: Literal["pass", "fail", "recovered"]
    repetition: Count
    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    observations: Annotated[list[Observation], Field(max_length=MAX_OBSERVATIONS_PER_TRIAL)] = []
    failure_cause: Name | None = None
    # Last and None by default: a chain without references keeps its canonical JSON (its hash).
    record: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        None, description="Content hash (SHA-256 of the canonical JSON) of the pex-trial record this trial is; "
                          "ingest finds it in the ledger or the same batch and re-judges it.")


class DiagnosisTrial(Trial):
    """A trial of one restoration (the FAIL state with one dimension restored); state role
    `diagnosis`."""

    state: Literal["diagnosis"]


class FrontierTrial(Trial):
    """A trial of the re-qualification with the intervention in place: `after` at the new minimum
    PASS level, `below` at the level under it (the new adjacent FAIL)."""

    state: Literal["after", "below"]


class Restoration(StrictModel):
    """One candidate dimension restored alone at the FAIL state: its verdict and the trials it
    rests on. `not-tested`: the runner could not restore it here (`reason` says why). The crossed
    dimension's restoration is the minimum PASS state itself (the chain's pass-state trials)."""

    dimension: StrictStr
    restored_level: Level | None = None
    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE", "not-tested"]
    reason: Name | None = None
    trials: Annotated[list[DiagnosisTrial], Field(max_length=MAX_TRIALS)] = []


class FrontierShift(StrictModel):
    """The boundary re-qualified with the intervention in place: the crossed dimension's minimum
    PASS level before and after. `absolute_change` = after - before and `relative_change` =
    (after - before) / before, in `unit` (the canonical unit); None for a categorical dimension.
    `below_range`: the intervention passes at the lowest level given (the new boundary lies
    below it). The software in place is the intervention's."""

    dimension: StrictStr
    before: Level
    after: Level
    absolute_change: Number | None = None
    relative_change: Number | None = None
    unit: Name | None = None
    below_range: StrictBool = False
    #: The re-qualification's trials (`after` / `below`); the recovered trials stand for `after`
    #: when it is the FAIL level.
    trials: Annotated[list[FrontierTrial], Field(max_length=MAX_TRIALS)] = []


class NextBinding(StrictModel):
    """The resource that binds next, with the intervention in place: the restorations at the new
    adjacent FAIL that recover PASS. `resource` None: none found (`note` says why, e.g. the
    intervention passes at every level given)."""

    resource: StrictStr | None = None
    co_binding: Annotated[list[StrictStr], Field(max_length=64)] = []
    note: Name | None = None
    #: The restorations at the new adjacent FAIL it rests on.
    diagnosis: Annotated[list[Restoration], Field(max_length=64)] = []


class Decision(StrictModel):
    """The deployment decision for one software configuration: the minimum complete state that
    serves the contract with it."""

    software: SoftwareConfig
    state: MachineState


class Environment(StrictModel):
    """Where a figure was measured: CPU model and ISA, library versions, threads."""

    cpu_model: Name | None = None
    isa: Annotated[list[Name], Field(max_length=64)] = []
    logical_cpus: Annotated[StrictInt, Field(ge=1, le=1 << 20)] | None = None
    usable_cpus: Annotated[StrictInt, Field(ge=1, le=1 << 20)] | None = None
    machine: Name | None = None
    python: Name | None = None
    numpy: Name | None = None
    torch: Name | None = None
    torch_cpu_capability: Name | None = None
    torch_threads: Annotated[StrictInt, Field(ge=1, le=1 << 20)] | None = None
    accelerator: Name | None = None


class Engine(StrictModel):
    """The serving engine a trial drove (services behind an endpoint): its name and version, the
    exact command that started it at the state, and the model it served (the artifact's SHA-256
    when it is a local file, else the name the engine resolved)."""

    name: Name
    version: Name | None = None
    command: Annotated[list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=256)] = []
    artifact: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    model: Name | None = None


class Fleet(StrictModel):
    """Where a campaign ran the sprint: its campaign, the machine class it was placed for, the
    Ray node and the labels that node advertised (`luma runner join`)."""

    campaign: Name
    machine_class: Name
    node: Name
    labels: dict[StrictStr, StrictStr] = Field(default_factory=dict, max_length=64)


class SourceFile(StrictModel):
    """One file an imported record was read from: its name (never its folders: a path can name a
    person), size and SHA-256, so a reader can tell whether the file in hand is the one imported."""

    name: Name
    sha256: Sha256
    bytes: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)]


class ImportSource(StrictModel):
    """Where an imported record's figures come from: the tool that measured them (its version and
    command line as its file records them), the files read, what a published figure cites (round,
    submitter, file), and why the record has the evidence class it has (e.g. summary only: no
    per-request samples, so never measured)."""

    tool: Name
    version: Name | None = None
    command: Annotated[list[Annotated[StrictStr, Field(max_length=4096)]], Field(max_length=256)] = []
    files: Annotated[list[SourceFile], Field(max_length=64)] = []
    citation: Name | None = None
    reason: Name | None = None


class Provenance(StrictModel):
    """Who or what produced the record."""

    tool: Name
    git_revision: Name | None = None
    host: Name | None = None
    started: datetime | None = None
    #: The hardware and software the trials ran on (CPU model, ISA, library versions).
    environment: Environment | None = None
    #: The serving engine of an endpoint trial (command, version, artifact).
    engine: Engine | None = None
    #: The campaign, machine class and runner node of a sprint a fleet ran.
    fleet: Fleet | None = None
    #: The outside tool and files an imported record was read from (`luma import`).
    source: ImportSource | None = None


class PexChain(StrictModel):
    """minimum PASS -> adjacent FAIL -> binding resource -> intervention -> recovered PASS."""

    record_type: Literal["pex-chain"]
    evidence_class: EvidenceClass
    workload: Workload
    architecture: Architecture
    contract: Contract
    pass_state: MachineState
    fail_state: MachineState
    crossed_dimension: StrictStr
    binding_resource: StrictStr
    intervention: Intervention
    recovered: StrictBool
    repetitions: Count
    trials: Annotated[list[Trial], Field(max_length=MAX_TRIALS)] = []
    provenance: Provenance | None = None
    #: The software the boundary (PASS and FAIL states) was measured with.
    software: SoftwareConfig | None = None
    #: Each candidate dimension restored alone at the FAIL state (chain outcomes, issue 16).
    #: (None, not [], when absent: a record without outcomes keeps its canonical JSON, its hash.)
    diagnosis: Annotated[list[Restoration], Field(max_length=64)] | None = None
    #: Dimensions other than `binding_resource` whose restoration alone also recovered PASS.
    co_binding: Annotated[list[StrictStr], Field(max_length=64)] | None = None
    frontier_shift: FrontierShift | None = None
    next_binding: NextBinding | None = None
    #: The minimum complete state per software configuration.
    decision: Annotated[list[Decision], Field(max_length=64)] | None = None
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None

    @field_validator("trials", mode="before")
    @classmethod
    def _bounded(cls, trials):
        # Counted before any trial is validated: a list of aliases costs nothing to refuse.
        if isinstance(trials, list):
            if len(trials) > MAX_TRIALS:
                raise ValueError(f"a chain cites at most {MAX_TRIALS} trials, this one {len(trials)}")
            observed = (t.get("observations") if isinstance(t, dict) else getattr(t, "observations", None)
                        for t in trials)
            total = sum(len(o) for o in observed if isinstance(o, list))
            if total > MAX_OBSERVATIONS:
                raise ValueError(f"a chain's trials carry at most {MAX_OBSERVATIONS} observations in all, "
                                 f"these {total}")
        return trials

    @model_validator(mode="after")
    def _dimensions_known(self, info: ValidationInfo) -> "PexChain":
        dims = _dimensions(info)
        for field in ("crossed_dimension", "binding_resource"):
            key = getattr(self, field)
            if key not in dims:
                raise ValueError(f"{field}: unknown dimension {key!r} (known: {', '.join(sorted(dims))})")
        for state in ("pass_state", "fail_state"):
            if self.crossed_dimension not in getattr(self, state).dimensions:
                raise ValueError(
                    f"{state}.dimensions: the crossed dimension {self.crossed_dimension!r} has no level here"
                )
        key = self.crossed_dimension
        if _level_key(self.pass_state.dimensions[key]) == _level_key(self.fail_state.dimensions[key]):
            raise ValueError(f"crossed_dimension: {key!r} has the same level in pass_state and fail_state")
        self._outcomes_known(dims)
        return self

    def _outcomes_known(self, dims: dict[str, Dimension]) -> None:
        """The chain outcomes name known dimensions with levels that fit them."""
        def known(field: str, key: str) -> None:
            if key not in dims:
                raise ValueError(f"{field}: unknown dimension {key!r} (known: {', '.join(sorted(dims))})")

        def restorations(field: str, rows: list[Restoration]) -> None:
            seen = set()
            for i, r in enumerate(rows):
                known(f"{field}[{i}].dimension", r.dimension)
                if r.dimension in seen:
                    raise ValueError(f"{field}[{i}].dimension: {r.dimension!r} is restored twice")
                seen.add(r.dimension)
                if r.restored_level is not None:
                    _check_level(r.dimension, r.restored_level, dims)
                if r.verdict == "not-tested":
                    if r.reason is None or r.trials:
                        raise ValueError(f"{field}[{i}]: a not-tested restoration gives a reason and has no trials")
                elif r.restored_level is None:
                    raise ValueError(f"{field}[{i}].restored_level: a tested restoration names the level it restored")

        restorations("diagnosis", self.diagnosis or [])
        co = self.co_binding or []
        for i, key in enumerate(co):
            known(f"co_binding[{i}]", key)
            if key == self.binding_resource or key in co[:i]:
                raise ValueError(f"co_binding[{i}]: {key!r} repeats the binding resource or another co-binding one")
        f = self.frontier_shift
        if f is not None:
            if f.dimension != self.crossed_dimension:
                raise ValueError(f"frontier_shift.dimension: {f.dimension!r} is not the crossed dimension "
                                 f"{self.crossed_dimension!r}")
            for part in ("before", "after"):
                _check_level(f.dimension, getattr(f, part), dims)
        n = self.next_binding
        if n is not None:
            for i, key in enumerate(([n.resource] if n.resource else []) + n.co_binding):
                known("next_binding.resource" if i == 0 and n.resource else "next_binding.co_binding", key)
            if n.co_binding and n.resource is None:
                raise ValueError("next_binding.co_binding: co-binding resources without a resource")
            restorations("next_binding.diagnosis", n.diagnosis)


def check_convertible(value, unit: str) -> None:
    try:
        units.normalise(value, unit)
    except units.UnitProblem as exc:
        raise ValueError(f"unit: {exc}") from None


def check_fits(metric: str, value: float, unit: str) -> None:
    why = metrics.misfit(metric, unit)
    if why:
        raise ValueError(f"unit: {why}")
    why = metrics.impossible(metric, value)
    if why:
        raise ValueError(f"value: {why}")


def _level_key(level: Level):
    """A level in comparable form: the category, or the value in its canonical unit."""
    if isinstance(level.value, str):
        return level.value
    return units.normalise(level.value, level.unit)


def _dimensions(info: ValidationInfo) -> dict[str, Dimension]:
    ctx = info.context or {}
    return ctx.get("dimensions") or record_dimensions(ctx.get("home"))


def _check_level(key: str, level: Level, dims: dict[str, Dimension]) -> None:
    dim = dims.get(key)
    if dim is None:
        raise ValueError(f"dimensions.{key}: unknown dimension {key!r} (known: {', '.join(sorted(dims))})")
    if dim.categorical:
        if not isinstance(level.value, str) or level.unit is not None:
            raise ValueError(f"dimensions.{key}: a categorical level takes a text value and no unit")
        return
    if isinstance(level.value, str):
        raise ValueError(f"dimensions.{key}.value: must be a number, got text {level.value!r}")
    if level.unit is None:
        raise ValueError(f"dimensions.{key}.unit: unit is missing")
    if level.value < 0:
        raise ValueError(f"dimensions.{key}.value: must not be negative, got {level.value}")
    try:
        have = units.dimensionality_of(level.unit)
    except units.UnitProblem as exc:
        raise ValueError(f"dimensions.{key}.unit: {exc}") from None
    wanted = {units.dimensionality_of(u): u for u in dim.accepts_units}
    if have not in wanted:
        raise ValueError(
            f"dimensions.{key}.unit: {level.unit!r} does not fit {key} (expects a unit of {' or '.join(dim.accepts_units)})"
        )
    try:
        units.normalise(level.value, level.unit)
    except units.UnitProblem as exc:
        raise ValueError(f"dimensions.{key}.value: {exc}") from None
