"""Workload traces: parsing, bad input (one line naming the file, line and column), arrivals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from luma.errors import ConfigError
from luma.experiments.pilot import trace

GOOD = "time_s,rate,mix\n0,10,32:0.5;128:0.5\n10,20,\n10,40,128:1\n20,0,\n"


def test_shipped_traces_parse():
    assert {"diurnal", "step-burst"} <= set(trace.shipped())
    for name in trace.shipped():
        t = trace.load(name, max_context=256)
        assert t.duration > 0 and max(t.rates) > 0


def test_rate_is_interpolated_and_steps_at_repeated_times():
    t = trace.parse(GOOD, "t.csv", "t")
    assert t.rate_at(0) == 10 and t.rate_at(5) == pytest.approx(15)
    assert t.rate_at(10) == 40  # the later value at a step
    assert t.rate_at(15) == pytest.approx(20)
    assert t.mix_at(5) == ((32, 0.5), (128, 0.5)) and t.mix_at(12) == ((128, 1.0),)
    assert t.contexts() == [32, 128]
    assert t.mean_rate(10, 20) == pytest.approx(20, rel=0.01)


def test_scaling_keeps_the_shape():
    t = trace.parse(GOOD, "t.csv", "t").scaled(duration=40, rate_scale=2)
    assert t.duration == 40 and t.rate_at(10) == pytest.approx(30)


def test_arrivals_are_seeded_and_follow_the_rate():
    t = trace.parse("time_s,rate\n0,100\n30,100\n", "t.csv", "t")
    a, b = t.arrivals(7, 64), t.arrivals(7, 64)
    assert a == b and a != t.arrivals(8, 64)
    assert 2700 < len(a) < 3300 and all(ctx == 64 for _, ctx in a)
    assert all(0 <= x < 30 for x, _ in a) and [x for x, _ in a] == sorted(x for x, _ in a)


@pytest.mark.parametrize("text, where, words", [
    ("", None, "empty trace"),
    ("t,rate\n0,1\n1,1\n", "line 1", "header"),
    ("time_s,rate\n0,1\n", None, "at least two points"),
    ("time_s,rate\n0,x\n1,1\n", "line 2, rate", "not a number"),
    ("time_s,rate\n0,-1\n1,1\n", "line 2, rate", "must be in"),
    ("time_s,rate\n1,1\n2,1\n", "line 2, time_s", "first point"),
    ("time_s,rate\n0,1\n5,1\n4,1\n", "line 4, time_s", "goes back"),
    ("time_s,rate\n0,0\n5,0\n", "rate", "offers no request"),
    ("time_s,rate,mix\n0,1,32:0.5\n5,1,\n", "line 2, mix", "sum to 0.5"),
    ("time_s,rate,mix\n0,1,32\n5,1,\n", "line 2, mix", "CONTEXT:SHARE"),
    ("time_s,rate,mix\n0,1,9999:1\n5,1,\n", "line 2, mix", "longer than the service"),
    ("time_s,rate\n0,1,3\n5,1\n", "line 2", "columns"),
    ("time_s,rate\n0,nan\n5,1\n", "line 2, rate", "finite"),
])
def test_bad_traces_name_line_and_column(text, where, words):
    with pytest.raises(ConfigError) as exc:
        trace.parse(text, "bad.csv", "bad", max_context=256)
    msg = str(exc.value)
    assert "bad.csv" in msg and words in msg and "\n" not in msg
    if where:
        assert where in msg


def test_unknown_trace_names_the_shipped_ones():
    with pytest.raises(ConfigError, match="shipped: .*diurnal"):
        trace.load("no-such-trace")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 50), st.floats(0, 500)), min_size=1, max_size=12), st.floats(0, 1))
def test_interpolated_rate_stays_between_neighbouring_points(steps, where):
    times, rates, t = [0.0], [1.0], 0.0
    for dt, r in steps:
        t += dt
        times.append(t)
        rates.append(r)
    text = "time_s,rate\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(times, rates))
    tr = trace.parse(text, "p.csv", "p")
    x = where * tr.duration
    r = tr.rate_at(x)
    assert min(rates) - 1e-9 <= r <= max(rates) + 1e-9
