"""Int8Linear and quantize_model against float `nn.Linear` and the reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from luma.errors import TensorError  # noqa: E402
from luma.kernels import gemm_backend, gemm_tuning, reference  # noqa: E402
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
        sx = gemm_backend.activation_step(x, q.path(m))
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
    assert gemm_backend.resolve("auto") == "auto"
    assert Int8Linear.from_float(_linear(), "dynamic").path(3) in gemm_backend.candidates("dynamic")
    with pytest.raises(TensorError, match="unknown int8 GEMM backend 'cuda'"):
        QuantConfig(backend="cuda")


def test_auto_runs_the_choice_of_each_shape_class_and_packs_each_path_once(monkeypatch):
    """auto asks the tuner once per batch size and packs a path's weight on its first use only."""
    asked = []

    def choose(mode, m, k, n):
        asked.append(m)
        return "int_mm" if m >= 256 else gemm_backend.candidates("dynamic")[-1]

    monkeypatch.setattr(gemm_tuning, "choose", choose)
    q = Int8Linear.from_float(_linear(k=64, n=40), "dynamic")
    packs = []
    real_pack = gemm_backend.PATHS["int_mm"].pack
    monkeypatch.setitem(gemm_backend.PATHS, "int_mm", dataclasses.replace(
        gemm_backend.PATHS["int_mm"], pack=lambda *a: packs.append(1) or real_pack(*a)))
    for m in (4, 300, 4, 300, 256):
        q(torch.randn(m, 64))
    assert asked == [4, 300, 256] and len(packs) == 1
    assert set(q._packed) == {"int_mm", gemm_backend.candidates("dynamic")[-1]}


@pytest.mark.parametrize("backend", [b for b in gemm_backend.BACKENDS[1:] if gemm_backend.PATHS[b].available()])
def test_a_forced_backend_runs_on_every_batch_size(backend, monkeypatch):
    monkeypatch.setattr(gemm_tuning, "choose", lambda *a: pytest.fail("a forced backend asked the tuner"))
    q = Int8Linear.from_float(_linear(k=64, n=40), "dynamic", backend=backend)
    for m in (1, 16, 300):
        assert q(torch.randn(m, 64)).shape == (m, 40) and q.path(m) == backend
    assert set(q._packed) == {backend}


@pytest.mark.parametrize("path", gemm_backend.candidates("weight-only", all_paths=True))
@pytest.mark.parametrize("granularity", ["per-channel", "per-tensor"])
@pytest.mark.parametrize("m", [1, 7, 16, 40])
def test_weight_only_paths_equal_the_dequantized_weight_product_within_float_rounding(path, granularity, m,
                                                                                      monkeypatch):
    """Every weight-only path computes x·(q·s)ᵀ + b in float32 arithmetic: within the float32
    bound of a K-term dot product of the dequantized-weight product, k·eps·(Σ|x·w| + |b|)."""
    monkeypatch.setattr(gemm_tuning, "choose", lambda *a: path)
    k = 200  # not a multiple of 16 or 32, and 70 outputs not one of 4: every kernel's tails run
    lin = _linear(k=k, n=70, seed=m)
    q = Int8Linear.from_float(lin, "weight-only", granularity)
    x = torch.randn(m, k) * 3
    with torch.no_grad():
        y = q(x).double()
    w = q.dequantized_weight().double()
    exact = x.double() @ w.t() + q.bias.double()
    bound = k * torch.finfo(torch.float32).eps * (x.double().abs() @ w.abs().t() + q.bias.double().abs())
    assert q.path(m) == path
    assert bool(((y - exact).abs() <= bound).all())


def test_auto_never_takes_a_weight_only_path_that_keeps_a_wider_copy():
    """fp16-levels keeps 2 B per weight beside the int8 levels: measured by `luma kernels tune`,
    never chosen; the native kernel is offered only for the batches it is meant for."""
    assert "fp16-levels" not in gemm_backend.candidates("weight-only")
    assert "fp16-levels" in gemm_backend.candidates("weight-only", all_paths=True) or not gemm_backend.PATHS[
        "fp16-levels"].available()
    native_rows = gemm_backend.PATHS["int8-native"].max_rows
    assert "int8-native" not in gemm_backend.candidates("weight-only", native_rows + 1)
    entry = gemm_tuning.measure("weight-only", 2, 64, 48, compare_all=True)
    assert entry["path"] != "fp16-levels" and entry["path"] in gemm_backend.candidates("weight-only")


def test_the_weight_only_tile_buffer_is_reused_and_never_the_whole_float_weight(monkeypatch):
    monkeypatch.setattr(gemm_tuning, "choose", lambda *a: "tiled")
    q = Int8Linear.from_float(_linear(k=2048, n=256), "weight-only")
    q(torch.randn(3, 2048))
    tile = q._packed["tiled"]["tile"]
    q(torch.randn(5, 2048))
    assert q._packed["tiled"]["tile"] is tile and tile.numel() < q.q_weight.numel()


def test_the_process_wide_quantized_engine_is_left_as_it_was():
    before = torch.backends.quantized.engine
    q = Int8Linear.from_float(_linear(k=64, n=40), "dynamic")
    q(torch.randn(3, 64))
    q(torch.randn(300, 64))
    assert torch.backends.quantized.engine == before


@pytest.mark.parametrize("mode", ["dynamic", "weight-only"])
def test_a_loaded_state_dict_replaces_the_packed_weight(mode):
    """Packs are made from the buffers on first use: loading other levels, scales and bias must
    not leave the layer computing with the old ones."""
    a = Int8Linear.from_float(_linear(k=64, n=40, seed=1), mode)
    b = Int8Linear.from_float(_linear(k=64, n=40, seed=2), mode)
    x = torch.randn(5, 64)
    with torch.no_grad():
        a(x)  # packs a's weight
        a.load_state_dict(b.state_dict())
        assert torch.equal(a(x), b(x))
