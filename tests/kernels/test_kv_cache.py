"""int8 KV cache: attention close to fp32, ~1/4 of the memory, a hard capacity."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from luma.errors import TensorError  # noqa: E402
from luma.kernels.kv_cache import Int8KVCache  # noqa: E402


def _fp32_attention(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(k.shape[-1]), dim=-1) @ v


def test_attention_over_an_int8_cache_matches_fp32():
    torch.manual_seed(0)
    b, h, d = 2, 4, 64
    cache = Int8KVCache(b, h, d, capacity=256)
    ks, vs = [], []
    for t in (100, 1, 1, 50):  # a prefill, two decode steps, a chunk
        k, v = torch.randn(b, h, t, d), torch.randn(b, h, t, d)
        cache.append(k, v)
        ks.append(k)
        vs.append(v)
    q = torch.randn(b, h, 3, d)
    exact = _fp32_attention(q, torch.cat(ks, 2), torch.cat(vs, 2))
    got = cache.attention(q)
    rel = float((got - exact).norm() / exact.norm())
    assert rel < 1e-2
    # Each stored element is within half a step of its vector's scale.
    err = (cache.keys() - torch.cat(ks, 2)).abs()
    assert bool((err <= cache.k_scale[:, :, :152] * 0.5 + 1e-6).all())


def test_memory_is_about_a_quarter_of_fp32():
    cache = Int8KVCache(1, 8, 128, capacity=1024)
    cache.append(torch.randn(1, 8, 1000, 128), torch.randn(1, 8, 1000, 128))
    fp32 = Int8KVCache.fp32_nbytes(1, 8, 128, 1000)
    assert cache.nbytes() == 2 * 8 * 1000 * (128 + 4)
    assert cache.nbytes() / fp32 == pytest.approx((128 + 4) / (4 * 128))


def test_capacity_and_bad_input_are_errors_not_resizes():
    cache = Int8KVCache(1, 2, 8, capacity=4)
    cache.append(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8))
    with pytest.raises(TensorError, match="KV cache full: 3 \\+ 2 tokens exceed the capacity of 4"):
        cache.append(torch.randn(1, 2, 2, 8), torch.randn(1, 2, 2, 8))
    assert cache.length == 3
    with pytest.raises(TensorError, match="do not fit the cache"):
        cache.append(torch.randn(1, 3, 1, 8), torch.randn(1, 3, 1, 8))
    bad = torch.randn(1, 2, 1, 8)
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(TensorError, match="NaN"):
        cache.append(bad, bad)
    zero = Int8KVCache(1, 1, 4, capacity=2)
    zero.append(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4))
    assert torch.equal(zero.keys(), torch.zeros(1, 1, 1, 4))


def test_tiny_vectors_never_get_a_zero_scale():
    """max|x| / 127 underflowed to 0 for vectors near 1e-44 (x / 0: NaN levels); the scale now
    has the reference's floor 2^-126, so x̂ stays within half a step."""
    cache = Int8KVCache(1, 1, 4, capacity=2)
    k = torch.tensor([[[[1e-44, -1e-44, 0.0, 5e-45]]]])
    cache.append(k, k)
    assert bool(torch.isfinite(cache.keys()).all()) and float(cache.k_scale[0, 0, 0, 0]) > 0
    assert bool(((cache.keys() - k).abs() <= cache.k_scale[:, :, :1] / 2).all())
