"""PyTorch fast paths of the int8 family, checked against `luma.kernels.reference`.

* Quantize, per tensor and per channel: blockwise over the input, so each step's float32
  temporary (2 MiB) stays in cache and memory sees one read of x and one write of q (plus one
  read for max|x| when the scale is not given): multiply by the float32 reciprocal scale, round
  half to even, clamp only when a calibrated scale can be exceeded, cast into a reused int8
  buffer. The reference divides in float64, so a value within a float32 rounding of a half-step
  tie can land one level away: the bound, tested, is |q - q_ref| <= 1 on a vanishing fraction
  of elements (5 per tensor and 1 per channel of 10^6 N(0,1) values here).
* int8 x int8 -> int32 matrix multiply: `torch._int_mm` where this build has it for the device
  and shape (CPU: M > 16, K and N multiples of 8), else an exact fallback (products summed in
  float64 in chunks small enough to stay exact, then cast back).
* Rescale: out = acc * (s_x * s_w) (+ bias) in one pass over the int32 accumulator.
"""

from __future__ import annotations

import math

import torch

from luma.errors import TensorError

QMAX = 127
#: Values per block: a 2 MiB float32 temporary, cache-resident (measured best of 2^16..2^21 here).
BLOCK = 1 << 19


def _check(x: torch.Tensor, name: str = "tensor") -> None:
    if not torch.is_floating_point(x):
        raise TensorError(f"{name} must be a floating-point tensor, got {x.dtype}", field=name)
    if not bool(torch.isfinite(x).all()):
        bad = int((~torch.isfinite(x)).sum())
        raise TensorError(f"{name} holds {bad} NaN or infinite value(s); quantisation needs finite input", field=name)


def absmax(x: torch.Tensor) -> float:
    """max|x| in one reduction pass (no |x| temporary)."""
    if x.numel() == 0:
        return 0.0
    lo, hi = torch.aminmax(x)
    return max(-float(lo), float(hi))


def scale_per_tensor(x: torch.Tensor) -> torch.Tensor:
    """max|x| / 127 as a float32 scalar tensor (1 for an all-zero tensor)."""
    amax = torch.tensor(absmax(x.detach()), dtype=torch.float32)
    return torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))


def scale_per_channel(x: torch.Tensor, axis: int = 0) -> torch.Tensor:
    """One scale per index along `axis` (float32, 1-d)."""
    axis = axis % x.ndim
    dims = [d for d in range(x.ndim) if d != axis]
    amax = x.detach().abs().amax(dim=dims).to(torch.float32) if dims else x.detach().abs().to(torch.float32)
    return torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))


def quantize_into(x: torch.Tensor, inv_scale: torch.Tensor | float, out: torch.Tensor, saturate: bool,
                  tmp: torch.Tensor | None = None) -> torch.Tensor:
    """out = round(x * inv_scale) as int8, block by block along the first dimension.

    `inv_scale`: a float (per tensor) or a tensor broadcasting against x's rows (per channel
    along dimension 0, shape (rows, 1, ...)). `saturate` clamps to ±127 (needed when the scale
    was calibrated, not taken from this x).
    """
    rows = x.shape[0] if x.ndim else 1
    x2 = x.reshape(rows, -1)
    o2 = out.view(rows, -1)
    per_row = max(1, BLOCK // max(x2.shape[1], 1))
    if tmp is None or tmp.numel() < per_row * x2.shape[1]:
        tmp = torch.empty(per_row * x2.shape[1], dtype=torch.float32)
    inv = inv_scale.reshape(rows, 1) if isinstance(inv_scale, torch.Tensor) and inv_scale.numel() > 1 else inv_scale
    for r in range(0, rows, per_row):
        xb = x2[r : r + per_row]
        tb = tmp[: xb.numel()].view(xb.shape)
        torch.mul(xb, inv[r : r + per_row] if isinstance(inv, torch.Tensor) and inv.ndim else inv, out=tb)
        tb.round_()
        if saturate:
            tb.clamp_(-QMAX, QMAX)
        o2[r : r + per_row].copy_(tb)
    return out


def quantize_per_tensor(x: torch.Tensor, scale: torch.Tensor | None = None, check: bool = True,
                        out: torch.Tensor | None = None):
    """(int8 levels, float32 scale). With a given (calibrated) scale, values beyond it saturate."""
    if check:
        _check(x)
    x = x.detach().float().contiguous()
    s = scale_per_tensor(x) if scale is None else scale.to(torch.float32)
    if out is None:
        out = torch.empty(x.shape, dtype=torch.int8)
    inv = float(torch.reciprocal(s))  # float32 reciprocal, as the ATen quantize kernels use
    if not math.isfinite(inv):
        return _quantize_f64(x, s.double(), out), s
    return quantize_into(x, inv, out, saturate=scale is not None), s


def quantize_per_channel(x: torch.Tensor, axis: int = 0, scale: torch.Tensor | None = None, check: bool = True):
    """(int8 levels, float32 scales along `axis`)."""
    if check:
        _check(x)
    axis = axis % x.ndim
    x = x.detach().float()
    s = scale_per_channel(x, axis) if scale is None else scale.to(torch.float32)
    front = x.movedim(axis, 0).contiguous()
    q = torch.empty(front.shape, dtype=torch.int8)
    inv = torch.reciprocal(s)
    if not bool(torch.isfinite(inv).all()):
        _quantize_f64(front, s.double().reshape([-1] + [1] * (front.ndim - 1)), q)
    else:
        quantize_into(front, inv, q, saturate=scale is not None)
    return q.movedim(0, axis).contiguous(), s


def _quantize_f64(x: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """The slow exact path for scales below float32's normal range (max|x| < ~1.5e-36), where
    the float32 reciprocal overflows: divide in float64, as the reference does."""
    out.copy_(torch.clamp(torch.round(x.double() / scale), -QMAX, QMAX))
    return out


def dequantize(q: torch.Tensor, scale: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """float32 x̂ = s · q (per tensor, or per channel along `axis`)."""
    if axis is None:
        return q.float() * scale
    shape = [1] * q.ndim
    shape[axis % q.ndim] = -1
    return q.float() * scale.reshape(shape)


def int_mm_supported(m: int, k: int, n: int, device: str = "cpu") -> bool:
    """Whether `torch._int_mm` takes this shape here (its CPU kernel wants M > 16 and K, N % 8)."""
    if not hasattr(torch, "_int_mm"):
        return False
    if device == "cpu":
        return m > 16 and k % 8 == 0 and n % 8 == 0
    return m > 16 and k % 8 == 0 and n % 8 == 0 and k >= 16


#: Rows of K summed per float64 chunk: |q| <= 127, so each chunk's partial sums stay below 2^53.
_EXACT_K = (2**53) // (127 * 127)


def int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """int32 = int8 (M, K) @ int8 (K, N), exact."""
    if a.dtype != torch.int8 or b.dtype != torch.int8:
        raise TensorError(f"int8_matmul needs int8 operands, got {a.dtype} and {b.dtype}", field="dtype")
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise TensorError(f"inner dimensions differ: {k} vs {k2}", field="shape")
    if int_mm_supported(m, k, n, a.device.type):
        return torch._int_mm(a, b)
    acc = torch.zeros((m, n), dtype=torch.float64, device=a.device)
    for start in range(0, k, _EXACT_K):
        acc += a[:, start : start + _EXACT_K].double() @ b[start : start + _EXACT_K].double()
    return acc.to(torch.int32)


def rescale(acc: torch.Tensor, x_scale: torch.Tensor, w_scale: torch.Tensor, out: torch.Tensor | None = None,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """float32 (M, N) = acc · s_x[:, None] · s_w[None, :] (+ bias), written into `out`."""
    row = x_scale.reshape(-1, 1) if x_scale.ndim else x_scale
    col = w_scale.reshape(1, -1) if w_scale.ndim else w_scale
    if out is None:
        out = torch.empty(acc.shape, dtype=torch.float32, device=acc.device)
    torch.mul(acc, row, out=out)
    out.mul_(col)
    if bias is not None:
        out.add_(bias)
    return out
