"""An int8 replacement for `torch.nn.Linear`, and a quantizer that swaps it into a model.

Two modes:

* ``weight-only``: int8 weights (per channel or per tensor) and float activations, float32
  accumulation. Stores 4x less than fp32; the product runs on the weight-only path measured
  fastest for the shape here (fbgemm's fp16-weight GEMM on the exact integer levels, which keeps a
  2 B/value packed copy; `torch._weight_int8pack_mm`; or levels dequantized a tile at a time).
* ``dynamic``: int8 weights and activations quantized per call, an int8 GEMM, then one rescale
  pass. Which GEMM (`torch._int_mm` with LUMA's symmetric activations, or one of PyTorch's
  prepacked engine GEMMs) is measured per shape class on this machine unless forced: see
  `luma.kernels.gemm_backend` and `luma.kernels.gemm_tuning`.

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
from luma.kernels import gemm_backend, gemm_tuning, torch_ops
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
        #: "auto" (measured per shape class, see luma.kernels.gemm_tuning) or a forced dynamic path
        self.backend = gemm_backend.resolve(backend) if mode == "dynamic" else "-"
        self._auto = backend == "auto" or mode == "weight-only"
        self._packed: dict[str, object] = {}  # path -> its packed weight, made once on first use
        self._path_by_rows: dict[int, str] = {}  # batch rows -> the path auto chose for their class
        self.register_buffer("q_weight", q_weight.contiguous())  # (N, K)
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

    def path(self, rows: int) -> str:
        """The GEMM path a batch of `rows` rows runs on (see luma.kernels.gemm_backend)."""
        name = self._path_by_rows.get(rows)
        if name is None:
            name = (gemm_tuning.choose(self.mode, rows, self.in_features, self.out_features)
                    if self._auto else self.backend)
            if len(self._path_by_rows) >= 64:
                self._path_by_rows.clear()
            self._path_by_rows[rows] = name
        return name

    def weight_bytes(self) -> int:
        """Bytes the weight needs packed at `bits` per value, scales included (float32)."""
        return (self.q_weight.numel() * self.bits + 7) // 8 + self.w_scale.numel() * 4

    def dequantized_weight(self) -> torch.Tensor:
        s = self.w_scale[:, None] if self._per_channel_w else self.w_scale
        return self.q_weight.float() * s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_floating_point(x):
            raise TensorError(f"{self._label()}: input must be a floating-point tensor, got {x.dtype}", field="input")
        shape, dtype = x.shape, x.dtype
        if x.ndim == 0 or shape[-1] != self.in_features:
            raise TensorError(f"{self._label()}: input of shape {tuple(shape)} does not end in "
                              f"{self.in_features} features", field="input")
        # math.prod, not -1: a (2, 0, 0) batch has no inferable row count
        x2 = x if x.ndim == 2 else x.reshape(math.prod(shape[:-1]), self.in_features)
        # Buffers read from _buffers directly: nn.Module's __getattr__ costs ~0.3 us an access,
        # a few percent of a 1 x 1024 x 1024 product.
        buffers = self._buffers
        if buffers["inv_smooth"] is not None:
            x2 = x2 * buffers["inv_smooth"]
        m = x2.shape[0]
        if m == 0 or self.in_features == 0 or self.out_features == 0:
            y = self._float_rows(x2)  # nothing to quantise: the float product is exact (zeros + bias)
        else:
            y = self._run(x2, self._path_by_rows.get(m) or self.path(m), buffers["w_scale"], buffers["bias"])
        if y.dtype != dtype:
            y = y.to(dtype)
        return y if x.ndim == 2 else y.reshape(*shape[:-1], self.out_features)

    def _float_rows(self, x2: torch.Tensor) -> torch.Tensor:
        """The rows in float32 against the dequantized weight: fp32's semantics for NaN and ±inf."""
        y = x2.float() @ self.dequantized_weight().t()
        return y if self.bias is None else y.add_(self.bias)

    def _run(self, x2: torch.Tensor, name: str, w_scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        path = gemm_backend.PATHS[name]
        packed = self._packed.get(name)
        if packed is None:
            packed = self._packed[name] = path.pack(self.q_weight, w_scale, bias)
        if not (path.takes_any_float or (x2.dtype == torch.float32 and x2.is_contiguous())):
            x2 = x2.float().contiguous()
        if path.isolates_rows or self.mode == "weight-only":
            # int_mm quantises each row on its own and a float GEMM keeps rows apart by itself.
            return path.run(x2, packed, w_scale, bias, self._float_rows)
        # An engine quantises the whole batch with one (min, max): rows holding NaN or ±inf are
        # kept out of it (computed in float), so they cannot change the other rows. One sum over
        # x finds them when there are any.
        bad = torch_ops.non_finite_rows(x2)
        if bad is None:
            return path.run(x2, packed, w_scale, bias)
        y = torch.empty((x2.shape[0], self.out_features), dtype=torch.float32)
        good = ~bad
        if bool(good.any()):
            y[good] = path.run(x2[good], packed, w_scale, bias)
        y[bad] = self._float_rows(x2[bad])
        return y

    def _load_from_state_dict(self, *args, **kwargs):
        # New levels, scales or bias: the packed weights and batch choices made from the old ones
        # must go, or the layer would go on computing with the weight it had.
        super()._load_from_state_dict(*args, **kwargs)
        self._packed.clear()
        self._path_by_rows.clear()

    def _apply(self, fn, *args, **kwargs):
        # .to(), .float(), .cpu() ... replace the buffers: the packs made from them go as well.
        out = super()._apply(fn, *args, **kwargs)
        self._packed.clear()
        return out

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
