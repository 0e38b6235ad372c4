"""The one list of record kinds: which model validates each, whether it has a published JSON
Schema, whether it lives in a partner's scope, and whether only LUMA's own commands may write it. The loader, the schemas, the projection, scoping, the runner-trust and
partner code and the CLI's choices are all derived from `KINDS` (issue 15 item 23); each projector
module names the kinds it projects (`luma.kb.ingest.projection.PROJECTORS` checks it has them all).

Model classes are named as "module:Class" and imported on first use, so this module imports
nothing of the records it lists (the record modules import one another)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class RecordKind:
    """One `record_type`."""

    name: str
    #: "module:Class" of the pydantic model that validates it.
    model: str
    #: Function of luma.kb.records.schema that gives its JSON Schema (None: no published schema).
    schema: str | None = None
    #: Kept in a partner's own graphs and seen only in that partner's scope.
    partner: bool = False
    #: Written only by LUMA's commands (`luma runner …`); refused in files.
    command_only: bool = False
    #: May appear in a record file (`luma kb ingest`); rdf-document comes from `luma kb load` only.
    file_record: bool = True
    #: Evidence about services and machines (False: a statement about other records — runner
    #: trust and revocation, a partner's retraction — filed with a class only because every
    #: record has one; reports and evidence-by-class leave these out).
    evidence: bool = True

    def model_class(self) -> type:
        """The pydantic model class."""
        return _import(self.model)


@cache
def _import(path: str) -> type:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


_R = "luma.kb.records."
KINDS: tuple[RecordKind, ...] = (
    RecordKind("pex-chain", _R + "pex_chain:PexChain", "pex_chain_schema"),
    RecordKind("kernel-result", _R + "kernel_result:KernelResult", "kernel_result_schema"),
    RecordKind("pex-trial", _R + "pex_trial:PexTrial", "pex_trial_schema"),
    RecordKind("machine", _R + "machine:MachineRecord", "machine_schema"),
    RecordKind("optimize-result", _R + "optimize_result:OptimizeResult", "optimize_result_schema"),
    # One decision of the Economic Control Pilot (`luma pilot run`): always measured, signed.
    RecordKind("pilot-decision", _R + "pilot_decision:PilotDecision", "pilot_decision_schema"),
    RecordKind("intervention-parameters", _R + "intervention_params:InterventionParameters",
               "intervention_parameters_schema", partner=True),
    RecordKind("partner-retraction", _R + "intervention_params:PartnerRetraction", partner=True, evidence=False),
    RecordKind("runner-trust", _R + "runner_trust:RunnerTrust", command_only=True, evidence=False),
    RecordKind("runner-revocation", _R + "runner_trust:RunnerRevocation", command_only=True, evidence=False),
    # The model's outputs (`--record`): simulated or projected, never signed, never partner-scoped
    # (a partner evaluation records the intervention's tag and the predictions, not its figures).
    RecordKind("model-prediction", _R + "model_prediction:ModelPrediction", "model_prediction_schema"),
    RecordKind("experiment-matrix", _R + "model_prediction:ExperimentMatrix", "experiment_matrix_schema"),
    RecordKind("rdf-document", _R + "rdf_document:RdfDocument", file_record=False),
)
BY_NAME = {k.name: k for k in KINDS}
#: Kinds a record file may hold (command-only ones are then refused by name, not as unknown).
FILE_KINDS = tuple(k.name for k in KINDS if k.file_record)
#: Kinds with a published JSON Schema (`luma kb schema --record-type`).
SCHEMA_KINDS = tuple(k.name for k in KINDS if k.schema)
#: Kinds kept in partner scope.
PARTNER_KINDS = tuple(k.name for k in KINDS if k.partner)
#: Kinds only LUMA's commands write.
COMMAND_ONLY = tuple(k.name for k in KINDS if k.command_only)
#: Kinds that are no evidence (statements about other records).
NOT_EVIDENCE = tuple(k.name for k in KINDS if not k.evidence)
