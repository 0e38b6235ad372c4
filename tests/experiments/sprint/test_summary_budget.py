"""`luma sprint run --format json` says what a host_memory boundary needs in all (issue 15,
item 15): the level is a budget on top of the runtime's own footprint, so the summary gives
level + the footprint measured for that variant at the sprint's base state."""

from __future__ import annotations

from types import SimpleNamespace

from luma.experiments.sprint.search import Boundary
from luma.experiments.sprint.pex import Result
from luma.experiments.sprint.states import State
from luma.experiments.sprint.summary import _deployment
from luma.experiments.sprint.trial import Trial
from luma.kb.records.pex_chain import Level

MIB = 2**20


def _trial(variant, phase, mib, cores, foot):
    state = State.of({"compute": Level(value=cores, unit="core"), "host_memory": Level(value=mib, unit="MiB")})
    return Trial(state, variant, phase, "PASS", None, [], {"runtime_footprint_bytes": foot * MIB}, 10)


def test_the_summary_adds_the_runtime_footprint_to_each_budget_level():
    levels = [Level(value=v, unit="MiB") for v in (4, 6, 8)]
    plan = SimpleNamespace(dimension="host_memory", levels=levels, variant="int8-weights", intervention="int8-weights",
                           base=State.of({"compute": Level(value=1, unit="core"), "host_memory": levels[0]}))
    trials = [_trial("fp32", "boundary", 8, 1, 80.0), _trial("fp32", "diagnosis", 6, 2, 120.0),
              _trial("int8-weights", "requalify", 6, 1, 82.0)]
    result = Result("s", plan, trials, Boundary(3, min_pass=2, adjacent_fail=1), requalified=Boundary(3, min_pass=1))
    dep = _deployment(result)
    assert "budget on top of the runtime's own footprint" in dep["meaning"]
    assert dep["min_pass"] == {"variant": "fp32", "level": "8 MiB", "level_bytes": 8 * MIB,
                               "runtime_footprint_bytes": 80.0 * MIB, "total_bytes": 88.0 * MIB}
    assert dep["requalified_min_pass"]["total_bytes"] == 88.0 * MIB  # 6 MiB + int8's 82 MiB
