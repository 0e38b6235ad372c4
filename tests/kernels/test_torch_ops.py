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
#: Empty (a side of 0) and 0-d tensors included: every quantizer must take them.
TENSORS = arrays(np.float32, array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8), elements=FINITE32)
#: Dtypes the fast paths quantise exactly as the reference does (float32 is within one level).
EXACT_DTYPES = [torch.float16, torch.bfloat16, torch.float64]


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
@given(TENSORS.filter(lambda x: x.ndim > 0), st.data())
def test_per_channel_levels_match_the_reference_within_one_level(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    q, s = torch_ops.quantize_per_channel(torch.from_numpy(x), axis)
    ref = reference.quantize(x.astype(np.float64), 8, axis)
    diff = np.abs(q.numpy().astype(int) - ref.q.astype(int))
    assert diff.max(initial=0) <= 1
    normal = ref.scale.ravel() > np.finfo(np.float32).tiny  # float32 scales below that lose precision
    np.testing.assert_allclose(s.numpy()[normal], ref.scale.ravel()[normal], rtol=1e-6)


def test_mismatches_with_the_reference_are_vanishingly_rare():
    """The documented float32 bound: float32 reciprocal-multiply vs float64 division only disagree
    at near-ties (docs/kernels.md gives the measured rate)."""
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
    assert float(s) == reference.SCALE_MIN and not q.any()
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


@settings(deadline=None, max_examples=150)
@given(TENSORS, st.integers(min_value=-46, max_value=37), st.sampled_from([torch.float32, torch.float64]), st.data())
def test_returned_scale_reconstructs_the_input_at_any_magnitude(x, exponent, dtype, data):
    """(q, s) must give x̂ = s·q within half a step of x with the float32 scale handed back, from
    float32's denormals (max|x| ~ 1e-45, where s = max|x| / 127 would underflow to 0) to its
    largest values; the levels are the reference's."""
    t = torch.as_tensor(x.astype(np.float64) / max(float(np.abs(x).max(initial=0)), 1.0) * 10.0**exponent).to(dtype)
    axis = data.draw(st.none() | st.integers(0, x.ndim - 1)) if x.ndim else None
    if axis is None:
        q, s = torch_ops.quantize_per_tensor(t)
        x_hat = torch_ops.dequantize(q, s).double()
        step = s.double()
    else:
        q, s = torch_ops.quantize_per_channel(t, axis)
        x_hat = torch_ops.dequantize(q, s, axis).double()
        step = s.double().reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    assert s.dtype == torch.float32 and bool((s >= reference.SCALE_MIN).all()) and bool(torch.isfinite(s).all())
    # float32 multiplies by a float32 reciprocal: x * inv carries a relative rounding of 2^-24 on
    # a value up to 127 steps, so a value just inside a half-step can round across it (found by
    # hypothesis: x / s = 43.4999987 became 43.5, then 44; off by 0.5000026 steps).
    slack = 128 * 2.0**-23 if dtype == torch.float32 else 1e-6
    assert bool(((x_hat - t.double()).abs() <= step * (0.5 + slack)).all())
    ref = reference.quantize(t.double().numpy(), 8, axis).q
    diff = np.abs(q.numpy().astype(int) - ref.astype(int))
    assert diff.max(initial=0) <= (1 if dtype == torch.float32 else 0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_float64_input_beyond_float32_range_is_refused(per_channel):
    x = torch.tensor([[1e39, 1.0], [2.0, 3.0]], dtype=torch.float64)
    with pytest.raises(TensorError, match="beyond float32's range"):
        torch_ops.quantize_per_channel(x, 0) if per_channel else torch_ops.quantize_per_tensor(x)


@settings(deadline=None)
@given(TENSORS, st.sampled_from([*EXACT_DTYPES, "float32 exact"]), st.data())
def test_fp16_bf16_fp64_levels_equal_the_reference(x, dtype, data):
    """Also float32 with exact=True, the path Int8Linear.from_float quantises weights on."""
    exact = True if dtype == "float32 exact" else None
    t = torch.from_numpy(x).to(torch.float32 if exact else dtype)
    ref_x = t.double().numpy()
    q, _ = torch_ops.quantize_per_tensor(t, exact=exact)
    assert np.array_equal(q.numpy(), reference.quantize(ref_x).q)
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        qc, _ = torch_ops.quantize_per_channel(t, axis, exact=exact)
        assert np.array_equal(qc.numpy(), reference.quantize(ref_x, 8, axis).q)


@pytest.mark.parametrize("dtype", EXACT_DTYPES)
def test_fp16_bf16_fp64_agree_with_the_reference_on_a_million_values(dtype):
    """Short mantissas make exact half-step ties common: the float32 path put 82 (fp16) and 351
    (bf16) of 10^6 values per channel one level off (as filed). These dtypes take the float64 path: 0."""
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((1000, 1000))).to(dtype)
    x64 = x.double().numpy()
    q, _ = torch_ops.quantize_per_tensor(x)
    assert int((q.numpy() != reference.quantize(x64).q).sum()) == 0
    qc, _ = torch_ops.quantize_per_channel(x, 0)
    assert int((qc.numpy() != reference.quantize(x64, axis=0).q).sum()) == 0


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (0, 0), (2, 0, 3), ()])
def test_empty_and_zero_dimensional_tensors_quantise_like_the_reference(shape):
    x = torch.zeros(shape)
    q, s = torch_ops.quantize_per_tensor(x)
    assert q.shape == x.shape and q.dtype == torch.int8 and float(s) == reference.SCALE_MIN
    q, _ = torch_ops.quantize_per_tensor(x, scale=torch.tensor(0.5))
    assert q.shape == x.shape
    for axis in range(x.ndim):
        qc, sc = torch_ops.quantize_per_channel(x, axis)
        ref = reference.quantize(x.double().numpy(), 8, axis)
        assert qc.shape == x.shape and sc.shape == (shape[axis],)
        np.testing.assert_array_equal(qc.numpy(), ref.q)
    if not shape:  # a 0-d tensor has no channel axis: refused as the reference refuses it
        with pytest.raises(TensorError, match="out of range for a 0-d tensor"):
            torch_ops.quantize_per_channel(x, 0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_a_zero_clip_saturates_on_both_paths(per_channel):
    """A calibrated clip of 0 (percentile calibration of mostly-zero ReLU outputs gives one) means
    every non-zero value lies beyond it: both paths saturate on the floor step, x̂ ~ 0."""
    from luma.kernels.calibration import Calibrator

    rng = np.random.default_rng(0)
    acts = np.maximum(rng.standard_normal((64, 4)), 0) * (rng.random((64, 4)) < 0.05)  # ~95 % zeros
    cal = Calibrator(method="percentile", percentile=50.0, axis=1 if per_channel else None)
    cal.observe(acts)
    clip = cal.clip()
    assert (np.asarray(clip) == 0).all()
    x = torch.from_numpy(acts.astype(np.float32))
    scale = torch.as_tensor(np.asarray(clip, np.float64) / 127)
    if per_channel:
        q, s = torch_ops.quantize_per_channel(x, 1, scale=scale)
        ref = reference.quantize(acts.astype(np.float32).astype(np.float64), 8, 1, clip=clip)
    else:
        q, s = torch_ops.quantize_per_tensor(x, scale=scale)
        ref = reference.quantize(acts.astype(np.float32).astype(np.float64), clip=clip)
    np.testing.assert_array_equal(q.numpy(), ref.q)
    assert set(np.unique(q.numpy())) <= {0, 127}
    np.testing.assert_allclose(s.double().numpy(), np.ravel(ref.scale), rtol=1e-7)


def test_int8_matmul_refuses_an_inner_dimension_that_can_overflow_int32():
    """127·127·K overflows int32 past K = 133,144 (128² past 131,071 with -128 levels)."""
    k = torch_ops.MAX_K
    a, b = torch.full((1, k), -127, dtype=torch.int8), torch.full((k, 1), -127, dtype=torch.int8)
    assert int(torch_ops.int8_matmul(a, b)) == 127 * 127 * k  # the longest K is still exact
    with pytest.raises(TensorError, match="K = 133,145 is too long"):
        torch_ops.int8_matmul(torch.ones((1, k + 1), dtype=torch.int8), torch.ones((k + 1, 1), dtype=torch.int8))
    k = torch_ops.MAX_K_ANY_INT8 + 1
    with pytest.raises(TensorError, match="overflow beyond K = 131,071"):
        torch_ops.int8_matmul(torch.full((1, k), -128, dtype=torch.int8), torch.full((k, 1), -128, dtype=torch.int8))


def test_int8_matmul_of_empty_operands():
    for m, k, n in [(0, 8, 8), (20, 0, 8), (20, 8, 0), (0, 0, 0)]:
        got = torch_ops.int8_matmul(torch.ones((m, k), dtype=torch.int8), torch.ones((k, n), dtype=torch.int8))
        assert torch.equal(got, torch.full((m, n), k, dtype=torch.int32))


@pytest.mark.parametrize("given_scale", [False, True])
def test_the_fused_aten_pass_gives_the_blockwise_integers(given_scale):
    """Per tensor at 8 bits, float32 runs as ATen's one fused pass: the same integers as the
    blockwise float32 path, bit for bit, ties and (with a given scale) saturation at ±127 included."""
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(1 << 16).astype(np.float32)) * 3
    s = torch_ops.scale_per_tensor(x)
    x[:8] = torch.tensor([0.5, 1.5, -2.5, 126.5, -127.5, -200.0, 200.0, -128.4]) * float(s)
    scale = s / 2 if given_scale else None  # a scale half as large saturates the tails
    q, _ = torch_ops.quantize_per_tensor(x, scale)
    step = float(torch_ops._given_scale(scale, 8)) if given_scale else float(torch_ops.scales_from_absmax(
        torch.tensor(torch_ops.absmax(x), dtype=torch.float64)))
    expected = torch_ops.quantize_into(x, step, torch.empty(x.shape, dtype=torch.int8), saturate=given_scale)
    assert torch_ops._aten_quantize_agrees()
    assert torch.equal(q, expected) and int(q.min()) >= -127 and q.dtype == torch.int8
    if given_scale:
        assert int((q == -127).sum()) > 100
