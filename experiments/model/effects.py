"""A partner's intervention, as the analytical model applies it: the `Effects` of one
intervention-parameters record (`kb/records/intervention_params.py`) on the data classes the LLM
model has — the KV cache and the weights — *with the mechanism's own costs*.

KV cache (the `kv-cache` effect):

* **capacity factor** = capacity_effect (else compression_ratio, else 1)
  / (1 + metadata_overhead) / (1 + memory_management_overhead): stored KV bytes = raw / it;
* **read factor** (KV bytes read per decode step = raw / it) = bandwidth_effect when the partner
  states one (its effective read bandwidth, codec decode included); otherwise the capacity factor,
  capped by the codec's decode_throughput: the raw KV comes out at min(HBM bandwidth x capacity
  factor, decode throughput) per device;
* **encode**: every KV byte written (prompt and generated tokens) passes the codec at
  encode_throughput per device, added to prefill and to every decode step;
* **added latency** per decode step (so to TPOT, TTFT under continuous batching, and latency);
* **buffering** bytes reserved on every device; **power** added to every device (energy, and
  cost when the space prices machines by power).

Weights (the `weights` effect): weight bytes (memory and reads) / the weights' capacity factor
(same overheads). Silicon area is reported, not modelled (no price per mm^2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from luma.errors import ContractError
from luma.kb.records import units

#: Data classes the LLM model represents (the others an intervention may name are not modelled).
MODELLED = ("kv-cache", "weights")


def _si(q) -> float | None:
    if q is None:
        return None
    return float(units.normalise(q.value, q.unit)[0])


@dataclass(frozen=True)
class Effects:
    """What one intervention does to the model's figures (SI units; factors dimensionless)."""

    source: str = "intervention"
    kv_capacity_factor: float = 1.0
    kv_read_factor: float | None = None  # None: the capacity factor, capped by decode_throughput
    kv_decode_rate: float | None = None  # bytes/s per device
    kv_encode_rate: float | None = None  # bytes/s per device
    weight_capacity_factor: float = 1.0
    added_latency: float = 0.0  # seconds per decode step
    power: float = 0.0  # watts per device
    buffering: float = 0.0  # bytes per device
    silicon_area: float | None = None  # m^2 (reported only)
    data_classes: tuple[str, ...] = ()  # the modelled data classes it acts on
    ignored: tuple[str, ...] = ()  # data classes it names that the model does not represent
    notes: list[str] = field(default_factory=list)

    @property
    def acts_on_kv(self) -> bool:
        return "kv-cache" in self.data_classes

    def as_dict(self) -> dict:
        return asdict(self)

    def kv_read(self, bandwidth):
        """The KV read factor at a per-device effective memory bandwidth (bytes/s, array)."""
        import numpy as np

        if self.kv_read_factor is not None:
            return np.broadcast_to(np.float64(self.kv_read_factor), np.shape(bandwidth))
        cf = np.full(np.shape(bandwidth), self.kv_capacity_factor, dtype=np.float64)
        if self.kv_decode_rate is None:
            return cf
        return np.minimum(cf, self.kv_decode_rate / np.asarray(bandwidth, dtype=np.float64))


def from_record(record, source: str | None = None) -> Effects:
    """The Effects of an InterventionParameters record; ConfigError when it acts on nothing the
    LLM model represents."""
    name = source or f"{record.partner}/{record.name}@{record.version}"
    effects = {e.data_class: e for e in record.effects}
    named = list(dict.fromkeys([*record.data_classes, *effects]))
    modelled = tuple(d for d in MODELLED if d in named)
    ignored = tuple(d for d in named if d not in MODELLED)
    if not modelled:
        raise ContractError(f"the record acts on {', '.join(named)}; the LLM model represents only "
                          f"{', '.join(MODELLED)}: nothing to evaluate", source=name, field="data_classes")
    overhead = (1.0 + (_si(record.metadata_overhead) or 0.0)) * (1.0 + (_si(record.memory_management_overhead) or 0.0))

    def capacity(e) -> float:
        if e is None:
            return 1.0
        raw = _si(e.capacity_effect) if e.capacity_effect is not None else _si(e.compression_ratio)
        return (raw if raw is not None else 1.0) / overhead

    kv, w = effects.get("kv-cache"), effects.get("weights")
    notes = []
    if ignored:
        notes.append(f"not modelled (the LLM model has no such data): {', '.join(ignored)}")
    if record.silicon_area is not None:
        notes.append("silicon area is reported, not costed (no price per mm^2)")
    if kv is not None and kv.bandwidth_effect is not None and record.decode_throughput is not None:
        notes.append("KV reads use the stated bandwidth_effect (taken to include the codec's decode throughput)")
    if w is not None and w.bandwidth_effect is not None:
        notes.append("weights: bandwidth_effect not modelled separately (weight reads scale with the capacity factor)")
    return Effects(
        source=name,
        kv_capacity_factor=capacity(kv),
        kv_read_factor=_si(kv.bandwidth_effect) if kv is not None and kv.bandwidth_effect is not None else None,
        kv_decode_rate=_si(record.decode_throughput) if "kv-cache" in modelled else None,
        kv_encode_rate=_si(record.encode_throughput) if "kv-cache" in modelled else None,
        weight_capacity_factor=capacity(w),
        added_latency=_si(record.added_latency) or 0.0,
        power=_si(record.power) or 0.0,
        buffering=_si(record.buffering) or 0.0,
        silicon_area=_si(record.silicon_area),
        data_classes=modelled, ignored=ignored, notes=notes,
    )
