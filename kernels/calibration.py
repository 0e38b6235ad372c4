"""Choosing the clip value (the range a scale must cover) from calibration data.

Weights are known ahead of time; activations are not, so their range comes from calibration
batches. Three methods, per tensor or per channel:

* ``minmax``: the largest |x| seen (no clipping, the widest step);
* ``percentile``: the p-th percentile of |x| (outliers saturate, everything else gets finer steps);
* ``mse``: the clip value that minimises the reconstruction error Σ(x - x̂)² over the data — a
  grid search over (0, max|x|] refined around the best point, since the error is not convex in
  the clip value (rounding makes it jagged) but is smooth at the grid's scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from luma.errors import TensorError
from luma.kernels.reference import SCALE_MIN, absmax, check_bits, check_finite, normalise_axis, qmax

METHODS = ("minmax", "percentile", "mse")
#: Values kept per channel for percentile and MSE calibration (a uniform sample beyond that).
DEFAULT_MAX_SAMPLES = 1 << 20


def clip_minmax(x: np.ndarray, axis: int | None = None) -> np.ndarray:
    return absmax(check_finite(x), normalise_axis(axis, np.ndim(x)))


def clip_percentile(x: np.ndarray, pct: float = 99.99, axis: int | None = None) -> np.ndarray:
    if not 0 < pct <= 100:
        raise TensorError(f"percentile must be in (0, 100], got {pct}", field="percentile")
    arr = np.abs(check_finite(x))
    ax = normalise_axis(axis, arr.ndim)
    if ax is None:
        return np.asarray(np.percentile(arr, pct))
    others = tuple(i for i in range(arr.ndim) if i != ax)
    return np.percentile(arr, pct, axis=others, keepdims=True)


def clip_mse(x: np.ndarray, bits: int = 8, axis: int | None = None, grid: int = 100, refine: int = 20) -> np.ndarray:
    """The clip value minimising Σ(x - x̂)², per tensor or per channel (channels independent)."""
    check_bits(bits)
    arr = check_finite(x)
    ax = normalise_axis(axis, arr.ndim)
    if ax is None:
        flat = arr.reshape(1, -1)
    else:
        flat = np.moveaxis(arr, ax, 0).reshape(arr.shape[ax], -1)
    amax = np.abs(flat).max(axis=1, initial=0.0)
    best = amax.copy()
    best_err = _sq_error(flat, amax, bits)
    # Coarse grid over (0, amax], then a finer grid around the best point found so far.
    best, best_err = _search(flat, bits, np.zeros_like(amax), amax, grid, best, best_err)
    step = amax / grid
    best, _ = _search(flat, bits, np.maximum(best - step, 0.0), np.minimum(best + step, amax), refine, best, best_err)
    if ax is None:
        return np.asarray(best[0])
    shape = [1] * arr.ndim
    shape[ax] = -1
    return best.reshape(shape)


def _search(flat, bits, lo, hi, points, best, best_err):
    for k in range(1, points + 1):
        c = lo + (hi - lo) * (k / points)
        err = _sq_error(flat, c, bits)
        better = err < best_err
        best = np.where(better, c, best)
        best_err = np.where(better, err, best_err)
    return best, best_err


def _sq_error(flat: np.ndarray, clip: np.ndarray, bits: int) -> np.ndarray:
    m = qmax(bits)
    scale = np.maximum(clip / m, SCALE_MIN)[:, None]  # the reference's rule
    x_hat = np.clip(np.rint(flat / scale), -m, m) * scale
    return np.square(flat - x_hat).sum(axis=1)


@dataclass
class Calibrator:
    """Accumulates activation batches; `clip()` gives the clip value by the chosen method.

    `axis` is the channel axis of each batch (None for per tensor). Batches may differ in their
    other dimensions. The running max is exact; percentile and MSE use every value up to
    `max_samples` per channel and a seeded uniform sample beyond.
    """

    method: str = "minmax"
    bits: int = 8
    axis: int | None = None
    percentile: float = 99.99
    max_samples: int = DEFAULT_MAX_SAMPLES
    seed: int = 0
    _amax: np.ndarray | None = field(default=None, repr=False)
    _samples: list[np.ndarray] = field(default_factory=list, repr=False)
    _count: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise TensorError(f"unknown calibration method {self.method!r} (known: {', '.join(METHODS)})", field="method")
        check_bits(self.bits)
        self._rng = np.random.default_rng(self.seed)

    def observe(self, batch) -> None:
        arr = check_finite(batch, "batch")
        ax = normalise_axis(self.axis, arr.ndim)
        rows = arr.reshape(1, -1) if ax is None else np.moveaxis(arr, ax, 0).reshape(arr.shape[ax], -1)
        if self._amax is not None and rows.shape[0] != self._amax.shape[0]:
            raise TensorError(f"batch has {rows.shape[0]} channels, earlier batches had {self._amax.shape[0]}", field="batch")
        amax = np.abs(rows).max(axis=1, initial=0.0)
        self._amax = amax if self._amax is None else np.maximum(self._amax, amax)
        if self.method != "minmax":
            self._samples.append(rows)
            self._count += rows.shape[1]
            if self._count > 2 * self.max_samples:
                self._shrink()

    def _shrink(self) -> None:
        data = np.concatenate(self._samples, axis=1)
        keep = self._rng.choice(data.shape[1], size=self.max_samples, replace=False)
        self._samples = [data[:, np.sort(keep)]]
        self._count = self.max_samples

    @property
    def observed(self) -> bool:
        """Whether any batch was observed."""
        return self._amax is not None

    def clip(self) -> np.ndarray:
        """Clip value(s): a scalar array per tensor, one value per channel otherwise."""
        if self._amax is None:
            raise TensorError("no calibration batch was observed", field="batch")
        if self.method == "minmax":
            out = self._amax
        else:
            data = np.concatenate(self._samples, axis=1)
            if self.method == "percentile":
                out = np.percentile(np.abs(data), self.percentile, axis=1)
            else:
                out = np.array([float(clip_mse(row, self.bits)) for row in data])
        return np.asarray(out[0]) if self.axis is None else out
