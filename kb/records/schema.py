"""JSON Schema of the public record formats, generated from the pydantic models.

The committed `ontology/pex-chain.schema.json` is this function's output (a test keeps them
equal); regenerate it with `luma kb schema --out ontology/pex-chain.schema.json`.
"""

from __future__ import annotations

import json

from luma.kb.dimensions import record_dimensions
from luma.kb.records.pex_chain import PexChain

SCHEMA_ID = "https://w3id.org/luma/schema/pex-chain.schema.json"


def pex_chain_schema() -> dict:
    """JSON Schema (2020-12) of a PEX-chain record, with the dimension vocabulary spelled out."""
    schema = PexChain.model_json_schema(mode="validation")
    dims = sorted(record_dimensions())
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "LUMA PEX-chain record",
        "description": (
            "One boundary qualification: minimum PASS -> adjacent FAIL -> binding resource -> "
            "intervention -> recovered PASS. Units are pint expressions (e.g. 'GiB', 'GB/s', 'ms', "
            "'core', 'TFLOP/s'); a level's unit must fit its dimension (see ontology/dimensions.ttl), "
            "and the crossed dimension must have a level in both states. These two checks need the "
            "ontology and are enforced by `luma kb ingest`, not by this schema alone."
        ),
    }
    defs = schema["$defs"]
    defs["MachineState"]["properties"]["dimensions"]["propertyNames"] = {"enum": dims}
    for key in ("crossed_dimension", "binding_resource"):
        schema["properties"][key]["enum"] = dims
    return schema


def schema_text() -> str:
    return json.dumps(pex_chain_schema(), indent=2, sort_keys=True) + "\n"
