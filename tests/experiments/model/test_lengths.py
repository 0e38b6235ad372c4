"""Length mixes: a fixed pair is one point, weights sum to 1, a mix reproduces the statistics it was
given (hypothesis feeds many), histograms, every preset cites a source, bad input names its field."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luma.errors import ContractError
from luma.experiments.model import lengths
from luma.experiments.model.length_presets import PRESETS


def test_a_fixed_pair_is_one_point_of_weight_one():
    mix = lengths.fixed(512, 128)
    assert list(mix.points.prompt) == [512] and list(mix.points.output) == [128]
    assert list(mix.points.weight) == [1.0]
    assert (mix.mean_prompt, mix.mean_output, mix.mean_total) == (512, 128, 640)
    assert mix.mean_prompt_sq == 512 ** 2
    assert mix.quantile("prompt", 0.99) == 512 and mix.assumptions == ()


@pytest.mark.parametrize("value", [[512, 128], (512, 128), "512x128", "512,128"])
def test_parse_reads_a_pair(value):
    mix = lengths.parse(value)
    assert (mix.mean_prompt, mix.mean_output, len(mix.points.weight)) == (512, 128, 1)


def _lognormal_stats(mu, sigma, keys):
    z = {"p50": 0.0, "p90": NormalDist().inv_cdf(0.9), "p99": NormalDist().inv_cdf(0.99)}
    stats = {k: math.exp(mu + sigma * z[k]) for k in keys if k != "mean"}
    if "mean" in keys:
        stats["mean"] = math.exp(mu + sigma * sigma / 2)
    return stats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mu=st.floats(3.0, 8.0), sigma=st.floats(0.05, 1.2),
       keys=st.sets(st.sampled_from(["mean", "p50", "p90", "p99"]), min_size=1))
def test_a_mix_reproduces_the_statistics_it_was_given(mu, sigma, keys):
    stats = _lognormal_stats(mu, sigma, keys)
    mix = lengths.from_stats(stats, {"mean": 100})
    for key, value in stats.items():
        got = mix.mean_prompt if key == "mean" else mix.quantile("prompt", int(key[1:]) / 100)
        assert got == pytest.approx(value, rel=0.03), key
    pts = mix.points
    assert pts.weight.sum() == pytest.approx(1.0) and np.all(pts.weight > 0) and len(pts.weight) <= 16
    assert float(pts.weight @ pts.prompt) == pytest.approx(mix.mean_prompt, rel=1e-9)
    assert mix.mean_prompt_sq >= mix.mean_prompt ** 2


@settings(max_examples=25, deadline=None)
@given(rho=st.floats(-0.95, 0.95))
def test_a_rank_correlation_keeps_the_marginals_and_moves_the_joint(rho):
    mix = lengths.from_stats({"mean": 1000, "p50": 700}, {"mean": 200, "p50": 150}, rank_correlation=rho)
    pts = mix.points
    assert pts.weight.sum() == pytest.approx(1.0)
    assert float(pts.weight @ pts.prompt) == pytest.approx(mix.mean_prompt, rel=0.01)
    assert float(pts.weight @ pts.output) == pytest.approx(mix.mean_output, rel=0.01)
    cov = float(pts.weight @ ((pts.prompt - mix.mean_prompt) * (pts.output - mix.mean_output)))
    assert cov == pytest.approx(0, abs=1e-6 * mix.mean_prompt * mix.mean_output) if abs(rho) < 1e-9 \
        else math.copysign(1, cov) == math.copysign(1, rho)


def test_a_mean_alone_assumes_and_says_its_spread():
    mix = lengths.parse("prompt: mean=512; output: mean=128")
    assert mix.mean_prompt == pytest.approx(512, rel=1e-3) and mix.mean_output == pytest.approx(128, rel=1e-3)
    assert any("coefficient of variation 0.89 assumed" in a for a in mix.assumptions)
    assert any("independent" in a for a in mix.assumptions)
    stated = lengths.from_stats({"mean": 512, "cv": 0.5}, 128)
    values = stated.prompt_dist.values
    assert values.std() / values.mean() == pytest.approx(0.5, rel=0.05)
    assert not any("assumed" in a for a in stated.assumptions)


def test_a_mean_and_one_percentile_fix_the_spread_and_assume_none():
    # A log-normal runs through both: its spread follows from them, so nothing is said to be assumed.
    mix = lengths.from_stats({"mean": 203, "p50": 125}, 64)
    assert mix.quantile("prompt", 0.5) == pytest.approx(125, rel=1e-2)
    assert mix.mean_prompt == pytest.approx(203, rel=1e-3)
    assert not any("prompt: spread not stated" in a for a in mix.assumptions)
    alone = lengths.from_stats({"p50": 125}, 64)
    assert any("prompt: spread not stated" in a for a in alone.assumptions)


def test_min_and_max_clip():
    mix = lengths.from_stats({"mean": 300, "p50": 250, "max": 1024, "min": 4}, 64)
    assert mix.prompt_dist.values.max() <= 1024 and mix.prompt_dist.values.min() >= 4
    assert mix.mean_prompt == pytest.approx(300, rel=1e-3)


def test_a_histogram_gives_its_mean_and_quantiles():
    mix = lengths.from_histogram(([0, 100, 200, 400], [50, 30, 20]), ([0, 10], [1]))
    # uniform within bins: 0.5*50 + 0.3*150 + 0.2*300
    assert mix.mean_prompt == pytest.approx(130, rel=1e-3)
    assert mix.quantile("prompt", 0.5) == pytest.approx(100, rel=1e-2)
    assert mix.quantile("prompt", 0.9) == pytest.approx(300, rel=1e-2)
    assert mix.mean_output == pytest.approx(5, rel=1e-3)
    table = lengths.parse({"prompt": {"edges": [0, 100, 200, 400], "counts": [50, 30, 20]}, "output": 8})
    assert table.mean_prompt == pytest.approx(130, rel=1e-3)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_loads_cites_a_source_and_keeps_its_figures(name):
    mix = lengths.parse(name)
    assert mix.name == name and mix.source.title and mix.source.url.startswith("https://")
    stated = PRESETS[name]
    for which in ("prompt", "output"):
        figures = stated[which] if isinstance(stated[which], dict) else {"mean": stated[which]}
        got = mix.mean_prompt if which == "prompt" else mix.mean_output
        assert got == pytest.approx(figures["mean"], rel=0.01)
        for key in ("p50", "p90", "p99"):
            if key in figures:
                assert mix.quantile(which, int(key[1:]) / 100) == pytest.approx(figures[key], rel=0.03)
    assert mix.points.weight.sum() == pytest.approx(1.0) and len(mix.points.weight) <= 16
    assert name in mix.describe() and mix.source.url in mix.describe()


@pytest.mark.parametrize("value, field, words", [
    ("nope", "lengths", "known: sharegpt"),
    ({"prompt": {"mean": -5}, "output": 8}, "lengths.prompt.mean", "positive"),
    ({"prompt": {"mean": float("nan")}, "output": 8}, "lengths.prompt.mean", "finite"),
    ({"prompt": {"p50": 900, "p90": 800}, "output": 8}, "lengths.prompt.p90", "out of order"),
    ({"prompt": {"p50": 90, "max": 80}, "output": 8}, "lengths.prompt.max", "out of order"),
    ({"prompt": {"mean": 100, "p95x": 3}, "output": 8}, "lengths.prompt.p95x", "unknown key"),
    ({"prompt": {"max": 100}, "output": 8}, "lengths.prompt", "needs a mean or a percentile"),
    ({"prompt": 100, "output": 8, "colour": 1}, "lengths.colour", "unknown key"),
    ({"prompt": 100}, "lengths.output", "missing output"),
    ({"prompt": "mean=abc", "output": 8}, "lengths.prompt.mean", "not a number"),
    ({"prompt": {"mean": 5000, "p50": 100, "p99": 200, "max": 300}, "output": 8}, "lengths.prompt.mean",
     "outside min..max"),
    ({"prompt": {"mean": 250, "p50": 100, "p99": 200, "max": 260}, "output": 8}, "lengths.prompt.mean",
     "above what"),
    ({"prompt": {"edges": [0, 10, 5], "counts": [1, 1]}, "output": 8}, "lengths.prompt.edges", "increase"),
    ({"prompt": 100, "output": 8, "rank_correlation": 2}, "lengths.rank_correlation", "rank correlation"),
    ([512, -1], "lengths[1]", "positive"),
    (512, "lengths", "expected a preset name"),
])
def test_bad_input_is_a_contract_error_naming_the_field(value, field, words):
    with pytest.raises(ContractError) as err:
        lengths.parse(value)
    assert err.value.field == field and words in err.value.message


def test_quantile_refuses_an_unknown_length_or_level():
    mix = lengths.fixed(10, 10)
    with pytest.raises(ContractError, match="unknown length"):
        mix.quantile("total", 0.5)
    with pytest.raises(ContractError) as err:
        mix.quantile("prompt", 1.5)
    assert err.value.field == "q"
