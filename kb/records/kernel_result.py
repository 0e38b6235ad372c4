"""The kernel-result record: one evaluation or benchmark figure, with the fields of the portfolio's
benchmark standard (environment, workload, method, metric, repetitions and warm-up, artifact,
git revision, limitations). `luma kernels evaluate|bench` emit them; anyone may submit them.

Unknown environment values stay absent (null), never guessed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StrictInt, StrictStr

from luma.kb.trust.attestation import Attestation
from luma.kb.records.pex_chain import Count, Environment, EvidenceClass, Name, Observation, StrictModel, Workload


class Method(StrictModel):
    """What was applied: an intervention of the int8 family and its settings."""

    name: Name
    kind: Literal["software", "hardware", "partner"] = "software"
    bits: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    granularity: Name | None = None
    mode: Name | None = None
    backend: Name | None = None


class KernelResult(StrictModel):
    """One measured (or simulated, projected, claimed) kernel figure with its context."""

    record_type: Literal["kernel-result"]
    evidence_class: EvidenceClass
    environment: Environment
    workload: Workload
    method: Method
    metrics: Annotated[list[Observation], Field(min_length=1, max_length=256)]
    repetitions: Count
    warmup: Annotated[StrictInt, Field(ge=0, le=1 << 20)] = 0
    artifact: Annotated[StrictStr, Field(min_length=1, max_length=2048, pattern=r"\S")]
    tool: Name = "luma kernels"
    git_revision: Name | None = None
    limitations: Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=2048)]], Field(max_length=64)] = []
    started: datetime | None = None
    #: The runner's signature over the content hash (which leaves this block out).
    attestation: Attestation | None = None
