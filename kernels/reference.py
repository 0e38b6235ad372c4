"""The numerical oracle of the int8 family: symmetric quantisation in NumPy, in float64.

    s = max|x| / qmax,   q = clip(round(x / s), -qmax, qmax),   x̂ = s · q,   qmax = 2^(bits-1) - 1

per tensor (one scale) or per channel (one scale per index along `axis`), for 2 to 8 bits.
`round` is round-half-to-even (NumPy's `rint`, like `torch.round`), so the fast paths can match
the integers exactly. A clip value (from calibration) replaces max|x|; values beyond it saturate.

Scales are stored as float32 (`SCALE_BYTES`), so they are kept inside float32's normal range:

    s = max(max|x| / qmax, SCALE_MIN),   SCALE_MIN = 2^-126 (float32's smallest normal, ~1.2e-38)

An all-zero tensor (or channel) gets SCALE_MIN: q = 0 and x̂ = 0 exactly, with no division by
zero. A tensor smaller than qmax · SCALE_MIN (~1.5e-36 at 8 bits) is quantised on that floor step
(fewer than qmax levels, absolute error at most 2^-127), never on a scale float32 cannot hold. A
zero clip is no exception: every non-zero value saturates to ±qmax · SCALE_MIN (~0). A max|x| or
clip beyond float32's largest value (~3.4e38) is refused: the scale and x̂ would not fit.

Everything else in `luma.kernels` is checked against this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from luma.errors import TensorError

MIN_BITS, MAX_BITS = 2, 8
#: Bytes per stored scale (float32, as the fast paths keep them).
SCALE_BYTES = 4
#: Smallest scale: float32's smallest normal number (2^-126), so every scale is a normal float32.
SCALE_MIN = float(np.finfo(np.float32).tiny)
#: Largest max|x| or clip: float32's largest finite value (x̂ and the scale must fit in float32).
RANGE_MAX = float(np.finfo(np.float32).max)


def qmax(bits: int) -> int:
    """Largest integer level: 127 for 8 bits, 1 for 2 bits (the range is symmetric)."""
    check_bits(bits)
    return 2 ** (bits - 1) - 1


def check_bits(bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not MIN_BITS <= bits <= MAX_BITS:
        raise TensorError(f"bits must be a whole number from {MIN_BITS} to {MAX_BITS}, got {bits!r}", field="bits")


def check_finite(x: np.ndarray, name: str = "tensor") -> np.ndarray:
    """`x` as a float64 array; NaN or Inf anywhere is refused (a scale computed from it would be
    meaningless, and one NaN would silently poison a whole channel)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise TensorError(f"{name} must be numeric, got dtype {arr.dtype}", field=name)
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise TensorError(f"{name} holds {bad} NaN or infinite value(s); quantisation needs finite input", field=name)
    return arr


def normalise_axis(axis: int | None, ndim: int) -> int | None:
    if axis is None:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise TensorError(f"axis {axis!r} is out of range for a {ndim}-d tensor", field="axis")
    return int(axis) % ndim


def absmax(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    """max|x| over the whole tensor, or per index along `axis` (kept as a broadcastable shape)."""
    if axis is None:
        return np.asarray(np.abs(x).max(initial=0.0))
    others = tuple(i for i in range(x.ndim) if i != axis)
    return np.abs(x).max(axis=others, keepdims=True, initial=0.0)


def scales_for(amax: np.ndarray, bits: int, field: str = "clip") -> np.ndarray:
    """s = max(amax / qmax, SCALE_MIN): amax 0 (nothing to represent but zero) gets the floor."""
    amax = np.asarray(amax, dtype=np.float64)
    if (amax < 0).any() or not np.isfinite(amax).all():
        raise TensorError("clip values must be finite and non-negative", field=field)
    if (amax > RANGE_MAX).any():
        what = "max|x|" if field == "tensor" else "clip"
        raise TensorError(f"{what} = {float(amax.max()):.4g} is beyond float32's range ({RANGE_MAX:.4g}); "
                          "int8 scales and dequantised values are float32", field=field)
    return np.maximum(amax / qmax(bits), SCALE_MIN)


@dataclass(frozen=True)
class Quantized:
    """Integer levels and their scales. `scale` broadcasts against `q` (shape () per tensor)."""

    q: np.ndarray
    scale: np.ndarray
    bits: int
    axis: int | None

    def dequantize(self) -> np.ndarray:
        return self.q.astype(np.float64) * self.scale

    def storage_bytes(self) -> int:
        """Bytes to store it: the levels packed at `bits` per value, plus float32 scales."""
        return math.ceil(self.q.size * self.bits / 8) + self.scale.size * SCALE_BYTES


def quantize(x, bits: int = 8, axis: int | None = None, clip=None) -> Quantized:
    """Symmetric quantisation of `x`; `clip` (scalar, or one value per channel) replaces max|x|."""
    check_bits(bits)
    arr = check_finite(x)
    ax = normalise_axis(axis, arr.ndim)
    if clip is None:
        amax, field = absmax(arr, ax), "tensor"
    else:
        field = "clip"
        amax = np.asarray(clip, dtype=np.float64)
        if ax is not None and amax.ndim == 1:
            shape = [1] * arr.ndim
            shape[ax] = -1
            amax = amax.reshape(shape)
    scale = scales_for(amax, bits, field)
    m = qmax(bits)
    q = np.clip(np.rint(arr / scale), -m, m).astype(np.int8)
    return Quantized(q, np.asarray(scale), bits, ax)


def fake_quantize(x, bits: int = 8, axis: int | None = None, clip=None) -> np.ndarray:
    """x̂: quantise and dequantise in one step."""
    return quantize(x, bits, axis, clip).dequantize()


@dataclass(frozen=True)
class ErrorMetrics:
    """How far x̂ is from x. `sqnr_db` is +inf when the reconstruction is exact."""

    mae: float
    max_error: float
    rmse: float
    sqnr_db: float

    def as_dict(self) -> dict[str, float | None]:
        """JSON-safe: an infinite SQNR becomes None."""
        return {k: (v if math.isfinite(v) else None) for k, v in self.__dict__.items()}


def error_metrics(x, x_hat) -> ErrorMetrics:
    """MAE, max error, RMSE and SQNR (10·log10(Σx² / Σ(x - x̂)²)) in float64."""
    a = check_finite(x, "x")
    b = check_finite(x_hat, "x_hat")
    if a.shape != b.shape:
        raise TensorError(f"shapes differ: {a.shape} vs {b.shape}", field="x_hat")
    err = a - b
    noise = float(np.square(err).sum())
    signal = float(np.square(a).sum())
    n = max(a.size, 1)
    if noise == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise)
    return ErrorMetrics(
        mae=float(np.abs(err).sum() / n),
        max_error=float(np.abs(err).max(initial=0.0)),
        rmse=math.sqrt(noise / n),
        sqnr_db=sqnr,
    )
