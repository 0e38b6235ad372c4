"""Int8Linear on the inputs a real model meets: NaN/Inf rows, bad weights, empty batches and
layers, float16/bfloat16/float64 activations. Every int8 path is driven (weight-only, and dynamic
on `int_mm` and on each quantized engine this PyTorch build has)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from luma.errors import TensorError  # noqa: E402
from luma.kernels import torch_ops  # noqa: E402
from luma.kernels.linear import Int8Linear, QuantConfig, quantize_model  # noqa: E402

ENGINES = [e for e in ("x86", "fbgemm", "onednn") if e in torch.backends.quantized.supported_engines]
#: (mode, backend) of every int8 path
PATHS = [("weight-only", "auto"), ("dynamic", "auto"), ("dynamic", "int_mm")] + [("dynamic", e) for e in ENGINES]
IDS = [f"{m}-{b}" for m, b in PATHS]


def _layer(k, n, mode, backend, bias=True, seed=0):
    torch.manual_seed(seed)
    if k and n:
        lin = nn.Linear(k, n, bias=bias)
    else:  # a zero-element weight, given as such: nn.Linear's init would warn that initialising it is a no-op
        lin = nn.Linear(1, 1, bias=bias)
        lin.in_features, lin.out_features, lin.weight = k, n, nn.Parameter(torch.empty(n, k))
        if bias:
            lin.bias = nn.Parameter(torch.rand(n) * 2 - 1)
    return lin, Int8Linear.from_float(lin, mode, backend=backend)


@pytest.mark.parametrize("mode,backend", PATHS, ids=IDS)
@settings(deadline=None, max_examples=25)
@given(data=st.data())
def test_a_non_finite_row_never_changes_another_row(mode, backend, data):
    """Rows holding NaN or ±inf come out non-finite exactly where fp32's do; every other row is
    what the batch without them gives (bit for bit on the int8 GEMMs; the float GEMM of the
    weight-only mode may round differently at another batch size)."""
    m = data.draw(st.integers(1, 40), label="rows")
    k = data.draw(st.sampled_from([8, 16, 24, 40, 13]), label="k")
    n = data.draw(st.sampled_from([8, 16, 12]), label="n")
    lin, q = _layer(k, n, mode, backend, seed=m)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m * k)) * data.draw(st.sampled_from([1e-3, 1.0, 1e3]))
    bad_rows = sorted(data.draw(st.sets(st.integers(0, m - 1), min_size=1, max_size=m), label="bad rows"))
    for r in bad_rows:
        cols = data.draw(st.sets(st.integers(0, k - 1), min_size=1, max_size=3), label="cols")
        for c in cols:
            x[r, c] = data.draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    bad = torch.zeros(m, dtype=torch.bool)
    bad[bad_rows] = True
    with torch.no_grad():
        y, fp32 = q(x), lin(x)
    assert not bool(torch.isfinite(y[bad]).any())
    assert torch.equal(torch.isfinite(y[bad]), torch.isfinite(fp32[bad]))
    if bool((~bad).any()):
        alone = q(x[~bad])
        if mode == "dynamic":
            assert torch.equal(y[~bad], alone)
        else:
            # The float GEMM of another batch size may sum in another order (and split across
            # threads otherwise on a busy machine): within float32's bound for a k-term dot
            # product, k·eps·Σ|x·w|, not a fixed tolerance (1e3-scaled inputs cancel to ~1).
            with torch.no_grad():
                bound = k * torch.finfo(torch.float32).eps * (x[~bad].abs() @ lin.weight.abs().T * 2 + 1)
            assert bool(((y[~bad] - alone).abs() <= bound).all())


@pytest.mark.parametrize("mode,backend", PATHS, ids=IDS)
def test_one_nan_leaves_the_rest_of_the_batch_accurate(mode, backend):
    """The issue's case: one NaN in a 4-row batch made rows 0-2 72 % wrong on int_mm."""
    lin, q = _layer(64, 48, mode, backend)
    x = torch.randn(4, 64)
    x[3, 7] = float("nan")
    with torch.no_grad():
        y, exact = q(x).double(), lin(x).double()
    rel = (y[:3] - exact[:3]).norm() / exact[:3].norm()
    assert float(rel) < 0.05 and bool(y[3].isnan().all())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), 1e39])
@pytest.mark.parametrize("granularity", ["per-channel", "per-tensor"])
def test_non_finite_weights_are_refused_naming_the_layer(bad, granularity):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    with torch.no_grad():
        model[2].weight[1, 3] = bad
    with pytest.raises(TensorError, match="layer '2': weight holds") as info:
        quantize_model(model, QuantConfig(granularity=granularity))
    assert info.value.field == "weight"
    with pytest.raises(TensorError, match=r"Linear\(16, 4\): weight holds"):
        Int8Linear.from_float(model[2])


@pytest.mark.parametrize("mode,backend", PATHS, ids=IDS)
@pytest.mark.parametrize("k,n", [(24, 16), (0, 16), (24, 0), (0, 0)])
@pytest.mark.parametrize("batch", [(0,), (3,), (2, 0), (20,)])
def test_empty_batches_and_layers_give_what_nn_linear_gives(mode, backend, k, n, batch):
    lin, q = _layer(k, n, mode, backend)
    x = torch.randn(*batch, k)
    with torch.no_grad():
        y, exact = q(x), lin(x)
    assert y.shape == exact.shape and y.dtype == x.dtype
    if k == 0 or x.numel() == 0:
        assert torch.equal(y, exact)  # nothing was quantised: zeros plus the bias


@pytest.mark.parametrize("mode,backend", PATHS, ids=IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_output_keeps_the_input_dtype(mode, backend, dtype):
    lin, q = _layer(32, 24, mode, backend)
    x = torch.randn(20, 32)
    with torch.no_grad():
        y = q(x.to(dtype))
        ref = q(x.to(dtype).float())
    assert y.dtype == dtype
    if dtype == torch.float64:  # computed in float32 (possibly by another kernel than float32 input takes)
        torch.testing.assert_close(y.float(), ref)
    else:
        torch.testing.assert_close(y, ref.to(dtype))


@pytest.mark.parametrize("mode", ["weight-only", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_models_run_after_quantize_model(mode, dtype):
    """A float16/bfloat16 model failed with 'mixed dtype (CPU)' after quantize_model."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 8))
    x = torch.randn(5, 32)
    with torch.no_grad():
        exact = model(x)
        model = model.to(dtype)
        quantize_model(model, QuantConfig(mode=mode))
        y = model(x.to(dtype))
    assert y.dtype == dtype
    assert float((y.float() - exact).norm() / exact.norm()) < 0.05


def test_dynamic_mode_refuses_an_inner_dimension_whose_int32_sums_can_overflow():
    k = torch_ops.MAX_K + 1
    q, s = torch.zeros((2, k), dtype=torch.int8), torch.ones(2)
    with pytest.raises(TensorError, match="too many for the dynamic int8 mode") as info:
        Int8Linear(q, s, None, mode="dynamic")
    assert info.value.field == "in_features"
    assert Int8Linear(q, s, None, mode="weight-only").in_features == k
