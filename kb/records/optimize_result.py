"""The optimize-result record: what `luma sprint optimize` found on one fixed machine state — every
software configuration it tried (variant, batching, threads) with its trials, and the best
accepted one with its throughput (the service for the machine, issue 16 item 3).

A configuration counts as *accepted* when it ran at least `CONFIRMATIONS` trials and every one
PASSed; its throughput is the lower of its trials' (one run on a shared machine is noise). The
best is the accepted configuration with the highest throughput; ingest re-judges every trial and
recomputes the best (kb/ingest/consistency.py), so a measured result always agrees with its trials.

`load` is the accepted service's offered load: a search may not pass by changing it, so every
configuration runs with the contract's concurrency (and arrival mode); ingest refuses one that
did not.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, model_validator

from luma.kb.trust.attestation import SCHEMA_NOTE, Attestation
from luma.kb.records.envelope import record_schema
from luma.kb.records.pex_chain import (
    MAX_OBSERVATIONS_PER_TRIAL,
    Architecture,
    Contract,
    EvidenceClass,
    MachineState,
    Name,
    Observation,
    Provenance,
    SoftwareConfig,
    StrictModel,
    Workload,
    check_convertible,
    check_fits,
)

#: Trials a configuration needs, all PASS, to be accepted.
CONFIRMATIONS = 2
MAX_CONFIGURATIONS = 512
Concurrency = Annotated[StrictInt, Field(ge=1, le=1024)]


class Load(StrictModel):
    """The offered load of the accepted service (the contract's), kept by every configuration."""

    mode: Literal["closed", "poisson"] = "closed"
    concurrency: Concurrency
    rate: Annotated[StrictFloat | StrictInt, Field(gt=0, le=1e6)] | None = None


class OptimizeTrial(StrictModel):
    """One physical trial of a configuration, embedded with its observations (re-judged at ingest)."""

    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    observations: Annotated[list[Observation], Field(max_length=MAX_OBSERVATIONS_PER_TRIAL)] = []
    failure_cause: Name | None = None


class Configuration(StrictModel):
    """One software configuration tried on the state, at the load it ran with."""

    software: SoftwareConfig
    concurrency: Concurrency
    trials: Annotated[list[OptimizeTrial], Field(min_length=1, max_length=20)]


class Throughput(StrictModel):
    """The best configuration's accepted throughput (the lower of its trials')."""

    value: Annotated[StrictFloat | StrictInt, Field(ge=0, allow_inf_nan=False)]
    unit: Name

    @model_validator(mode="after")
    def _a_rate(self) -> "Throughput":
        check_convertible(self.value, self.unit)
        check_fits("throughput", self.value, self.unit)
        return self


class OptimizeResult(StrictModel):
    """The best accepted software configuration on one machine state, with the search behind it."""

    record_type: Literal["optimize-result"]
    evidence_class: EvidenceClass
    #: The run's id (its folder under `$LUMA_HOME/sprints/`; its pex-trial records carry it too).
    sprint: Name
    workload: Workload
    architecture: Architecture
    contract: Contract
    load: Load
    state: MachineState
    configurations: Annotated[list[Configuration], Field(min_length=1, max_length=MAX_CONFIGURATIONS)]
    #: The best accepted configuration; None when none was accepted.
    best: SoftwareConfig | None = None
    throughput: Throughput | None = None
    provenance: Provenance
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None


def optimize_result_schema() -> dict:
    """JSON Schema (2020-12) of an optimize-result record."""
    return record_schema("optimize-result", OptimizeResult, "LUMA optimize-result record", (
        "What `luma sprint optimize` found on one fixed machine state: every software configuration "
        "tried (variant, batching, threads) with its trials, and the best accepted one with its "
        f"throughput. A configuration is accepted when at least {CONFIRMATIONS} trials ran and all PASSed; "
        "its throughput is the lowest of its trials'. Every configuration runs at the contract's load. "
        "`luma kb ingest` re-judges every trial of a measured record and recomputes the best." + SCHEMA_NOTE
    ), state_dimensions=True)
