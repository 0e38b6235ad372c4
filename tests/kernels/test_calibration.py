"""Calibration: the clip value from min-max, percentile and MSE-optimal search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from luma.errors import TensorError
from luma.kernels.calibration import Calibrator, clip_minmax, clip_mse, clip_percentile
from luma.kernels.reference import error_metrics, fake_quantize

FINITE = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 40)), elements=FINITE), st.integers(2, 8))
def test_mse_clip_is_never_worse_than_minmax_and_never_beyond_the_range(x, bits):
    for axis in (None, 0):
        clip = clip_mse(x, bits, axis=axis)
        assert (clip <= clip_minmax(x, axis) + 1e-12).all()
        mse = np.square(x - fake_quantize(x, bits, axis, clip)).sum()
        full = np.square(x - fake_quantize(x, bits, axis)).sum()
        assert mse <= full * (1 + 1e-12) + 1e-300


def test_mse_clip_cuts_outliers_of_heavy_tailed_data_at_low_bits():
    x = np.random.default_rng(3).standard_t(df=3, size=200_000)
    clip = float(clip_mse(x, bits=4))
    assert clip < 0.5 * float(clip_minmax(x))
    tuned = error_metrics(x, fake_quantize(x, 4, clip=clip))
    plain = error_metrics(x, fake_quantize(x, 4))
    assert tuned.rmse < 0.6 * plain.rmse


def test_percentile_100_is_minmax_and_lower_percentiles_clip_less_far():
    x = np.random.default_rng(4).standard_normal((8, 1000))
    np.testing.assert_allclose(clip_percentile(x, 100, axis=0), clip_minmax(x, axis=0))
    assert (clip_percentile(x, 99, axis=0) < clip_minmax(x, axis=0)).all()


def test_calibrator_over_batches_equals_the_functions_on_all_the_data():
    rng = np.random.default_rng(5)
    batches = [rng.standard_normal((n, 16)) * 3 for n in (10, 7, 30)]
    data = np.concatenate(batches)
    for method, expected in (
        ("minmax", clip_minmax(data, axis=1).ravel()),
        ("percentile", clip_percentile(data, 99.9, axis=1).ravel()),
        ("mse", clip_mse(data, 8, axis=1).ravel()),
    ):
        cal = Calibrator(method=method, axis=1, percentile=99.9)
        for b in batches:
            cal.observe(b)
        np.testing.assert_allclose(cal.clip(), expected, rtol=1e-12)
    per_tensor = Calibrator()
    for b in batches:
        per_tensor.observe(b)
    assert float(per_tensor.clip()) == float(np.abs(data).max())


def test_calibrator_keeps_a_bounded_sample():
    cal = Calibrator(method="percentile", max_samples=1000)
    rng = np.random.default_rng(6)
    for _ in range(10):
        cal.observe(rng.standard_normal(900))
    assert sum(s.shape[1] for s in cal._samples) <= 2000
    assert 2.5 < float(cal.clip()) < 4.5


def test_calibrator_errors_name_the_problem():
    with pytest.raises(TensorError, match="unknown calibration method 'kl'"):
        Calibrator(method="kl")
    with pytest.raises(TensorError, match="no calibration batch was observed"):
        Calibrator().clip()
    cal = Calibrator(axis=1)
    cal.observe(np.ones((2, 4)))
    with pytest.raises(TensorError, match="batch has 5 channels, earlier batches had 4"):
        cal.observe(np.ones((2, 5)))
    with pytest.raises(TensorError, match="NaN or infinite"):
        cal.observe(np.array([[np.nan, 1, 1, 1]]))
    with pytest.raises(TensorError, match="percentile must be in"):
        clip_percentile(np.ones(3), 0)
