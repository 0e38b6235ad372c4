"""The pilot-decision record: one decision of the Economic Control Pilot (`luma pilot run`,
experiments/pilot/), the controller that serves live traffic inside a library of qualified machine
states, switches state, verifies the contract on the live traffic and retains the new state or
rolls it back.

A decision is a physical event — the service really ran in the state before and in the candidate,
and the verification trials really served traffic — so its evidence class is always `measured`,
and like every measured record it must be signed by a runner key the project trusts
(kb/ingest/evidence_gate.py). What the controller *saw* and *predicted*, and what the switch *realized*,
are figures, each with its own evidence class: latency and rates are measured, energy comes from
a power model (simulated) unless counters exist, and cost is measured time times a price table
(projected / user-supplied). A figure's class travels with it into the KB.

Ingest re-judges the verification trials against the contract (kb/ingest/consistency_pilot.py).

`state_key` is the stable short hash the controller names a library state by.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from luma.kb.records import metrics
from luma.kb.trust.attestation import SCHEMA_NOTE, Attestation
from luma.kb.records.envelope import record_schema
from luma.kb.records.optimize_result import OptimizeTrial
from luma.kb.records.pex_chain import (
    Architecture,
    Contract,
    EvidenceClass,
    MachineState,
    Name,
    Number,
    Provenance,
    StrictModel,
    Workload,
    check_convertible,
    check_fits,
)
from luma.kb.vocab import EVIDENCE_CLASSES, PRICE_CLASSES, canonical_json

#: Figures one list carries (a controller reports a dozen metrics at most).
MAX_FIGURES = 64
MAX_TRIALS = 32
MAX_SETTINGS = 8
#: A figure's class: an evidence class, or a figure a user supplied (a price table's).
FigureClass = Literal[tuple(dict.fromkeys((*EVIDENCE_CLASSES, *PRICE_CLASSES)))]
Metric = Annotated[StrictStr, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
Seconds = Annotated[StrictFloat | StrictInt, Field(ge=0, allow_inf_nan=False)]
Key = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{12}$",
                                 description="12 lower-case hex characters: `state_key` of the state's levels, "
                                             "variant and settings.")]


def state_key(levels: dict, variant: str, settings: dict) -> str:
    """The key of a library state: the first 12 hex characters of the SHA-256 of the canonical
    JSON (sorted keys, no whitespace) of `{"levels": levels, "settings": settings, "variant":
    variant}`. The same three values give the same key in every run, whatever their key order.

    Pass the levels in one form everywhere — the record's `dimensions` (`{"compute": {"value":
    1, "unit": "core"}}`, a `MachineState` is taken as its dimensions) — since `8 GiB` and
    `8192 MiB` are one level but not one text. Ingest does not recompute the key: it only groups
    decisions by it (kb/queries/pilot-*.rq), so a controller must keep to one form."""
    if isinstance(levels, MachineState):
        levels = levels.model_dump(mode="json", exclude_none=True)["dimensions"]
    text = canonical_json({"levels": levels, "settings": settings, "variant": variant})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class PilotState(StrictModel):
    """A state of the pilot's library: the machine state, the software variant and its runtime
    settings, named by its key."""

    key: Key
    state: MachineState
    variant: Name
    settings: Annotated[dict[Name, Annotated[StrictInt, Field(ge=1, le=2**31 - 1)]],
                        Field(max_length=MAX_SETTINGS)] = {}

    @field_validator("settings", mode="after")
    @classmethod
    def _sorted(cls, settings: dict[str, int]) -> dict[str, int]:
        # Key order is part of the canonical JSON (the content hash), as for machine states.
        return dict(sorted(settings.items()))


class Figure(StrictModel):
    """One figure the controller used or found, in a unit of its metric's kind, with its evidence
    class and, when it has one, its confidence interval (in the same unit)."""

    metric: Metric
    value: Number
    unit: Name
    evidence_class: FigureClass
    ci_low: Number | None = None
    ci_high: Number | None = None
    source: Annotated[StrictStr, Field(max_length=300)] | None = None

    @model_validator(mode="after")
    def _fits_its_metric(self) -> "Figure":
        # A figure feeds an economic decision: its metric must be one LUMA knows the unit of.
        if metrics.kind_of(self.metric) is None:
            raise ValueError(f"metric: unknown metric {self.metric!r} (known: {metrics.known()})")
        check_convertible(self.value, self.unit)
        check_fits(self.metric, self.value, self.unit)
        if (self.ci_low is None) != (self.ci_high is None):
            raise ValueError("ci_low: an interval has both bounds, ci_low and ci_high, or neither")
        if self.ci_low is not None:
            for bound, value in (("ci_low", self.ci_low), ("ci_high", self.ci_high)):
                why = metrics.impossible(f"{self.metric}.{bound}", value)
                if why:
                    raise ValueError(f"{bound}: {why}")
            if not self.ci_low <= self.value <= self.ci_high:
                raise ValueError(f"ci_low: the interval [{self.ci_low:g}, {self.ci_high:g}] does not hold the value "
                                 f"{self.value:g}: ci_low <= value <= ci_high")
        return self


Figures = Annotated[list[Figure], Field(max_length=MAX_FIGURES)]


def _once(figures: list[Figure], field: str) -> None:
    """Each metric at most once in a figure list: which of two would a query read?"""
    seen: set[str] = set()
    for i, f in enumerate(figures):
        if f.metric in seen:
            raise ValueError(f"{field}[{i}].metric: {f.metric!r} appears twice; a list gives each metric once")
        seen.add(f.metric)


class Window(StrictModel):
    """The decision window, in seconds of trace time from the run's start."""

    start_s: Seconds
    end_s: Seconds

    @model_validator(mode="after")
    def _ordered(self) -> "Window":
        if not self.end_s > self.start_s:
            raise ValueError(f"end_s: the window ends ({self.end_s:g} s) after it starts ({self.start_s:g} s)")
        return self


class Prediction(StrictModel):
    """What the controller predicted for the candidate before applying it."""

    verdict: Literal["PASS", "FAIL"]
    #: The share of the tightest clause's threshold the prediction keeps in hand (the guardrail).
    margin: Annotated[StrictFloat | StrictInt, Field(ge=0, lt=1, allow_inf_nan=False)]
    figures: Figures = []

    @model_validator(mode="after")
    def _unique(self) -> "Prediction":
        _once(self.figures, "figures")
        return self


class Verification(StrictModel):
    """The contract verified on live traffic in the candidate: the verdict, the windows it took,
    and its trials (one per verification window, re-judged at ingest)."""

    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    windows: Annotated[StrictInt, Field(ge=1, le=1_000_000)]
    trials: Annotated[list[OptimizeTrial], Field(min_length=1, max_length=MAX_TRIALS)]


class Realized(StrictModel):
    """What the switch realized: the figures before it and after it."""

    before: Figures = []
    after: Figures = []

    @model_validator(mode="after")
    def _unique(self) -> "Realized":
        _once(self.before, "before")
        _once(self.after, "after")
        return self


class PilotDecision(StrictModel):
    """One decision of the pilot: the state it left, the candidate it applied, what it saw and
    predicted, how the candidate verified, and whether it was retained or rolled back."""

    record_type: Literal["pilot-decision"]
    evidence_class: EvidenceClass
    #: The pilot run's id (its folder under `$LUMA_HOME/pilots/`).
    pilot: Name
    #: The decision's number within the run.
    sequence: Annotated[StrictInt, Field(ge=0, le=1_000_000_000)]
    window: Window
    action: Literal["downscale", "upscale", "breach-upscale", "rollback"]
    workload: Workload
    architecture: Architecture
    contract: Contract
    #: The state in force before; None for the first placement.
    from_state: PilotState | None = None
    candidate: PilotState
    observed: Figures = []
    prediction: Prediction
    verification: Verification
    realized: Realized
    outcome: Literal["retained", "rolled-back"]
    reason: Annotated[StrictStr, Field(min_length=1, max_length=300, pattern=r"\S")]
    provenance: Provenance
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None

    @field_validator("evidence_class", mode="after")
    @classmethod
    def _measured(cls, value: str) -> str:
        if value != "measured":
            raise ValueError(f"a pilot decision is a physical event (the service ran, the traffic was served): its "
                             f"evidence class is measured, not {value!r}; its figures carry their own classes")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "PilotDecision":
        _once(self.observed, "observed")
        verdict = self.verification.verdict
        if self.outcome == "retained" and verdict != "PASS":
            raise ValueError(f"outcome: retained, but the verification verdict is {verdict}: only a candidate that "
                             "verified PASS is retained, any other is rolled back")
        if self.from_state is not None and self.candidate.key == self.from_state.key:
            raise ValueError(f"candidate.key: {self.candidate.key} is also from_state's: a decision applies another "
                             "state than the one in force")
        return self


def figure_judged(metric: str) -> bool:
    """Whether the pilot judges a clause on `metric` from its figures rather than from a trial's
    observations: power, energy and cost (a power model, a price table) and the reliability of
    the service over its windows (error rate, availability). Ingest does not re-judge these."""
    return metric in _RELIABILITY or metrics.kind_of(metric) in _ECONOMIC_KINDS


_RELIABILITY = ("error_rate", "availability")
_ECONOMIC_KINDS = (metrics.POWER, metrics.ENERGY, metrics.ENERGY_PER_TOKEN, metrics.ENERGY_PER_REQUEST,
                   metrics.ENERGY_PER_OUTPUT, metrics.COST, metrics.COST_PER_REQUEST, metrics.COST_PER_OUTPUT)


def pilot_decision_schema() -> dict:
    """JSON Schema (2020-12) of a pilot-decision record."""
    return record_schema("pilot-decision", PilotDecision, "LUMA pilot-decision record", (
        "One decision of the Economic Control Pilot (`luma pilot run`): the library state in force "
        "(`from_state`, none for the first placement) and the candidate applied (each a machine state, "
        "software variant and settings named by a 12-hex-character key), the decision window in trace "
        "seconds, the action, what the controller observed and predicted, the contract verified on live "
        "traffic (trials with observations) and the outcome: retained (only after a PASS) or rolled back. "
        "Always `measured`: a decision is a physical event. Figures name a known metric (kb/records/metrics.py) "
        "in a unit of its kind and carry their own evidence class (measured, simulated, projected, "
        "vendor-claim or user-supplied) and optional interval ci_low <= value <= ci_high; a list names "
        "each metric once. `luma kb ingest` re-judges every verification trial on the clauses it "
        "observes (the pilot judges power, energy, cost, error rate and availability on its figures) "
        "and checks the verification verdict against its trials: INCONCLUSIVE windows extend it, the "
        "first PASS or FAIL decides and ends it." + SCHEMA_NOTE
    ), state_dimensions=True)
