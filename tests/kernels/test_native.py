"""LUMA's native fused quantize (kernels/native.py) gives the blockwise torch pass's integers bit
for bit, at every length and alignment, saturating or not; it is rebuilt when its cached library
is damaged, and callers fall back to torch where it cannot be built."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from luma.kernels import native, torch_ops  # noqa: E402

needs_native = pytest.mark.skipif(native.library() is None, reason=f"no native kernel here: {native.unavailable()}")


def _torch_pass(x: torch.Tensor, scale: float, saturate: bool) -> torch.Tensor:
    """The blockwise torch pass alone (the native kernel switched off)."""
    out = torch.empty(x.shape, dtype=torch.int8)
    inv = torch.tensor(1.0 / scale, dtype=torch.float32)
    tb = (x * inv).round_()
    if saturate:
        tb.clamp_(-127, 127)
    return out.copy_(tb)


@needs_native
@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 300), offset=st.integers(0, 63), scale=st.floats(1e-3, 10.0), seed=st.integers(0, 2**31))
def test_native_equals_the_torch_pass_at_any_length_and_alignment(n, offset, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(n + offset, generator=gen) * 200 * scale  # values beyond +-127 steps saturate
    x = base[offset:]
    inv = float(torch.tensor(1.0 / scale, dtype=torch.float32))
    out = torch.empty(n + offset, dtype=torch.int8)[offset:]
    assert native.quantize_f32(x, out, inv, 127.0)
    assert torch.equal(out, _torch_pass(x, scale, saturate=True))


@needs_native
def test_ties_near_ties_and_large_outputs_round_half_to_even():
    scale = 0.0123
    inv = float(np.float32(1.0 / scale))
    steps = torch.arange(-130, 131, dtype=torch.float32)
    ties = torch.cat([steps, steps + 0.5, steps - 0.5]) / inv
    small = torch.cat([ties, ties.nextafter(torch.tensor(np.inf)), ties.nextafter(torch.tensor(-np.inf))])
    # Past STREAM_BYTES the kernel writes with non-temporal stores: the same integers.
    big = torch.cat([small, torch.randn(native.STREAM_BYTES + 77, generator=torch.Generator().manual_seed(1))])
    for x, offset in ((small, 0), (big, 0), (big[5:], 3)):  # an unaligned output: the prologue runs
        out = torch.empty(x.numel() + offset, dtype=torch.int8)[offset:]
        assert native.quantize_f32(x, out, inv, 127.0)
        assert torch.equal(out, _torch_pass(x, scale, saturate=True))
    q, s = torch_ops.quantize_per_tensor(big, torch.tensor(scale), check=False,
                                         out=torch.empty(big.shape, dtype=torch.int8))
    assert torch.equal(q, _torch_pass(big, float(s), saturate=True)) and int(q.min()) >= -127


def test_what_the_kernel_does_not_take_is_left_to_torch():
    x = torch.randn(8, 8)
    out = torch.empty(8, 8, dtype=torch.int8)
    assert not native.quantize_f32(x.double(), out, 1.0, 127.0)  # float64: the exact path's
    assert not native.quantize_f32(x.t(), out, 1.0, 127.0)  # not contiguous
    assert not native.quantize_f32(x, torch.empty(63, dtype=torch.int8), 1.0, 127.0)  # size differs


def test_without_a_compiler_quantize_still_works(monkeypatch):
    monkeypatch.setattr(native, "library", lambda: None)
    x = torch.randn(5000)
    q, s = torch_ops.quantize_per_tensor(x, out=torch.empty(5000, dtype=torch.int8))
    assert torch.equal(q, _torch_pass(x, float(s), saturate=False))


@needs_native
def test_a_damaged_cached_library_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_KERNEL_CACHE", str(tmp_path))
    native.library.cache_clear()
    try:
        path = native._library_path(native._compiler())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not a shared library")
        assert native.library() is not None and path.stat().st_size > 1000
    finally:
        native.library.cache_clear()
