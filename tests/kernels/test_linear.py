"""Int8Linear and quantize_model against float `nn.Linear` and the reference."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from luma.errors import TensorError  # noqa: E402
from luma.kernels import gemm_backend, reference  # noqa: E402
from luma.kernels.linear import Int8Linear, QuantConfig, quantize_model  # noqa: E402


def _linear(k=64, n=48, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.Linear(k, n, bias=bias)


@pytest.mark.parametrize("granularity", ["per-channel", "per-tensor"])
def test_weight_levels_match_the_reference(granularity):
    lin = _linear()
    q = Int8Linear.from_float(lin, "weight-only", granularity)
    axis = 0 if granularity == "per-channel" else None
    ref = reference.quantize(lin.weight.detach().double().numpy(), 8, axis)
    np.testing.assert_array_equal(q.q_weight.numpy(), ref.q)  # weights take the exact float64 path
    np.testing.assert_allclose(q.w_scale.numpy().ravel(), np.ravel(ref.scale), rtol=1e-7)


@pytest.mark.parametrize("mode", ["weight-only", "dynamic"])
@pytest.mark.parametrize("m", [1, 5, 16, 17, 64])
def test_output_error_is_within_the_quantisation_bound(mode, m):
    """|y - ŷ| per element is bounded by the rounding of W (and of x in dynamic mode):
    Σ_k |x_k|·s_w/2 (+ Σ_k |W_k|·s_x/2 + the product of the two half-steps)."""
    lin = _linear(k=64, n=40)
    q = Int8Linear.from_float(lin, mode)
    x = torch.randn(m, 64)
    y, yq = lin(x).double(), q(x).double()
    sw = q.w_scale.double()
    xa, wa = x.abs().double(), lin.weight.detach().abs().double()
    bound = xa @ (sw[:, None] / 2 * torch.ones_like(wa)).t()
    if mode == "dynamic":
        sx = gemm_backend.activation_step(x, q.backend)
        bound = bound + sx / 2 * wa.sum(dim=1) + (sx / 2) * (sw / 2) * 64
    assert bool(((y - yq).abs() <= bound * 1.001 + 1e-5).all())


def test_dynamic_mode_equals_the_reference_integer_pipeline():
    """Quantize x per row, integer product, rescale: the same as doing it with the reference's
    integers (one activation scale per row)."""
    lin = _linear(k=32, n=24)
    q = Int8Linear.from_float(lin, "dynamic", backend="int_mm")
    x = torch.randn(20, 32)
    rx = reference.quantize(x.double().numpy(), axis=0)
    rw = q.q_weight.numpy().astype(np.int64)
    acc = rx.q.astype(np.int64) @ rw.T
    expected = acc * rx.scale * q.w_scale.double().numpy()[None, :] + lin.bias.detach().double().numpy()
    np.testing.assert_allclose(q(x).double().numpy(), expected, rtol=1e-5, atol=1e-4)


def test_batched_input_keeps_its_leading_dimensions():
    q = Int8Linear.from_float(_linear(), "dynamic")
    assert q(torch.randn(2, 3, 64)).shape == (2, 3, 48)


def test_lower_bits_store_a_coarser_grid_and_count_packed_bytes():
    lin = _linear(k=64, n=48, bias=False)
    q8 = Int8Linear.from_float(lin, bits=8)
    q4 = Int8Linear.from_float(lin, bits=4)
    assert int(q4.q_weight.abs().max()) == 7
    assert q8.weight_bytes() == 64 * 48 + 48 * 4
    assert q4.weight_bytes() == 64 * 48 // 2 + 48 * 4
    assert q4.bias is None


def test_quantize_model_swaps_linears_in_place_and_honours_skip_and_layer_bits():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4)))
    names = quantize_model(model, QuantConfig(mode="weight-only", skip=("2.1",), layer_bits={"2.0": 4}))
    assert names == ["0", "2.0"]
    assert isinstance(model[0], Int8Linear) and model[0].bits == 8
    assert isinstance(model[2][0], Int8Linear) and model[2][0].bits == 4
    assert type(model[2][1]) is nn.Linear
    assert model(torch.randn(3, 8)).shape == (3, 4)


@pytest.mark.parametrize("kwargs,field", [({"mode": "static"}, "mode"), ({"granularity": "per-row"}, "granularity"),
                                          ({"bits": 9}, "bits"), ({"layer_bits": {"x": 1}}, "bits")])
def test_bad_config_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(TensorError) as info:
        QuantConfig(**kwargs)
    assert info.value.field == field


def test_reused_activation_buffers_never_leak_rows_between_calls():
    q = Int8Linear.from_float(_linear(k=64, n=48), "dynamic")
    x20, x5 = torch.randn(20, 64), torch.randn(5, 64)
    first20, first5 = q(x20), q(x5)
    q(torch.randn(20, 64) * 100)
    q(torch.randn(5, 64) * 100)
    assert torch.equal(q(x20), first20) and torch.equal(q(x5), first5)


@pytest.mark.parametrize("engine", [e for e in ("x86", "fbgemm", "onednn") if e in torch.backends.quantized.supported_engines])
def test_engine_backends_run_on_our_weight_integers(engine):
    lin = _linear(k=64, n=40)
    q = Int8Linear.from_float(lin, "dynamic", backend=engine)
    x = torch.randn(8, 64)
    y = q(x)
    w, b = torch.ops.quantized.linear_unpack(q._packed[engine])
    assert torch.equal(w.int_repr(), q.q_weight)
    torch.testing.assert_close(w.q_per_channel_scales().float(), q.w_scale)
    assert y.shape == (8, 40)


def test_auto_backend_is_a_known_one_and_bad_backends_are_refused():
    assert gemm_backend.resolve("auto") in gemm_backend.BACKENDS
    with pytest.raises(TensorError, match="unknown int8 GEMM backend 'cuda'"):
        QuantConfig(backend="cuda")


@pytest.mark.skipif(not {"x86", "onednn"} <= set(torch.backends.quantized.supported_engines), reason="engines")
def test_auto_sends_large_products_to_onednn_and_small_ones_to_x86(monkeypatch):
    monkeypatch.setattr(gemm_backend, "int_mm_is_fast", lambda: False)
    q = Int8Linear.from_float(_linear(k=64, n=40), "dynamic")
    q(torch.randn(4, 64))
    q(torch.randn(gemm_backend.LARGE_M, 64))
    assert set(q._packed) == {"x86", "onednn"}
    assert gemm_backend.engine_for("x86", 4, auto=False) == "x86"


def test_the_process_wide_quantized_engine_is_left_as_it_was():
    before = torch.backends.quantized.engine
    q = Int8Linear.from_float(_linear(k=64, n=40), "dynamic")
    q(torch.randn(3, 64))
    q(torch.randn(300, 64))
    assert torch.backends.quantized.engine == before
