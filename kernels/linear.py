"""An int8 replacement for `torch.nn.Linear`, and a quantizer that swaps it into a model.

Two modes:

* ``weight-only``: int8 weights (per channel or per tensor) and float activations. Saves 4x weight
  memory; the product runs on `torch._weight_int8pack_mm` where it is measured fast here
  (per-channel scales), else on the weight dequantized per call.
* ``dynamic``: int8 weights and activations quantized per call, an int8 GEMM, then one rescale
  pass. Which GEMM (`torch._int_mm` with LUMA's symmetric activations, or PyTorch's prepacked
  engine GEMM) is measured per machine: see `luma.kernels.gemm_backend`.

`bits` below 8 stores the weight on a coarser grid (qmax = 2^(bits-1) - 1) in int8 containers: the
accuracy of a lower bit width, not its memory (see `weight_bytes`, which counts packed bits).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from luma.errors import TensorError
from luma.kernels import gemm_backend, torch_ops
from luma.kernels.calibration import Calibrator

MODES = ("weight-only", "dynamic")
GRANULARITIES = ("per-channel", "per-tensor")


@dataclass(frozen=True)
class QuantConfig:
    """How `quantize_model` converts a model's Linear layers."""

    mode: Literal["weight-only", "dynamic"] = "dynamic"
    granularity: Literal["per-channel", "per-tensor"] = "per-channel"
    bits: int = 8
    #: fnmatch patterns of module names left in float (e.g. a classifier head)
    skip: tuple[str, ...] = ()
    #: per-layer weight bits (mixed precision), by module name; others get `bits`
    layer_bits: dict[str, int] = field(default_factory=dict)
    #: int8 GEMM of the dynamic mode (`auto`: the fastest measured here)
    backend: str = "auto"
    #: SmoothQuant migration strength for dynamic mode when calibration data is given. Off (0) by
    #: default: on MiniLM here α = 0.5 lowered the mean cosine to fp32 from 0.976 to 0.960 (engine
    #: GEMM) and from 0.982 to 0.963 (int_mm), so it is an option to measure, not a default.
    smooth_alpha: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TensorError(f"unknown mode {self.mode!r} (known: {', '.join(MODES)})", field="mode")
        if self.granularity not in GRANULARITIES:
            raise TensorError(
                f"unknown granularity {self.granularity!r} (known: {', '.join(GRANULARITIES)})", field="granularity"
            )
        gemm_backend.resolve(self.backend)  # refuses an unknown or unavailable backend
        for b in (self.bits, *self.layer_bits.values()):
            if isinstance(b, bool) or not isinstance(b, int) or not 2 <= b <= 8:
                raise TensorError(f"bits must be a whole number from 2 to 8, got {b!r}", field="bits")


class Int8Linear(nn.Module):
    """y = x Wᵀ + b with W stored as int8 levels and float32 scales.

    It computes in float32 and returns the input's dtype (float16 and bfloat16 models keep
    working after `quantize_model`). Rows are independent: a row holding NaN or ±inf (or, from a
    float64 input, values beyond float32's range) is computed in float against the dequantized
    weight, so its output is non-finite where fp32's would be, and no other row changes. Empty
    batches and zero-width layers give empty or bias-only outputs, as `nn.Linear` does.
    """

    def __init__(self, q_weight: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None,
                 mode: str = "dynamic", bits: int = 8, backend: str = "auto", name: str | None = None):
        super().__init__()
        self.out_features, self.in_features = q_weight.shape
        self.mode, self.bits, self.name = mode, bits, name
        if mode == "dynamic" and self.in_features > torch_ops.MAX_K:
            raise TensorError(f"{self._label()}: {self.in_features:,} input features is too many for the dynamic int8 "
                              f"mode (int32 sums overflow beyond {torch_ops.MAX_K:,}); use mode weight-only",
                              field="in_features")
        self.backend = gemm_backend.resolve(backend) if mode == "dynamic" else "-"
        self._auto = backend == "auto"
        self._packed: dict[str, object] = {}  # engine -> its packed weight, made on first use
        self.register_buffer("q_weight", q_weight.contiguous())  # (N, K), for the weight-only kernel
        # (K, N) for _int_mm; the other paths never read it.
        self.register_buffer("q_weight_t", q_weight.t().contiguous() if self.backend == "int_mm" else None)
        self.register_buffer("w_scale", w_scale.to(torch.float32))
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.float32).clone())
        self._per_channel_w = w_scale.ndim == 1
        #: 1/s per input feature when the layer was smoothed (see `from_float`), else None
        self.register_buffer("inv_smooth", None)

    def _label(self) -> str:
        return f"layer {self.name!r}" if self.name else f"Linear({self.in_features}, {self.out_features})"

    @classmethod
    def from_float(cls, linear: nn.Linear, mode: str = "dynamic", granularity: str = "per-channel", bits: int = 8,
                   backend: str = "auto", act_amax: torch.Tensor | None = None, alpha: float = 0.5,
                   name: str | None = None):
        """Quantize a float Linear (any float dtype; its levels are the reference's exactly).
        With `act_amax` (calibrated max|x| per input feature, dynamic mode), the layer is
        smoothed first (SmoothQuant): x' = x / s and W' = W · s with
        s_j = act_amax_j^α / max_i|W_ij|^(1-α), which moves activation outliers into the weights,
        where per-channel scales absorb them; the product is unchanged in exact arithmetic.
        A weight holding NaN, ±inf or values beyond float32's range is refused, naming `name`."""
        label = f"layer {name!r}" if name else f"Linear({linear.in_features}, {linear.out_features})"
        w = linear.weight.detach()
        _check_weight(w, label, "")
        smooth = None
        if act_amax is not None and mode == "dynamic":
            w = w.float()
            w_amax = w.abs().amax(dim=0).clamp(min=1e-8) if w.numel() else torch.ones(w.shape[1])
            smooth = (act_amax.float().clamp(min=1e-8) ** alpha / w_amax ** (1 - alpha)).clamp(min=1e-5, max=1e5)
            w = w * smooth[None, :]
            _check_weight(w, label, " after smoothing")
        # The exact path (float64 division block by block): the reference's levels, no float64 copy.
        if granularity == "per-channel":
            q, scale = torch_ops.quantize_per_channel(w, 0, bits=bits, exact=True)
        else:
            q, scale = torch_ops.quantize_per_tensor(w, bits=bits, exact=True)
        layer = cls(q, scale, linear.bias, mode, bits, backend, name)
        if smooth is not None:
            layer.inv_smooth = 1.0 / smooth
        return layer

    def weight_bytes(self) -> int:
        """Bytes the weight needs packed at `bits` per value, scales included (float32)."""
        return (self.q_weight.numel() * self.bits + 7) // 8 + self.w_scale.numel() * 4

    def dequantized_weight(self) -> torch.Tensor:
        s = self.w_scale[:, None] if self._per_channel_w else self.w_scale
        return self.q_weight.float() * s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_floating_point(x):
            raise TensorError(f"{self._label()}: input must be a floating-point tensor, got {x.dtype}", field="input")
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise TensorError(f"{self._label()}: input of shape {tuple(x.shape)} does not end in "
                              f"{self.in_features} features", field="input")
        shape, dtype = x.shape, x.dtype
        x2 = x.reshape(math.prod(shape[:-1]), self.in_features)
        if self.inv_smooth is not None:
            x2 = x2 * self.inv_smooth
        if 0 in (x2.shape[0], self.in_features, self.out_features):
            y = self._float_rows(x2)  # nothing to quantise: the float product is exact (zeros + bias)
        elif self.mode == "weight-only":
            y = self._weight_only(x2)
        else:
            y = self._dynamic(x2)
        return y.to(dtype).reshape(*shape[:-1], self.out_features)

    def _float_rows(self, x2: torch.Tensor) -> torch.Tensor:
        """The rows in float32 against the dequantized weight: fp32's semantics for NaN and ±inf."""
        y = x2.float() @ self.dequantized_weight().t()
        return y if self.bias is None else y.add_(self.bias)

    def _weight_only(self, x2: torch.Tensor) -> torch.Tensor:
        if self._per_channel_w and x2.dtype == torch.float32 and gemm_backend.weight_int8pack_is_fast():
            y = torch._weight_int8pack_mm(x2.contiguous(), self.q_weight, self.w_scale)
            return y if self.bias is None else y.add_(self.bias)
        return self._float_rows(x2)

    def _dynamic(self, x2: torch.Tensor) -> torch.Tensor:
        if self.backend != "int_mm":
            return self._engine(x2.float().contiguous())
        m = x2.shape[0]
        buf = self._activation_buffer(m)
        # One scale per row: no row (a NaN, an Inf, an outlier) changes another row's levels.
        _, s_x, bad = torch_ops.quantize_rows(x2, out=buf[:m])
        acc = torch_ops.int8_matmul(buf, self.q_weight_t)
        if buf.shape[0] != m:
            acc = acc[:m]
        y = torch_ops.rescale(acc, s_x, self.w_scale, bias=self.bias)
        if bad is not None:
            y[bad] = self._float_rows(x2[bad])
        return y

    def _engine(self, xf: torch.Tensor) -> torch.Tensor:
        """PyTorch's engine GEMM quantizes the whole batch with one (min, max): rows holding NaN or
        ±inf are kept out of it (computed in float), so they cannot change the other rows."""
        bad = torch_ops.non_finite_rows(xf)
        if bad is None:
            return self._engine_call(xf)
        y = torch.empty((xf.shape[0], self.out_features), dtype=torch.float32)
        good = ~bad
        if bool(good.any()):
            y[good] = self._engine_call(xf[good])
        y[bad] = self._float_rows(xf[bad])
        return y

    def _engine_call(self, xf: torch.Tensor) -> torch.Tensor:
        engine = gemm_backend.engine_for(self.backend, xf.shape[0], self._auto)
        packed = self._packed.get(engine)
        if packed is None:
            packed = self._packed[engine] = gemm_backend.prepack(self.q_weight, self.w_scale, self.bias, engine)
        return gemm_backend.linear_dynamic(xf, packed, engine)

    def _activation_buffer(self, m: int) -> torch.Tensor:
        """A reused int8 buffer for m rows of activations (fresh large allocations page-fault).
        _int_mm's CPU kernel wants more than 16 rows: a smaller batch gets zero rows appended,
        which change no other row of the product."""
        bufs = self.__dict__.setdefault("_buffers_by_rows", {})
        buf = bufs.get(m)
        if buf is None:
            rows = 17 if m <= 16 and torch_ops.int_mm_supported(17, self.in_features, self.out_features) else m
            if len(bufs) >= 8:
                bufs.clear()
            buf = bufs[m] = torch.zeros((rows, self.in_features), dtype=torch.int8)
        return buf

    def extra_repr(self) -> str:
        gran = "per-channel" if self._per_channel_w else "per-tensor"
        return (f"in={self.in_features}, out={self.out_features}, mode={self.mode}, {gran}, bits={self.bits}, "
                f"backend={self.backend}")


def _check_weight(w: torch.Tensor, label: str, when: str) -> None:
    """Refuse a weight holding NaN, ±inf or values beyond float32 (it would silently zero or blow up
    an output channel's scale)."""
    amax = torch_ops.absmax(w)  # NaN or inf when w holds one
    if not amax <= torch_ops.RANGE_MAX:
        bad = int((~torch.isfinite(w)).sum())
        if bad:
            raise TensorError(f"{label}: weight holds {bad} NaN or infinite value(s){when}; fix the model before "
                              "quantising it", field="weight")
        raise TensorError(f"{label}: weight holds values beyond float32's range{when} (max |w| = {amax:.4g})",
                          field="weight")


def model_weight_bytes(model: nn.Module) -> int:
    """Bytes of a model's Linear weights as stored: fp32, or packed levels plus scales."""
    total = 0
    for m in model.modules():
        if isinstance(m, Int8Linear):
            total += m.weight_bytes()
        elif isinstance(m, nn.Linear):
            total += m.weight.numel() * 4
    return total


def quantize_model(model: nn.Module, config: QuantConfig | None = None,
                   calibrate: Callable[[nn.Module], object] | None = None) -> list[str]:
    """Replace every `nn.Linear` of `model` in place (except `config.skip`); return their names.

    `calibrate(model)`, when given, runs the float model on calibration inputs first: max|x| per
    input feature of each Linear is recorded (luma.kernels.calibration) and, in dynamic mode with
    `smooth_alpha` > 0, used to smooth each layer before it is quantized.
    """
    config = config or QuantConfig()
    targets = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if type(child) is nn.Linear and not any(fnmatch.fnmatchcase(full, p) for p in config.skip):
                targets.append((module, child_name, child, full))
    amax: dict[str, torch.Tensor] = {}
    if calibrate is not None and config.mode == "dynamic" and config.smooth_alpha > 0:
        amax = _calibrate(model, [(full, child) for _, _, child, full in targets], calibrate)
    for module, child_name, child, full in targets:
        bits = config.layer_bits.get(full, config.bits)
        setattr(module, child_name, Int8Linear.from_float(child, config.mode, config.granularity, bits,
                                                          config.backend, amax.get(full), config.smooth_alpha,
                                                          name=full))
    return [full for *_, full in targets]


@torch.no_grad()
def _calibrate(model: nn.Module, layers, run: Callable[[nn.Module], object]) -> dict[str, torch.Tensor]:
    """max|x| per input feature of each layer over the calibration run (min-max calibration)."""
    cals = {name: Calibrator(method="minmax", axis=-1) for name, _ in layers}
    hooks = [layer.register_forward_pre_hook(lambda _m, args, name=name: cals[name].observe(
        args[0].detach().reshape(-1, args[0].shape[-1]).float().numpy())) for name, layer in layers]
    try:
        run(model)
    finally:
        for h in hooks:
            h.remove()
    return {name: torch.as_tensor(cal.clip(), dtype=torch.float32) for name, cal in cals.items()
            if cal.observed}
