"""int8 KV-cache storage for attention: keys and values kept as int8 with one float32 scale per
(sequence, head, token) vector, so the cache's memory grows at ~1/4 of fp32 (plus 4 bytes per
vector for the scale) as context and concurrency grow.

A fixed token capacity is allocated up front (the block budget a serving engine would give it);
appending past it is an error the PEX runner records as a capacity FAIL, never a silent resize.
"""

from __future__ import annotations

import math

import torch

from luma.errors import TensorError
from luma.kernels.reference import RANGE_MAX, SCALE_MIN

QMAX = 127


def _quantize_vectors(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per last-dimension vector: (levels, float32 scales with a trailing 1), the
    reference's scale rule max(max|x| / 127, 2^-126), so tiny vectors never get a zero scale."""
    amax = x.abs().amax(dim=-1, keepdim=True).double()
    if not bool((amax <= RANGE_MAX).all()):
        raise TensorError(f"keys or values hold magnitudes beyond float32's range ({RANGE_MAX:.4g})", field="kv")
    scale = (amax / QMAX).clamp(min=SCALE_MIN).float()  # a normal float32: x / scale never divides by 0
    return torch.clamp(torch.round(x.float() / scale), -QMAX, QMAX).to(torch.int8), scale


class Int8KVCache:
    """Keys and values of one attention layer, (batch, heads, tokens, head_dim), stored int8."""

    def __init__(self, batch: int, heads: int, head_dim: int, capacity: int):
        if min(batch, heads, head_dim, capacity) < 1:
            raise TensorError("batch, heads, head_dim and capacity must all be at least 1", field="capacity")
        shape = (batch, heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=torch.int8)
        self.v = torch.zeros(shape, dtype=torch.int8)
        self.k_scale = torch.ones((batch, heads, capacity, 1))
        self.v_scale = torch.ones((batch, heads, capacity, 1))
        self.capacity, self.length = capacity, 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """Add `t` new tokens' keys and values, each (batch, heads, t, head_dim)."""
        if k.shape != v.shape or k.shape[:2] != self.k.shape[:2] or k.shape[3] != self.k.shape[3]:
            raise TensorError(f"keys {tuple(k.shape)} and values {tuple(v.shape)} do not fit the cache "
                              f"{tuple(self.k.shape)}", field="shape")
        if not (torch.isfinite(k).all() and torch.isfinite(v).all()):
            raise TensorError("keys or values hold NaN or infinite values", field="kv")
        t = k.shape[2]
        if self.length + t > self.capacity:
            raise TensorError(f"KV cache full: {self.length} + {t} tokens exceed the capacity of {self.capacity}",
                              field="capacity")
        end = self.length + t
        self.k[:, :, self.length:end], self.k_scale[:, :, self.length:end] = _quantize_vectors(k)
        self.v[:, :, self.length:end], self.v_scale[:, :, self.length:end] = _quantize_vectors(v)
        self.length = end

    def keys(self) -> torch.Tensor:
        return self.k[:, :, : self.length].float() * self.k_scale[:, :, : self.length]

    def values(self) -> torch.Tensor:
        return self.v[:, :, : self.length].float() * self.v_scale[:, :, : self.length]

    def attention(self, q: torch.Tensor) -> torch.Tensor:
        """softmax(q Kᵀ / √d) V over the cached tokens; q is (batch, heads, t_q, head_dim)."""
        scores = (q.float() @ self.keys().transpose(-1, -2)) / math.sqrt(self.k.shape[-1])
        return torch.softmax(scores, dim=-1) @ self.values()

    def nbytes(self) -> int:
        """Bytes the cached tokens occupy: int8 levels plus a float32 scale per vector."""
        b, h, _, d = self.k.shape
        return 2 * b * h * self.length * (d + 4)

    @staticmethod
    def fp32_nbytes(batch: int, heads: int, head_dim: int, tokens: int) -> int:
        return 2 * batch * heads * tokens * head_dim * 4
