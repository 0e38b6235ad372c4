"""PyTorch fast paths of the int8 family, checked against `luma.kernels.reference`.

* Scales: the reference's rule, s = max(max|x| / qmax, 2^-126), computed in float64 from max|x|
  and returned as float32 (the floor keeps every scale a normal float32, so none underflows).
  max|x| beyond float32's range (a float64 input) is refused, as in the reference.
* Quantize, per tensor, per channel and per row (activations): blockwise over the input, so each
  step's temporary (2-4 MiB) stays in cache and memory sees one read of x and one write of q
  (plus one read for max|x| when the scale is not given, which also finds any NaN or Inf).
  - float32 input: multiply by the float32 reciprocal scale, round half to even, clamp only when
    a calibrated scale can be exceeded, cast into a reused int8 buffer. Per tensor that is one
    fused pass of LUMA's native kernel (`luma.kernels.native`, built for this CPU on first use)
    where it builds; else, without an `out` buffer at 8 bits, ATen's fused `quantize_per_tensor`
    (given the float32 scale whose reciprocal is LUMA's multiplier, read back as int8 without a
    copy; -128 saturated to -127) where a start-up check finds it bit-identical; else the
    blockwise torch pass. All three give the same integers. The reference divides in float64,
    so a value within a float32 rounding of a half-step tie can land one level away:
    |q - q_ref| <= 1 on ~2 of 10^6 N(0,1) values (measured, see docs/kernels.md).
  - float16, bfloat16 and float64 input: the same pass in float64, dividing as the reference
    does, so the integers are the reference's exactly. Short mantissas make exact half-step ties
    common (the float32 path put 5-67 per 10^6 fp16 values and ~200 per 10^6 bf16 values one
    level off), so these dtypes pay for float64 division instead (~2.5x the float32 time).
  - Empty tensors (any dimension 0) give empty levels; 0-d tensors quantise per tensor.
* int8 x int8 -> int32 matrix multiply: `torch._int_mm` where this build has it for the device
  and shape (CPU: M > 16, K and N multiples of 8), else exact in float64. An inner dimension long
  enough for the int32 sums to overflow is refused.
* Rescale: out = acc * s_x (per row or per tensor) * s_w (+ bias).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np
import torch

from luma.errors import TensorError
from luma.kernels import native
from luma.kernels.reference import RANGE_MAX, SCALE_MIN, normalise_axis, qmax

QMAX = 127
#: Values per block: a 2 MiB float32 temporary, cache-resident (measured best of 2^16..2^21 here).
BLOCK = 1 << 19
#: From this many values a float32 per-tensor quantize runs as ATen's one fused pass (below it the
#: few microseconds of setting it up are not repaid).
ATEN_MIN_VALUES = 1 << 12
#: Longest inner dimension whose int32 sums cannot overflow for LUMA's levels (|q| <= 127):
#: 127 * 127 * K <= 2^31 - 1.
MAX_K = (2**31 - 1) // (QMAX * QMAX)
#: The same for any int8 operands (-128 included): 128 * 128 * K <= 2^31 - 1.
MAX_K_ANY_INT8 = (2**31 - 1) // (128 * 128)


def _check(x: torch.Tensor, name: str = "tensor") -> None:
    if not torch.is_floating_point(x):
        raise TensorError(f"{name} must be a floating-point tensor, got {x.dtype}", field=name)
    if not bool(torch.isfinite(x).all()):
        _refuse_non_finite(x, name)


def _refuse_non_finite(x: torch.Tensor, name: str):
    bad = int((~torch.isfinite(x)).sum())
    raise TensorError(f"{name} holds {bad} NaN or infinite value(s); quantisation needs finite input", field=name)


def absmax(x: torch.Tensor) -> float:
    """max|x| in one reduction pass (no |x| temporary); NaN if x holds a NaN."""
    if x.numel() == 0:
        return 0.0
    lo, hi = torch.aminmax(x)
    return float(torch.maximum(-lo, hi))


def row_absmax(x2: torch.Tensor) -> torch.Tensor:
    """max|x| of each row of a 2-d tensor (NaN for a row holding a NaN, inf for one holding ±inf)."""
    rows, cols = x2.shape
    out = torch.zeros(rows, dtype=x2.dtype, device=x2.device)
    if cols == 0:
        return out
    # amax and amin separately (aminmax(dim=1) does not vectorise along rows: measured 25x slower
    # here at 256 x 4096), block by block so that the second pass reads from cache.
    per_block = max(1, BLOCK // cols)
    for r in range(0, rows, per_block):
        xb = x2[r : r + per_block]
        torch.maximum(xb.amax(dim=1), xb.amin(dim=1).neg_(), out=out[r : r + per_block])
    return out


def scales_from_absmax(amax: torch.Tensor, bits: int = 8, x: torch.Tensor | None = None,
                       name: str = "tensor") -> torch.Tensor:
    """float64 scales max(amax / qmax, SCALE_MIN), the reference's rule. A NaN or infinite amax
    (so a NaN or Inf in `x`) and one beyond float32's range are refused."""
    amax = amax.double()
    if not bool((amax <= RANGE_MAX).all()):  # False for NaN too
        if not bool(torch.isfinite(amax).all()):
            if x is not None:
                _refuse_non_finite(x, name)  # names the count
            raise TensorError(f"{name} holds NaN or infinite value(s); quantisation needs finite input", field=name)
        raise TensorError(f"max|x| = {float(amax.max()):.4g} is beyond float32's range ({RANGE_MAX:.4g}); int8 "
                          "scales and dequantised values are float32", field=name)
    return torch.clamp(amax / qmax(bits), min=SCALE_MIN)


def _given_scale(scale, bits: int) -> torch.Tensor:
    """A calibrated scale as float64, floored like the reference's (a zero clip saturates)."""
    s = torch.as_tensor(scale).detach().double()
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()):
        raise TensorError("scales must be finite and non-negative", field="scale")
    if bool((s * qmax(bits) > RANGE_MAX).any()):
        raise TensorError(f"a scale covering more than float32's range ({RANGE_MAX:.4g}) was given", field="scale")
    return torch.clamp(s, min=SCALE_MIN)


def scale_per_tensor(x: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """max(max|x| / qmax, 2^-126) as a float32 scalar tensor."""
    return scales_from_absmax(torch.tensor(absmax(x.detach()), dtype=torch.float64), bits, x).float()


def scale_per_channel(x: torch.Tensor, axis: int = 0, bits: int = 8) -> torch.Tensor:
    """One scale per index along `axis` (float32, 1-d)."""
    front = _front(x.detach(), normalise_axis(axis, x.ndim))
    return scales_from_absmax(row_absmax(front), bits, x).float()


def _front(x: torch.Tensor, axis: int) -> torch.Tensor:
    """x as (channels, everything else), channels along `axis`."""
    front = x.movedim(axis, 0)
    return front.reshape(front.shape[0], math.prod(front.shape[1:]))


def quantize_into(x: torch.Tensor, scale: torch.Tensor | float, out: torch.Tensor, saturate: bool,
                  tmp: torch.Tensor | None = None, bits: int = 8, exact: bool | None = None) -> torch.Tensor:
    """out = round(x / scale) as int8, block by block along the first dimension.

    `scale`: a float (per tensor) or a 1-d float64 tensor with one value per row of x (per
    channel along dimension 0). float32 x multiplies by the float32 reciprocal; any other dtype,
    or `exact=True`, divides in float64 block by block (the reference's arithmetic, no float64
    copy of x). `saturate` clamps to ±qmax (needed when the scale was calibrated, not taken from
    this x).
    """
    if x.numel() == 0:
        return out
    m = qmax(bits)
    fast = x.dtype == torch.float32 if exact is None else not exact
    rows = x.shape[0] if x.ndim else 1
    if isinstance(scale, torch.Tensor):
        step = scale.reshape(rows, 1).double()
        step = step.reciprocal().float() if fast else step
    else:
        step = float(scale)
        step = float(torch.tensor(1.0 / step, dtype=torch.float32)) if fast else step
        # One fused pass where LUMA's native kernel builds here: the same integers (float32
        # reciprocal multiply, round half to even, clamp; the clamp changes nothing unsaturated,
        # where |x / scale| <= qmax already).
        if fast and x.dtype == torch.float32 and native.quantize_f32(x, out, step, float(m)):
            return out
    x2 = x.reshape(rows, x.numel() // rows)
    o2 = out.view(rows, -1)
    tmp_dtype = torch.float32 if fast else torch.float64
    per_row = max(1, BLOCK // max(x2.shape[1], 1))
    if tmp is None or tmp.numel() < per_row * x2.shape[1] or tmp.dtype != tmp_dtype:
        tmp = torch.empty(per_row * x2.shape[1], dtype=tmp_dtype)
    # float16 -> float64 has no vectorised conversion here (measured 3x slower than through float32)
    via32 = torch.empty(per_row * x2.shape[1], dtype=torch.float32) if x.dtype == torch.float16 else None
    for r in range(0, rows, per_row):
        xb = x2[r : r + per_row]
        tb = tmp[: xb.numel()].view(xb.shape)
        sb = step[r : r + per_row] if isinstance(step, torch.Tensor) else step
        if fast:
            torch.mul(xb, sb, out=tb)
        elif xb.dtype == torch.float64:
            torch.div(xb, sb, out=tb)
        else:  # widen first: dividing a float16 block by a float would round in float16
            tb.copy_(xb if via32 is None else via32[: xb.numel()].view(xb.shape).copy_(xb))
            tb.div_(sb)
        tb.round_()
        if saturate:
            tb.clamp_(-m, m)
        o2[r : r + per_row].copy_(tb)
    return out


def quantize_per_tensor(x: torch.Tensor, scale: torch.Tensor | None = None, check: bool = True,
                        out: torch.Tensor | None = None, bits: int = 8, exact: bool | None = None):
    """(int8 levels, float32 scale). With a given (calibrated) scale, values beyond it saturate.

    `check=False` skips the finiteness pass when a scale is given (the caller vouches for x);
    without a scale, max|x| finds any NaN or Inf for free and they are always refused.
    `exact=True` takes the float64 path (the reference's integers) whatever x's dtype."""
    if not torch.is_floating_point(x):
        raise TensorError(f"tensor must be a floating-point tensor, got {x.dtype}", field="tensor")
    x = x.detach().contiguous()
    if scale is None:
        amax = torch.tensor(absmax(x), dtype=torch.float64)
        s, saturate = scales_from_absmax(amax, bits, x), False  # |x| / s <= qmax: nothing to clamp
    else:
        if check:
            _check(x)
        s, saturate = _given_scale(scale, bits), True
    fast = x.dtype == torch.float32 if exact is None else not exact
    if out is None and fast and bits == 8 and x.numel() >= ATEN_MIN_VALUES and native.library() is None \
            and _aten_quantize_agrees():
        out = _aten_quantize(x, float(s), saturate)
        if out is not None:
            return out, s.float()
    if out is None:
        out = torch.empty(x.shape, dtype=torch.int8)
    quantize_into(x, float(s), out, saturate=saturate, bits=bits, exact=exact)
    return out, s.float()


def _aten_scale(scale: float) -> float | None:
    """A float32 scale S whose float32 reciprocal 1.0f / S is LUMA's multiplier fl32(1 / scale)
    (ATen multiplies by 1.0f / S), or None when no float32 next to it has that reciprocal."""
    inv = np.float32(1.0 / scale)
    if not np.isfinite(inv) or inv == 0:
        return None
    guess = np.float32(1) / inv
    for cand in (guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(0))):
        if np.isfinite(cand) and cand > 0 and np.float32(1) / cand == inv:
            return float(cand)
    return None


def _aten_quantize(x: torch.Tensor, scale: float, saturate: bool) -> torch.Tensor | None:
    """One fused pass (ATen's `quantize_per_tensor`: multiply by the float32 reciprocal, round half
    to even, clamp to int8) into a fresh tensor, returned as plain int8 sharing its storage (no
    copy). ATen's qint8 reaches -128, which only a given scale can hit: saturate it to -127."""
    s32 = _aten_scale(scale)
    if s32 is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated; this one lives for a line
        q = torch.quantize_per_tensor(x, s32, 0, torch.qint8)
    levels = torch.empty(0, dtype=torch.int8).set_(q.untyped_storage(), q.storage_offset(), q.shape, q.stride())
    return levels.clamp_(min=-QMAX) if saturate else levels


@lru_cache(maxsize=1)
def _aten_quantize_agrees() -> bool:
    """Whether ATen's quantize gives LUMA's float32 integers bit for bit on this build (checked
    once on exact half-step ties, near-ties and saturating values), so it may replace the
    blockwise pass; a build that rounds otherwise keeps the blockwise pass."""
    scale = 0.0123
    inv = float(np.float32(1.0 / scale))
    steps = torch.arange(-130, 131, dtype=torch.float32)
    ties = torch.cat([steps, steps + 0.5, steps - 0.5]) / inv
    x = torch.cat([ties, ties.nextafter(torch.tensor(np.inf)), ties.nextafter(torch.tensor(-np.inf)),
                   torch.randn(4096, generator=torch.Generator().manual_seed(0))])
    mine = quantize_into(x, scale, torch.empty(x.shape, dtype=torch.int8), saturate=True)
    theirs = _aten_quantize(x, scale, saturate=True)
    return theirs is not None and torch.equal(mine, theirs)


def quantize_per_channel(x: torch.Tensor, axis: int = 0, scale: torch.Tensor | None = None, check: bool = True,
                         bits: int = 8, exact: bool | None = None):
    """(int8 levels, float32 scales along `axis`); `exact` as in `quantize_per_tensor`."""
    if not torch.is_floating_point(x):
        raise TensorError(f"tensor must be a floating-point tensor, got {x.dtype}", field="tensor")
    axis = normalise_axis(axis, x.ndim)
    x = x.detach()
    front = _front(x, axis).contiguous()
    if scale is None:
        s, saturate = scales_from_absmax(row_absmax(front), bits, x), False
    else:
        if check:
            _check(x)
        s, saturate = _given_scale(scale, bits).reshape(-1), True
        if s.numel() != front.shape[0]:
            raise TensorError(f"{s.numel()} scales given for {front.shape[0]} channels", field="scale")
    q = torch.empty(front.shape, dtype=torch.int8)
    quantize_into(front, s, q, saturate=saturate, bits=bits, exact=exact)
    moved = list(x.movedim(axis, 0).shape)
    return q.reshape(moved).movedim(0, axis).contiguous(), s.float()


def non_finite_rows(x2: torch.Tensor, amax: torch.Tensor | None = None) -> torch.Tensor | None:
    """Mask of the rows of a 2-d tensor holding NaN, ±inf or values beyond float32's range, or
    None when there is none. Without `amax`, one sum over x answers the common all-finite case
    (a NaN or inf anywhere makes it non-finite; an overflowing finite sum only costs a closer look)."""
    if amax is None:
        if math.isfinite(float(x2.sum())) and x2.dtype != torch.float64:
            return None
        amax = row_absmax(x2)
    bad = ~(amax <= RANGE_MAX)
    return bad if bool(bad.any()) else None


def quantize_rows(x2: torch.Tensor, out: torch.Tensor | None = None):
    """Activations (M, K) quantised with one scale per row, so no row's values (a NaN, an Inf or
    an outlier) change another row's levels: (int8 levels, float32 scales (M,), bad), where
    `bad` masks the rows holding NaN, ±inf or values beyond float32 (their levels are 0; the
    caller computes them another way) and is None when every row is finite."""
    amax = row_absmax(x2)
    bad = non_finite_rows(x2, amax)
    if bad is not None:
        x2 = x2.masked_fill(bad[:, None], 0)
        amax = amax.masked_fill(bad, 0)
    # The reference's rule, inline (amax is known finite and in range here; this runs per call).
    s = amax.double().div_(QMAX).clamp_(min=SCALE_MIN)
    if out is None:
        out = torch.empty(x2.shape, dtype=torch.int8)
    quantize_into(x2.contiguous(), s, out, saturate=False)
    return out, s.float(), bad


def dequantize(q: torch.Tensor, scale: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """float32 x̂ = s · q (per tensor, or per channel along `axis`)."""
    if axis is None:
        return q.float() * scale
    shape = [1] * q.ndim
    shape[axis % q.ndim] = -1
    return q.float() * scale.reshape(shape)


def int_mm_supported(m: int, k: int, n: int, device: str = "cpu") -> bool:
    """Whether `torch._int_mm` takes this shape here (its CPU kernel wants M > 16 and K, N % 8)."""
    if not hasattr(torch, "_int_mm") or k == 0 or n == 0:
        return False
    if device == "cpu":
        return m > 16 and k % 8 == 0 and n % 8 == 0
    return m > 16 and k % 8 == 0 and n % 8 == 0 and k >= 16


def check_inner_dimension(k: int, a: torch.Tensor | None = None, b: torch.Tensor | None = None) -> None:
    """Refuse an inner dimension K whose int32 sums can overflow: past MAX_K for LUMA's levels,
    past MAX_K_ANY_INT8 when an operand holds -128."""
    limit = MAX_K
    if k > MAX_K_ANY_INT8 and any(t is not None and bool((t == -128).any()) for t in (a, b)):
        limit = MAX_K_ANY_INT8
    if k > limit:
        raise TensorError(f"inner dimension K = {k:,} is too long for an exact int8 product: int32 sums can "
                          f"overflow beyond K = {limit:,} ({127 if limit == MAX_K else 128}² per term); split K "
                          "and add the partial products in int64", field="shape")


def int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """int32 = int8 (M, K) @ int8 (K, N), exact (a K that could overflow int32 is refused)."""
    if a.dtype != torch.int8 or b.dtype != torch.int8:
        raise TensorError(f"int8_matmul needs int8 operands, got {a.dtype} and {b.dtype}", field="dtype")
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise TensorError(f"inner dimensions differ: {k} vs {k2}", field="shape")
    check_inner_dimension(k, a, b)
    if int_mm_supported(m, k, n, a.device.type):
        return torch._int_mm(a, b)
    # Exact in float64: every partial sum is an integer of magnitude < 2^31 < 2^53.
    return (a.double() @ b.double()).to(torch.int32)


def rescale(acc: torch.Tensor, x_scale: torch.Tensor, w_scale: torch.Tensor, out: torch.Tensor | None = None,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """float32 (M, N) = acc · s_x[:, None] · s_w[None, :] (+ bias), written into `out`."""
    row = x_scale.reshape(-1, 1) if x_scale.ndim else x_scale
    col = w_scale.reshape(1, -1) if w_scale.ndim else w_scale
    # Cast first, then scale in place: int32 x float32 in one op takes a slow mixed-dtype path
    # (measured ~2x slower here at 256 x 4096).
    if out is None:
        out = acc.to(torch.float32)
    else:
        out.copy_(acc)
    out.mul_(row)
    if bias is not None:
        return torch.addcmul(bias, out, col, out=out)
    return out.mul_(col)
