"""Mixed precision: sensitivities, the greedy path and the Pareto front's definition."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from luma.kernels import mixed_precision as mp  # noqa: E402


@pytest.fixture(scope="module")
def study():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    x_cal, x_eval = torch.randn(64, 16), torch.randn(64, 16)
    with torch.no_grad():
        ref_cal, ref_eval = model(x_cal), model(x_eval)

    def score(x, ref):
        def fn(m):
            with torch.no_grad():
                return -float((m(x) - ref).pow(2).mean())
        return fn

    return mp.run(model, score(x_cal, ref_cal), score(x_eval, ref_eval), "neg_mse", bits=(8, 4, 2)), model


def test_sensitivities_cover_every_layer_and_width_and_grow_as_bits_shrink(study):
    s, model = study
    assert set(s.sensitivity) == {"0", "2", "4"}
    for per_bits in s.sensitivity.values():
        assert set(per_bits) == {8, 4, 2}
        assert per_bits[2] >= per_bits[8]


def test_the_greedy_path_only_ever_saves_memory(study):
    s, _ = study
    sizes = [p.weight_bytes for p in s.points]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    assert len(s.points) == 1 + 3 * 2  # all int8, then each layer steps 8 -> 4 -> 2
    assert s.points[0].weight_bytes < s.fp32_bytes


def test_the_front_is_exactly_the_non_dominated_points(study):
    s, _ = study

    def dominates(a, b):
        return (a.weight_bytes <= b.weight_bytes and a.score >= b.score
                and (a.weight_bytes < b.weight_bytes or a.score > b.score))

    for p in s.points:
        assert p.on_front == (not any(dominates(o, p) for o in s.points))
    assert s.front()


def test_plot_writes_png_and_svg(study, tmp_path):
    s, _ = study
    paths = mp.plot(s, tmp_path, "test")
    assert [p.name for p in paths] == ["pareto.png", "pareto.svg"]
    assert all(p.stat().st_size > 1000 for p in paths)
