"""The pex-trial record: one physical trial of a PEX sprint, written to the ledger the moment it
is judged (so a killed sprint keeps every completed trial). A qualified chain (pex-chain record)
cites its trials again; the trial records also keep the ones no chain uses (bisection probes,
diagnosis restorations, re-qualification with the intervention in place).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt

from luma.kb.trust.attestation import Attestation
from luma.kb.records.pex_chain import (
    Architecture,
    Contract,
    Count,
    EvidenceClass,
    MAX_OBSERVATIONS_PER_TRIAL,
    MachineState,
    Name,
    Observation,
    Provenance,
    StrictModel,
    Workload,
)

PHASES = ("boundary", "diagnosis", "intervention", "requalify", "next-binding", "optimize")


class PexTrial(StrictModel):
    """One judged trial: the state it ran, the software variant, its verdict and telemetry."""

    record_type: Literal["pex-trial"]
    evidence_class: EvidenceClass
    sprint: Name
    sequence: Annotated[StrictInt, Field(ge=0, le=1_000_000)]
    phase: Literal["boundary", "diagnosis", "intervention", "requalify", "next-binding", "optimize"]
    workload: Workload
    architecture: Architecture
    contract: Contract
    state: MachineState
    variant: Name
    verdict: Literal["PASS", "FAIL", "INCONCLUSIVE"]
    failure_cause: Name | None = None
    attempts: Count = 1
    observations: Annotated[list[Observation], Field(max_length=MAX_OBSERVATIONS_PER_TRIAL)] = []
    provenance: Provenance
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None
