"""Records of the analytical model's outputs: `model-prediction` (what `luma model predict|explore`
and `luma partner evaluate` predicted, state by state) and `experiment-matrix` (the frozen matrix
of states a PEX sprint runs to prove a projection).

Both are the model's evidence, never the machine's: their class is `simulated` (the model of a
service calibrated on this host) or `projected` (hardware the model has not measured, partner
figures), as the model states it. Neither needs a runner's signature (kb/ingest/evidence_gate.py only
gates `measured`), and neither can be `measured` or `vendor-claim`. A prediction names the same
contract and machine-state entities the PEX records do (kb/ingest/projection.py), so a rule can set it
beside the trials that later measured that state (rules/75-model-agreement.rq).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator, model_validator

from luma.kb.records.pex_chain import (
    Contract,
    MachineState,
    Name,
    Observation,
    Provenance,
    StrictModel,
    Workload,
    check_convertible,
)

#: A recorded model output cites at most this many states (explore proposes at most 1,000, and
#: its frontier has one state per demand point).
MAX_PREDICTIONS = 5_000
MAX_CLAUSES = 64
MAX_FIGURES = 64
#: The model's classes: it is evidence about the model, never a measurement or a vendor's claim.
ModelEvidence = Literal["simulated", "projected"]
Verdict = Literal["PASS", "FAIL", "UNKNOWN"]
Key = Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
Sha256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Figure = Annotated[StrictFloat | StrictInt, Field(allow_inf_nan=False)]


class ModelVersion(StrictModel):
    """Which model made the prediction: its code and the calibration it read."""

    name: Name
    #: SHA-256 of the model's source files (experiments/model/*.py): another code, another model.
    code: Sha256
    #: SHA-256 of the calibration file(s) read; None: uncalibrated (default efficiency figures).
    calibration: Sha256 | None = None
    calibrated: StrictBool = False
    #: The space file whose machines, prices and quality were used, when one was.
    space: Name | None = None


class PredictedClause(StrictModel):
    """One check of the contract as the model judged it: predicted value against threshold."""

    check: Name
    op: Literal["<=", ">=", "<", ">"]
    predicted: Figure | None = None
    threshold: Figure | None = None
    unit: Name
    #: Relative margin (negative: the check fails by that share); None where it cannot be judged.
    margin: Figure | None = None
    verdict: Verdict
    resource: Name

    @model_validator(mode="after")
    def _unit(self) -> "PredictedClause":
        for value in (self.predicted, self.threshold):
            if value is not None:
                check_convertible(value, self.unit)
        return self


class PredictedState(StrictModel):
    """The model's verdict on one machine state."""

    #: What the state is to the command: state, frontier, proposal, candidate-pass, adjacent-fail ...
    role: Name
    state: MachineState
    #: The rest of what was predicted that is not a machine level: software variant, precision,
    #: parallelism, load (concurrency, context), as the model's axis labels.
    configuration: Annotated[dict[Key, Name], Field(max_length=32)] = {}
    verdict: Verdict
    #: The resource that fails first (a FAIL), else None.
    binding_resource: Name | None = None
    #: The resource that would bind first (the smallest margin's).
    tightest_resource: Name | None = None
    margin: Figure | None = None
    #: True when the state runs the service as it is (no intervention, the baseline variant): the
    #: states of a PEX chain's boundary are measured that way.
    baseline: StrictBool = True
    #: True when the state's load (concurrency, batch, context, new tokens) is the contract's own:
    #: a sprint of the contract measures it at that load, so only then is a trial the same experiment.
    at_contract_load: StrictBool = True
    clauses: Annotated[list[PredictedClause], Field(max_length=MAX_CLAUSES)] = []
    figures: Annotated[list[Observation], Field(max_length=MAX_FIGURES)] = []

    @field_validator("configuration", mode="after")
    @classmethod
    def _sorted(cls, config: dict[str, str]) -> dict[str, str]:
        return dict(sorted(config.items()))  # key order is part of the content hash

    @model_validator(mode="after")
    def _binding_for_a_fail(self) -> "PredictedState":
        if self.verdict == "FAIL" and self.binding_resource is None:
            raise ValueError("binding_resource: a predicted FAIL names the resource that binds")
        if self.verdict != "FAIL" and self.binding_resource is not None:
            raise ValueError(f"binding_resource: only a predicted FAIL has one (this state is {self.verdict})")
        return self


class ModelPrediction(StrictModel):
    """One run of the model: the states it predicted for one contract."""

    record_type: Literal["model-prediction"]
    evidence_class: ModelEvidence
    #: The command that predicted (`luma model predict`, `luma model explore`, `luma partner evaluate`).
    command: Name
    model: ModelVersion
    contract: Contract
    workload: Workload | None = None
    #: A partner intervention the predictions apply (`partner/name@version`), when one is.
    intervention: Name | None = None
    predictions: Annotated[list[PredictedState], Field(min_length=1, max_length=MAX_PREDICTIONS)]
    notes: Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=2000)]], Field(max_length=64)] = []
    provenance: Provenance

    @field_validator("predictions", mode="before")
    @classmethod
    def _bounded(cls, rows):
        # Counted before any state is validated: a list of YAML aliases costs nothing to refuse.
        if isinstance(rows, list) and len(rows) > MAX_PREDICTIONS:
            raise ValueError(f"a record cites at most {MAX_PREDICTIONS} predicted states, this one {len(rows)}")
        return rows

    @model_validator(mode="after")
    def _intervention_is_not_baseline(self) -> "ModelPrediction":
        # A chain's PASS and FAIL states are measured without the intervention: a prediction with
        # it must not be set beside them (rules/75-model-agreement.rq reads `baseline`).
        for i, p in enumerate(self.predictions):
            if p.baseline and p.configuration.get("intervention"):
                raise ValueError(f"predictions[{i}].baseline: a state with an intervention is not the baseline")
        return self


class MatrixState(StrictModel):
    """One state of a frozen experiment matrix, with what the model predicts there."""

    role: Name
    #: {dimension or axis: level}, as the model's labels ("4 MiB", "nvidia-h100-sxm5-80gb", "8").
    levels: Annotated[dict[Key, Name], Field(min_length=1, max_length=64)]
    predicted: Verdict | None = None
    binding: Name | None = None
    margin: Figure | None = None


class MatrixConfiguration(StrictModel):
    """One side of the matrix: the baseline, or the service with an intervention."""

    name: Name
    intervention: Name | None = None
    states: Annotated[list[MatrixState], Field(max_length=1000)]


class ExperimentMatrix(StrictModel):
    """A frozen experiment matrix: the contract, the dimension, the states per configuration and
    the repetitions a PEX sprint runs (`luma sprint run --matrix`). `sha256` is the matrix's own
    hash as its writer froze it (`luma partner evaluate --out`): the file and the record are
    checked against each other with it."""

    record_type: Literal["experiment-matrix"]
    evidence_class: ModelEvidence
    sha256: Sha256
    contract: Contract
    #: The model served (an LLM's name), when the matrix is an LLM's.
    model: Name | None = None
    dimension: Key
    repetitions: Annotated[StrictInt, Field(ge=1, le=20)]
    configurations: Annotated[list[MatrixConfiguration], Field(min_length=1, max_length=16)]
    provenance: Provenance
