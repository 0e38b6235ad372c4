"""experiments/model/nelder_mead.py: minimisations as coroutines, alone or advancing together."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.experiments.model import nelder_mead


def _bowl(centre):
    return lambda x: float(np.sum((x - centre) ** 2))


def _alone(objective, x0, **kw):
    calls = []

    def evaluate(requests):
        calls.append(len(requests))
        return [o(x) for o, x in requests]

    return nelder_mead.drive(nelder_mead.minimise(objective, x0, **kw), evaluate), calls


def test_it_finds_the_bottom_of_a_bowl_inside_the_box_and_the_nearest_wall_outside_it():
    x, _ = _alone(_bowl(np.array([0.3, 0.7, 0.5])), np.full(3, 0.9), steps=600)
    assert np.allclose(x, [0.3, 0.7, 0.5], atol=1e-3)
    x, _ = _alone(_bowl(np.array([1.4, -0.2])), np.full(2, 0.5), steps=600)
    assert np.allclose(x, [1.0, 0.0], atol=1e-3)  # the unit box holds every point


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.lists(st.floats(-0.5, 1.5), min_size=3, max_size=3),
                          st.lists(st.floats(0, 1), min_size=3, max_size=3)), min_size=1, max_size=5))
def test_minimisations_together_take_each_the_steps_it_takes_alone_in_fewer_calls(problems):
    chains = [(_bowl(np.array(c)), np.array(x0)) for c, x0 in problems]
    alone = [_alone(o, x0, steps=80, scale=0.2) for o, x0 in chains]
    calls = []

    def evaluate(requests):
        calls.append(len(requests))
        return [o(x) for o, x in requests]

    together = nelder_mead.drive(nelder_mead.together(
        [nelder_mead.restarts(o, x0, (0.2,), steps=80) for o, x0 in chains]), evaluate)
    for (x, asked), got in zip(alone, together):
        assert np.array_equal(x, got)
    assert sum(calls) == sum(sum(asked) for _, asked in alone)  # the same points, no more
    assert len(calls) == max(len(asked) for _, asked in alone)  # one call a round


def test_nothing_to_run_is_no_call():
    assert nelder_mead.drive(nelder_mead.together([]), lambda requests: 1 / 0) == []
