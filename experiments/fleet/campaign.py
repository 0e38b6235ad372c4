"""A campaign file: contracts × machine classes (by Ray node label) × dimensions, with a trial
budget. One *unit* = one sprint of one contract along one dimension on one machine class; its
bisection, diagnosis and re-qualification stay on one machine of that class, so units of
different classes (and of the same class, on different machines) run in parallel.

    name = "cpu-fleet"
    trial_budget = 400           # physical trials the whole campaign may spend (an upper bound)
    trial_seconds = 10           # expected seconds per trial, for `luma campaign plan`
    runner_wait_s = 60           # a sprint no live trusted runner can take for this long is lost

    [[contracts]]
    contract = "matvec-memory"   # a shipped contract's name or a file (relative to this file)
    dimensions = ["host_memory"] # default: the contract's [sprint].dimension
    repetitions = 3              # default: the contract's
    # levels = [...], intervention = "...", trial_seconds = 5

    [architectures.avx512]
    labels = { "luma-isa" = "avx512-vnni" }   # what a node must advertise (`luma runner join`)
    machines = 40                # how many such machines `plan` assumes without a cluster
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, StrictInt, ValidationError, field_validator

from luma import names
from luma.errors import ConfigError, ContractError, StateError
from luma.experiments.sprint import contract as contracts, states
from luma.experiments.sprint.pex import max_trials
from luma.kb.records.input_files import CONFIG_FILE, read_text
from luma.kb.records.documents import parse_toml
from luma.kb.records.loader import first_error
from luma.kb.records.pex_chain import StrictModel

#: Ray's label syntax (Kubernetes'): keys and values of at most 63 characters, alphanumerics
#: with '-', '_', '.' inside; a key may carry a DNS prefix ("example.com/isa").
_LABEL_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(rf"^([a-z0-9]([a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")
#: Labels LUMA itself sets on a runner node (`luma runner join`): not for a campaign to demand.
RESERVED = ("luma-runner-key",)


def label_problem(key: str, value: str) -> str | None:
    """What is wrong with one node label a campaign demands or a runner advertises (None: Ray
    and LUMA both take it)."""
    if not LABEL_KEY.match(key) or key.startswith("ray.io/"):
        return (f"label key {key!r} is not a Ray node label key (letters, digits, '-', '_', '.'; at most 63; "
                f"ray.io/ is Ray's own)")
    if key in RESERVED:
        return (f"label {key!r} is set by `luma runner join` itself (the runner key's fingerprint, set by LUMA; "
                f"the head chooses the trusted keys)")
    if not LABEL_VALUE.match(value):
        return f"label value {value!r} of {key!r} is not a Ray node label value"
    return None


class ContractEntry(StrictModel):
    """One contract of the campaign and how to sweep it."""

    contract: str = Field(min_length=1)
    dimensions: list[str] | None = Field(default=None, min_length=1)
    levels: list[str] | None = Field(default=None, min_length=2)
    repetitions: StrictInt | None = Field(default=None, ge=1, le=20)
    intervention: str | None = None
    trial_seconds: float | None = Field(default=None, gt=0, le=86400)


class Architecture(StrictModel):
    """A machine class: the node labels a machine must carry to take its units."""

    labels: dict[str, str] = Field(min_length=1)
    machines: StrictInt | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            problem = label_problem(key, value)
            if problem:
                raise ValueError(problem)
        return labels


class CampaignSpec(StrictModel):
    """The campaign file's contents."""

    name: str
    description: str | None = None
    trial_budget: StrictInt = Field(ge=1)
    trial_seconds: float = Field(default=10.0, gt=0, le=86400)
    #: How long a sprint may wait with no live trusted runner of its class before it is lost.
    runner_wait_s: float = Field(default=60.0, gt=0, le=7 * 86400)
    contracts: list[ContractEntry] = Field(min_length=1)
    architectures: dict[str, Architecture] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        # The campaign's ID names its folder under campaigns/ and its sprints' folders (luma/names.py).
        if not SLUG.match(name) or names.problem(name):
            raise ValueError(f"a slug: lower-case letters, digits, '.', '_' or '-', no '..' (at most 48), "
                             f"got {name[:60]!r}")
        return name

    @field_validator("architectures")
    @classmethod
    def _classes(cls, classes: dict[str, Architecture]) -> dict[str, Architecture]:
        for name in classes:
            if not SLUG.match(name) or names.problem(name):
                raise ValueError(f"machine class {name[:60]!r} is not a slug (lower-case letters, digits, '.', '_', "
                                 f"'-', no '..')")
        return classes


@dataclass(frozen=True)
class Unit:
    """One sprint of the campaign: a contract along one dimension on one machine class."""

    contract: object  # luma.experiments.sprint.contract.Contract
    dimension: str
    machine_class: str
    levels: tuple[str, ...]
    repetitions: int
    intervention: str | None
    trial_seconds: float

    @property
    def key(self) -> str:
        return f"{self.contract.name}-{self.dimension}-{self.machine_class}"

    def sprint_id(self, campaign_id: str) -> str:
        """The sprint's ID (and folder name under sprints/) within campaign `campaign_id`."""
        return f"{campaign_id}--{self.key}"

    def max_trials(self) -> int:
        """At most how many trials its sprint runs (`sprint.max_trials`, from the contract alone:
        the head need not be able to run the service itself)."""
        others = len(set(states.resolve(self.contract.state, skip=self.dimension)) - {self.dimension})
        return max_trials(len(self.levels), self.repetitions, others, self.intervention is not None)

    def spec(self, campaign_id: str) -> dict:
        """What a runner node needs to run the unit (plain data: it crosses the cluster)."""
        return {"campaign": campaign_id, "unit": self.key, "sprint_id": self.sprint_id(campaign_id),
                "machine_class": self.machine_class, "contract": self.contract.model_dump(mode="json"),
                "dimension": self.dimension, "levels": list(self.levels), "repetitions": self.repetitions,
                "intervention": self.intervention}


@dataclass
class Campaign:
    """A loaded campaign: its spec, units, and identity (name + a hash of its file)."""

    spec: CampaignSpec
    units: list[Unit]
    digest: str
    source: str

    @property
    def id(self) -> str:
        return f"{self.spec.name}-{self.digest[:8]}"

    def classes(self) -> dict[str, Architecture]:
        return self.spec.architectures

    def max_trials(self) -> int:
        return sum(u.max_trials() for u in self.units)


def load(path: str | Path, project=None) -> Campaign:
    """Read and check a campaign file (every contract loaded, every level parsed); a ConfigError
    naming the file and field otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ContractError("no such campaign file" if not path.exists() else "not a regular file", source=str(path))
    text = read_text(path, CONFIG_FILE.of(project))
    data = parse_toml(text, str(path), error=ConfigError, invalid="not valid TOML")
    try:
        spec = CampaignSpec.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ContractError(message, source=str(path), field=field) from None
    units = []
    for i, entry in enumerate(spec.contracts):
        units += _units(entry, spec, path, project, f"contracts[{i}]")
    campaign = Campaign(spec, units, hashlib.sha256(text.encode()).hexdigest(), str(path))
    for u in units:  # each sprint's folder name, before anything is written (luma/names.py)
        names.check_name(u.sprint_id(campaign.id), source=str(path), field="contracts", longest=names.MAX_ID)
    keys = [u.key for u in units]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise ContractError(f"unit {dup} appears twice (a contract listed twice with the same dimension)",
                          source=str(path), field="contracts")
    need = sum(u.max_trials() for u in units)
    if need > spec.trial_budget:
        raise ContractError(f"the campaign may need up to {need} trials ({len(units)} sprints) but its trial_budget "
                          f"is {spec.trial_budget}: raise the budget or run fewer contracts, classes or levels",
                          source=str(path), field="trial_budget")
    return campaign


def _units(entry: ContractEntry, spec: CampaignSpec, path: Path, project, where: str) -> list[Unit]:
    ref = entry.contract
    local = path.parent / ref
    try:
        c = contracts.load(local if local.is_file() else ref, project)
    except ConfigError as exc:
        raise ContractError(exc.message, source=str(path), field=f"{where}.contract") from None
    sprint = c.sprint
    dims = entry.dimensions or ([sprint.dimension] if sprint and sprint.dimension else None)
    if not dims:
        raise ContractError(f"contract {c.name} names no [sprint].dimension: give dimensions", source=str(path),
                          field=f"{where}.dimensions")
    if entry.levels is not None and len(dims) > 1:
        raise ContractError("levels go with one dimension only", source=str(path), field=f"{where}.levels")
    out = []
    for dim in dims:
        if dim not in states.ENFORCED + states.HOOKED:
            raise StateError(f"unknown or unenforceable dimension {dim!r} (known: "
                              f"{', '.join(states.ENFORCED + states.HOOKED)})", source=str(path),
                              field=f"{where}.dimensions")
        raw = entry.levels or (sprint.levels if sprint and dim == sprint.dimension else None)
        if not raw or len(raw) < 2:
            raise ContractError(f"no levels for {dim}: give levels, or sweep the contract's own [sprint].dimension",
                              source=str(path), field=f"{where}.levels")
        try:
            for lv in raw:
                states.order_key(dim, states.parse_level(dim, lv))
        except ConfigError as exc:
            raise ContractError(exc.message, source=str(path), field=f"{where}.levels") from None
        intervention = entry.intervention or (sprint.intervention if sprint else None)
        reps = entry.repetitions or (sprint.repetitions if sprint and sprint.repetitions else 3)
        seconds = entry.trial_seconds or spec.trial_seconds
        for cls in spec.architectures:
            out.append(Unit(c, dim, cls, tuple(str(x) for x in raw), reps, intervention, seconds))
    return out


def lpt_makespan(durations: list[float], machines: int) -> float:
    """Wall time of jobs on `machines` identical machines, longest first to the least loaded
    (Graham's LPT: within 4/3 of the best); inf with no machine and work to do."""
    if not durations:
        return 0.0
    if machines < 1:
        return math.inf
    import heapq

    loads = [0.0] * min(machines, len(durations))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + d)
    return max(loads)
