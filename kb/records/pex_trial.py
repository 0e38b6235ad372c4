"""The pex-trial record: one physical trial of a PEX sprint, written to the ledger the moment it
is judged (so a killed sprint keeps every completed trial). A qualified chain (pex-chain record)
cites its trials again; the trial records also keep the ones no chain uses (bisection probes,
diagnosis restorations, re-qualification with the intervention in place).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, StrictStr, model_validator

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

#: The longest failure message a trial record carries (the runner's own error text is longer:
#: sprint.json keeps it whole, with the server's log tail).
MESSAGE_CHARS = 300
#: One line of text: no line breaks, something besides blanks.
Message = Annotated[StrictStr, Field(min_length=1, max_length=MESSAGE_CHARS, pattern=r"^[^\r\n]*\S[^\r\n]*$")]

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
    #: Why it failed in the runner's words, one line (e.g. "the server exited with code 1 before it
    #: was ready: MemoryError: Unable to allocate 59.6 MiB"); only beside a failure_cause.
    failure_message: Message | None = None
    attempts: Count = 1
    observations: Annotated[list[Observation], Field(max_length=MAX_OBSERVATIONS_PER_TRIAL)] = []
    provenance: Provenance
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None

    @model_validator(mode="after")
    def _message_of_a_failure(self) -> "PexTrial":
        if self.failure_message is not None and self.failure_cause is None:
            raise ValueError("failure_message: only a trial with a failure_cause carries one")
        return self


def failure_message(text: str | None) -> str | None:
    """`text` as a record's failure message: every run of blanks and line breaks one space, cut to
    MESSAGE_CHARS characters (ending in "…" when cut); None when nothing is left."""
    line = " ".join((text or "").split())
    if not line:
        return None
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1].rstrip() + "…"
