"""JSON Schema of the public record formats, generated from the pydantic models.

The committed `ontology/<record-type>.schema.json` files are these functions' output (a test
keeps them equal); regenerate one with `luma kb schema --record-type T --out ontology/T.schema.json`.
"""

from __future__ import annotations

import json

from luma.kb.trust.attestation import SCHEMA_NOTE
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.envelope import record_schema
from luma.kb.records.intervention_params import intervention_parameters_schema  # noqa: F401 (named by the kinds registry)
from luma.kb.records.kernel_result import KernelResult
from luma.kb.records.kinds import BY_NAME, SCHEMA_KINDS
from luma.kb.records.machine import machine_schema  # noqa: F401 (named by the kinds registry)
from luma.kb.records.model_prediction import ExperimentMatrix, ModelPrediction
from luma.kb.records.optimize_result import optimize_result_schema  # noqa: F401 (named by the kinds registry)
from luma.kb.records.pex_chain import PexChain
from luma.kb.records.pex_trial import PexTrial
from luma.kb.records.pilot_decision import pilot_decision_schema  # noqa: F401 (named by the kinds registry)

def pex_chain_schema() -> dict:
    """JSON Schema (2020-12) of a PEX-chain record, with the dimension vocabulary spelled out."""
    schema = record_schema("pex-chain", PexChain, "LUMA PEX-chain record", (
        "One boundary qualification: minimum PASS -> adjacent FAIL -> binding resource -> "
        "intervention -> recovered PASS. Units are unit names joined by '*' and '/' with powers up "
        "to 4 (e.g. 'GiB', 'GB/s', 'ms', 'core', 'TFLOP/s', '1/s'); a level's unit must fit its "
        "dimension (see ontology/dimensions.ttl), a clause names a known metric in a unit of its kind "
        "(kb/records/metrics.py), and the crossed dimension must have a level in both states. These checks "
        "are enforced by `luma kb ingest`, not by this schema alone." + SCHEMA_NOTE
    ), state_dimensions=True)
    dims = sorted(record_dimensions())
    for key in ("crossed_dimension", "binding_resource"):
        schema["properties"][key]["enum"] = dims
    return schema


def kernel_result_schema() -> dict:
    """JSON Schema (2020-12) of a kernel-result record."""
    return record_schema("kernel-result", KernelResult, "LUMA kernel-result record", (
        "One evaluation or benchmark figure of a kernel (an intervention such as int8 quantization) "
        "with the benchmark standard's fields: environment, workload, method, metrics with units, "
        "repetitions and warm-up, artifact (how to reproduce it), git revision and limitations. "
        "Metric units are unit expressions ('ms', 'GB/s', '1/s') checked by `luma kb ingest`; a "
        "metric LUMA knows (kb/records/metrics.py) must be in a unit of its kind." + SCHEMA_NOTE
    ))


def pex_trial_schema() -> dict:
    """JSON Schema (2020-12) of a pex-trial record."""
    return record_schema("pex-trial", PexTrial, "LUMA pex-trial record", (
        "One physical trial of a PEX sprint (`luma sprint run`): the machine state it ran, the "
        "software variant, the verdict against the contract, the failure cause and the telemetry "
        "as observations with units. Level units must fit their dimension, and a known metric "
        "(kb/records/metrics.py) a unit of its kind (checked by `luma kb ingest`)." + SCHEMA_NOTE
    ), state_dimensions=True)


def model_prediction_schema() -> dict:
    """JSON Schema (2020-12) of a model-prediction record."""
    return record_schema("model-prediction", ModelPrediction, "LUMA model-prediction record", (
        "What the analytical model predicted (`luma model predict|explore --record`, `luma partner evaluate "
        "--record`): per machine state the verdict per contract clause, the binding (or tightest) resource "
        "and the predicted figures with units, with the model's code and calibration hashes. Evidence class "
        "simulated (a service calibrated on this host) or projected (other hardware, partner figures); it "
        "never qualifies a boundary. Level units must fit their dimension (checked by `luma kb ingest`)."
    ), state_dimensions=True)


def experiment_matrix_schema() -> dict:
    """JSON Schema (2020-12) of an experiment-matrix record."""
    return record_schema("experiment-matrix", ExperimentMatrix, "LUMA experiment-matrix record", (
        "A frozen experiment matrix (`luma partner evaluate --record`, `luma sprint run --matrix`): the "
        "contract, the dimension, the states of each configuration with the model's predicted verdict, and "
        "the repetitions a PEX sprint runs to prove the projection. `sha256` is the matrix's own hash as its "
        "writer froze it."
    ))


#: record_type -> its JSON Schema builder, for the kinds luma.kb.records.kinds publishes one of.
SCHEMAS = {name: globals()[BY_NAME[name].schema] for name in SCHEMA_KINDS}


def schema_text(record_type: str = "pex-chain") -> str:
    return json.dumps(SCHEMAS[record_type](), indent=2, sort_keys=True) + "\n"
