"""The PyTorch fast paths against the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

torch = pytest.importorskip("torch")

from luma.errors import TensorError  # noqa: E402
from luma.kernels import reference, torch_ops  # noqa: E402

FINITE32 = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_subnormal=False, width=32)
TENSORS = arrays(np.float32, array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8), elements=FINITE32)


def _ref(x: np.ndarray, axis=None, scale=None):
    """The reference's integers for the fast path's (float32) scale."""
    clip = None if scale is None else np.asarray(scale, np.float64) * 127
    return reference.quantize(x.astype(np.float64), 8, axis, clip).q


@settings(deadline=None)
@given(TENSORS)
def test_per_tensor_levels_match_the_reference_within_one_level(x):
    q, s = torch_ops.quantize_per_tensor(torch.from_numpy(x))
    ref = reference.quantize(x.astype(np.float64))
    assert q.dtype == torch.int8
    diff = np.abs(q.numpy().astype(int) - ref.q.astype(int))
    assert diff.max(initial=0) <= 1
    if float(ref.scale) > np.finfo(np.float32).tiny:  # float32 scales below that lose precision
        assert abs(float(s) - float(ref.scale)) <= 1e-6 * float(ref.scale)


@settings(deadline=None)
@given(TENSORS, st.data())
def test_per_channel_levels_match_the_reference_within_one_level(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    q, s = torch_ops.quantize_per_channel(torch.from_numpy(x), axis)
    ref = reference.quantize(x.astype(np.float64), 8, axis)
    diff = np.abs(q.numpy().astype(int) - ref.q.astype(int))
    assert diff.max(initial=0) <= 1
    normal = ref.scale.ravel() > np.finfo(np.float32).tiny  # float32 scales below that lose precision
    np.testing.assert_allclose(s.numpy()[normal], ref.scale.ravel()[normal], rtol=1e-6)


def test_mismatches_with_the_reference_are_vanishingly_rare():
    """The documented bound: float32 reciprocal-multiply vs float64 division only disagree at
    near-ties. Measured: 5 of 10^6 N(0,1) values per tensor, 1 per channel."""
    x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    q, _ = torch_ops.quantize_per_tensor(torch.from_numpy(x))
    ref = reference.quantize(x.astype(np.float64)).q
    assert (q.numpy() != ref).mean() < 1e-4
    qc, _ = torch_ops.quantize_per_channel(torch.from_numpy(x), 0)
    refc = reference.quantize(x.astype(np.float64), axis=0).q
    assert (qc.numpy() != refc).mean() < 1e-4


def test_dequantize_round_trip_within_half_a_step():
    x = torch.randn(64, 33)
    q, s = torch_ops.quantize_per_channel(x, 1)
    err = (torch_ops.dequantize(q, s, 1) - x).abs()
    assert bool((err <= s.reshape(1, -1) * (0.5 + 1e-5)).all())
    q, s = torch_ops.quantize_per_tensor(x)
    assert float((torch_ops.dequantize(q, s) - x).abs().max()) <= float(s) * (0.5 + 1e-5)


def test_zero_tensor_and_calibrated_scale_saturation():
    q, s = torch_ops.quantize_per_tensor(torch.zeros(5, 5))
    assert float(s) == 1.0 and not q.any()
    q, _ = torch_ops.quantize_per_tensor(torch.tensor([-10.0, 0.5, 10.0]), scale=torch.tensor(0.01))
    assert q.tolist() == [-127, 50, 127]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_input_is_refused(bad):
    x = torch.ones(4)
    x[1] = bad
    with pytest.raises(TensorError, match="NaN or infinite"):
        torch_ops.quantize_per_tensor(x)
    with pytest.raises(TensorError, match="NaN or infinite"):
        torch_ops.quantize_per_channel(x.reshape(2, 2), 0)


@pytest.mark.parametrize("m,k,n", [(1, 64, 32), (16, 40, 24), (17, 64, 32), (64, 128, 48), (33, 30, 10)])
def test_int8_matmul_is_exact(m, k, n):
    g = torch.Generator().manual_seed(m * k + n)
    a = torch.randint(-127, 128, (m, k), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (k, n), dtype=torch.int8, generator=g)
    expected = a.long() @ b.long()
    got = torch_ops.int8_matmul(a, b)
    assert got.dtype == torch.int32
    assert torch.equal(got.long(), expected)


def test_int8_matmul_worst_case_magnitudes_are_exact_on_the_fallback():
    a = torch.full((3, 4096), -127, dtype=torch.int8)
    b = torch.full((4096, 5), -127, dtype=torch.int8)
    assert int(torch_ops.int8_matmul(a, b)[0, 0]) == 127 * 127 * 4096


def test_int8_matmul_refuses_wrong_operands():
    with pytest.raises(TensorError, match="needs int8 operands"):
        torch_ops.int8_matmul(torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(TensorError, match="inner dimensions differ"):
        torch_ops.int8_matmul(torch.ones(2, 3, dtype=torch.int8), torch.ones(2, 2, dtype=torch.int8))


def test_rescale_matches_the_float64_formula():
    acc = torch.randint(-(2**20), 2**20, (8, 6), dtype=torch.int32)
    sx, sw, bias = torch.rand(8) + 0.1, torch.rand(6) + 0.1, torch.randn(6)
    got = torch_ops.rescale(acc, sx, sw, bias=bias)
    expected = acc.double() * sx.double()[:, None] * sw.double()[None, :] + bias.double()
    torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-3)


def test_scales_below_float32_normal_range_take_the_exact_path():
    x = torch.tensor([1.1754944e-38, -5e-39, 0.0])
    q, _ = torch_ops.quantize_per_tensor(x)
    assert q.tolist() == reference.quantize(x.double().numpy()).q.tolist()
    qc, _ = torch_ops.quantize_per_channel(x.reshape(3, 1), 0)
    assert qc.ravel().tolist() == [127, -127, 0]
