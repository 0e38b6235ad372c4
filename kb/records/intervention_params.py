"""The intervention-parameters record: a technology partner's figures for one intervention.

What a partner states about its mechanism (a KV-cache codec, a CXL memory expander, a NIC
offload ...): the data classes it acts on, the number formats and access patterns it supports,
its effect on capacity and bandwidth per data class, encode/decode throughput, added latency,
power, silicon area, buffering, metadata and memory-management overhead, where it integrates,
what it asks of software (coherence, transparency), its limitations and the licensing /
evaluation boundary. Evidence class `vendor-claim` unless the record carries the provenance of
a measurement.

Every quantity is `{"value": number, "unit": text}` (unit names joined by `*` and `/`, small powers: kb/records/unit_grammar.py) checked against the dimension
of its field (errors name the field path): ratios are dimensionless (`"1"`, `"percent"`,
`"byte/byte"`), throughput in bytes per second, latency in seconds, power in watts, area in
square metres (`"mm^2"`), buffering in bytes. NaN and infinities are refused everywhere.

A partner's records are confidential to that partner: the projection writes everything of one
record (entity descriptions included) into the partner's own named graph (`luma.kb.query.scope`).
`partner-retraction` records withdraw earlier records of one partner (`luma partner remove`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictStr, field_validator, model_validator

from luma.kb.records import units
from luma.kb.records.envelope import record_schema
from luma.kb.records.machine import Quantity, Slug, Source
from luma.kb.records.pex_chain import EvidenceClass, Provenance, StrictModel

#: The closed vocabulary of data classes an intervention can act on.
DATA_CLASSES = ("weights", "activations", "kv-cache", "embeddings", "optimizer-state", "gradients", "io-buffers")
DataClass = Literal["weights", "activations", "kv-cache", "embeddings", "optimizer-state", "gradients", "io-buffers"]
#: Number formats (precisions) a mechanism accepts: the machine record's, plus the narrow formats
#: compression and quantization partners ship.
FORMATS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8-e4m3", "fp8-e5m2", "fp6", "fp4", "mxfp8", "mxfp6",
           "mxfp4", "nvfp4", "int8", "int4", "int2", "uint8")
DataFormat = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8-e4m3", "fp8-e5m2", "fp6", "fp4", "mxfp8",
                     "mxfp6", "mxfp4", "nvfp4", "int8", "int4", "int2", "uint8"]
ACCESS_PATTERNS = ("sequential", "random", "strided", "streaming", "gather-scatter", "append-only", "read-mostly")
AccessPattern = Literal["sequential", "random", "strided", "streaming", "gather-scatter", "append-only", "read-mostly"]
INTEGRATION_POINTS = ("memory-controller", "cxl-device", "nic", "storage-controller", "accelerator", "driver",
                      "runtime", "compiler", "application")
IntegrationPoint = Literal["memory-controller", "cxl-device", "nic", "storage-controller", "accelerator", "driver",
                           "runtime", "compiler", "application"]
#: Every quantity field of a record, as `parameterKind` in the KB (effects first).
FIGURE_KINDS = ("compression_ratio", "capacity_effect", "bandwidth_effect", "encode_throughput", "decode_throughput",
                "added_latency", "power", "silicon_area", "buffering", "metadata_overhead",
                "memory_management_overhead")

Text = Annotated[StrictStr, Field(min_length=1, max_length=4096, pattern=r"\S")]
Version = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")]
Hash = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


def _quantity(canonical: str, what: str, example: str, minimum: float = 0.0, strict: bool = False):
    """A validator: the quantity has the dimensionality of `canonical` and a value (in that
    unit) of at least `minimum` (above it when `strict`). machine.py's `_of` only knows
    positive figures; a partner's added latency, power or overhead may well be zero. As there,
    the wanted dimensionality is read on the first check: the unit registry is not built at import."""

    def check(q: Quantity) -> Quantity:
        wanted = units.dimensionality_of(canonical)  # cached by the unit module
        try:
            have = units.dimensionality_of(q.unit)
        except units.UnitProblem as exc:
            raise ValueError(str(exc)) from None
        if have != wanted:
            raise ValueError(f"unit {q.unit!r} is not {what} (expects {canonical}, e.g. {example})")
        try:
            si = units.normalise(q.value, q.unit)[0]
        except units.UnitProblem as exc:
            raise ValueError(str(exc)) from None
        # The raw value's sign too: a tiny negative latency in 'us' rounds to -0.0 seconds.
        if si < minimum or q.value < 0 or (strict and (si <= minimum or q.value <= 0)):
            bound = f"{'above' if strict else 'at least'} {minimum:g}"
            raise ValueError(f"value must be {bound}{'' if canonical == 'dimensionless' else ' ' + canonical}, "
                             f"got {q.value} {q.unit!r}")
        return q

    return AfterValidator(check)


_RATIO = ("a ratio", "'1', 'percent' or 'byte/byte'")
CompressionRatio = Annotated[Quantity, _quantity("dimensionless", *_RATIO, minimum=1.0),
                             Field(description="Original size / stored size (dimensionless, at least 1).")]
Multiplier = Annotated[Quantity, _quantity("dimensionless", *_RATIO, strict=True),
                       Field(description="Effective / nominal (dimensionless, above 0; 2 doubles it).")]
Overhead = Annotated[Quantity, _quantity("dimensionless", *_RATIO),
                     Field(description="Extra / payload (dimensionless, at least 0; bytes per byte).")]
Throughput = Annotated[Quantity, _quantity("byte / second", "a throughput", "'GB/s' or 'Gbit/s'", strict=True),
                       Field(description="Bytes per second, above 0.")]
Seconds = Annotated[Quantity, _quantity("second", "a latency", "'ns' or 'us'"), Field(description="Seconds, at least 0.")]
Watts = Annotated[Quantity, _quantity("watt", "a power", "'W' or 'mW'"), Field(description="Watts, at least 0.")]
Area = Annotated[Quantity, _quantity("meter ** 2", "an area", "'mm^2'"), Field(description="Square metres, at least 0.")]
Bytes = Annotated[Quantity, _quantity("byte", "a capacity", "'KiB' or 'MB'"), Field(description="Bytes, at least 0.")]


class Effect(StrictModel):
    """What the mechanism does to one data class: compression ratio and/or capacity and
    effective-bandwidth multipliers."""

    data_class: DataClass
    compression_ratio: CompressionRatio | None = None
    capacity_effect: Multiplier | None = None
    bandwidth_effect: Multiplier | None = None
    conditions: Text | None = None

    @model_validator(mode="after")
    def _something(self) -> "Effect":
        if self.compression_ratio is None and self.capacity_effect is None and self.bandwidth_effect is None:
            raise ValueError("give a compression_ratio, a capacity_effect or a bandwidth_effect")
        return self


class Coherence(StrictModel):
    """What the mechanism asks of software: transparency, cache coherence, code changes."""

    software_transparent: StrictBool
    cache_coherent: StrictBool | None = None
    requires_code_changes: StrictBool = False
    constraints: Annotated[list[Text], Field(max_length=32)] = []


class InterventionParameters(StrictModel):
    """A partner's parameters of one intervention (see the module docstring and docs/partners.md)."""

    record_type: Literal["intervention-parameters"]
    partner: Slug
    name: Slug
    version: Version
    evidence_class: EvidenceClass = "vendor-claim"
    kind: Literal["software", "hardware", "partner"] = "partner"
    description: Text | None = None
    data_classes: Annotated[list[DataClass], Field(min_length=1, max_length=len(DATA_CLASSES))]
    formats: Annotated[list[DataFormat], Field(max_length=len(FORMATS))] = []
    access_patterns: Annotated[list[AccessPattern], Field(max_length=len(ACCESS_PATTERNS))] = []
    effects: Annotated[list[Effect], Field(max_length=len(DATA_CLASSES))] = []
    encode_throughput: Throughput | None = None
    decode_throughput: Throughput | None = None
    added_latency: Seconds | None = None
    power: Watts | None = None
    silicon_area: Area | None = None
    buffering: Bytes | None = None
    metadata_overhead: Overhead | None = None
    memory_management_overhead: Overhead | None = None
    integration_point: IntegrationPoint
    coherence: Coherence | None = None
    limitations: Annotated[list[Text], Field(max_length=64)] = []
    licensing: Text | None = None
    evaluation_boundary: Text | None = None
    source: Source | None = None
    provenance: Provenance | None = None

    @field_validator("data_classes", "formats", "access_patterns")
    @classmethod
    def _no_repeats(cls, values: list[str]) -> list[str]:
        for i, v in enumerate(values):
            if v in values[:i]:
                raise ValueError(f"{v!r} is listed twice (at [{i}])")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> "InterventionParameters":
        seen: set[str] = set()
        for i, effect in enumerate(self.effects):
            if effect.data_class not in self.data_classes:
                raise ValueError(f"effects[{i}].data_class: {effect.data_class!r} is not one of data_classes "
                                 f"({', '.join(self.data_classes)})")
            if effect.data_class in seen:
                raise ValueError(f"effects[{i}].data_class: a second effect for {effect.data_class!r}")
            seen.add(effect.data_class)
        if not self.figures():
            raise ValueError("effects: the record states no figure (give effects or at least one quantity)")
        if self.evidence_class == "measured":
            p = self.provenance
            # A measured claim must say where and when it was measured, or it is a vendor claim.
            if p is None or p.started is None or (p.host is None and p.environment is None):
                raise ValueError("provenance: a measured record needs the provenance of its measurement "
                                 "(tool, started, and host or environment); otherwise use vendor-claim")
        return self

    def figures(self) -> list[dict]:
        """Every quantity as a row {kind, data_class, value, unit, si, si_unit}, in record order
        (the CLI's tables and the KB projection use them)."""
        rows = []

        def add(kind: str, q: Quantity | None, data_class: str | None = None) -> None:
            if q is not None:
                si, canonical = units.normalise(q.value, q.unit)
                rows.append({"kind": kind, "data_class": data_class, "value": q.value, "unit": q.unit,
                             "si": si, "si_unit": canonical})

        for e in self.effects:
            for kind in ("compression_ratio", "capacity_effect", "bandwidth_effect"):
                add(kind, getattr(e, kind), e.data_class)
        for kind in FIGURE_KINDS[3:]:
            add(kind, getattr(self, kind))
        return rows


class PartnerRetraction(StrictModel):
    """Withdraws earlier records of one partner (`luma partner remove`). The ledger keeps
    everything; the KB drops the retracted records' graphs, on every rebuild too. A retraction is
    a statement, not evidence: it is recorded as vendor-claim."""

    record_type: Literal["partner-retraction"]
    evidence_class: Literal["vendor-claim"] = "vendor-claim"
    partner: Slug
    records: Annotated[list[Hash], Field(min_length=1, max_length=100_000)]
    reason: Text | None = None
    provenance: Provenance

    @field_validator("records")
    @classmethod
    def _sorted(cls, hashes: list[str]) -> list[str]:
        # Sorted and unique: the same retraction has the same content hash however it was listed.
        return sorted(set(hashes))


def intervention_parameters_schema() -> dict:
    """JSON Schema (2020-12) of an intervention-parameters record
    (ontology/intervention-parameters.schema.json is its output)."""
    return record_schema("intervention-parameters", InterventionParameters, "LUMA intervention-parameters record", (
        "A technology partner's parameters of one intervention: supported data classes, formats and "
        "access patterns, compression / capacity / effective-bandwidth effect per data class, encode and "
        "decode throughput, added latency, power, silicon area, buffering, metadata and memory-management "
        "overhead, integration point, coherence and software-transparency constraints, limitations and the "
        "licensing / evaluation boundary. Evidence class vendor-claim unless measured (which needs the "
        "provenance of the measurement). Quantities are {value, unit} with pint units that must fit the "
        "field (ratios dimensionless, throughput in bytes/s, latency in s, power in W, area in m^2, "
        "buffering in bytes); values must be finite and within the field's range (compression ratio at "
        "least 1, multipliers above 0, the rest at least 0). These unit checks are enforced by `luma "
        "partner add` and `luma kb ingest`, not by this schema alone. TOML, YAML or JSON; a partner file "
        "may be at most 1 MiB (LUMA_MAX_PARTNER_FILE_BYTES)."
    ))
