"""The JSON Schema envelope every record schema shares: the 2020-12 dialect, the schema's id, the
pydantic model's schema, a title and a description; optionally the dimension vocabulary spelled out
for the machine states it holds. kb/records/schema.py and the record modules that build their own
schema (machine, optimize-result, intervention-parameters) all use it, so the committed
`ontology/<record-type>.schema.json` files keep one shape."""

from __future__ import annotations

from luma.kb.records import observations
from luma.kb.records.dimensions import record_dimensions


def record_schema(kind: str, model, title: str, description: str, *, state_dimensions: bool = False) -> dict:
    """JSON Schema (2020-12) of the record `kind` (its file name: `<kind>.schema.json`) from `model`."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://w3id.org/luma/schema/{kind}.schema.json",
        **model.model_json_schema(mode="validation"),
        "title": title,
        "description": description,
    }
    defs = schema.get("$defs", {})
    # What a clause needs observed is the judge's rule, not the model's docstring: spelled out
    # where a writer looks (luma.kb.records.observations).
    if "Observation" in defs:
        defs["Observation"]["description"] = observations.summary()
    if "Clause" in defs:
        defs["Clause"]["description"] += (" Every trial under the contract observes what each clause is judged on "
                                          "(see Observation).")
    if state_dimensions:
        schema["$defs"]["MachineState"]["properties"]["dimensions"]["propertyNames"] = {"enum": sorted(record_dimensions())}
    return schema
