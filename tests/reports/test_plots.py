"""Trial plots draw what was observed and nothing else (issue 15, item 16): a trial without a
value for the plotted metric (an out-of-memory FAIL, a record with no such observation) is drawn
as missing, in a strip of its own under the plot, never at a value on the plot's scale (not on
the axis floor, not on the threshold line)."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from luma.reports.plots import VERDICT_MARKERS, Point, trial_figure, trial_plot  # noqa: E402


def _trial_lines(ax):
    """The trial markers on `ax` (not error-bar caps, not the threshold or boundary lines)."""
    return [line for line in ax.lines if line.get_marker() in VERDICT_MARKERS.values()]


def _plotted_y(ax) -> list[float]:
    return [float(y) for line in _trial_lines(ax) for y in line.get_ydata()]


def _markers(ax) -> int:
    return sum(len(line.get_xdata()) for line in _trial_lines(ax))


def test_out_of_memory_trials_are_not_drawn_on_the_threshold():
    # quality >= 0.999: two trials observed 1.0; two OOM FAILs observed nothing.
    points = [Point(0, None, None, None, "FAIL", "fp32", "oom"), Point(0, None, None, None, "FAIL", "fp32", "oom"),
              Point(1, 1.0, None, None, "PASS", "fp32"), Point(1, 1.0, None, None, "PASS", "fp32")]
    fig = trial_figure("quality", ["6 MiB", "8 MiB"], points, None, 0.999, ">=", 0.5, "host_memory")
    main, strip = fig.axes
    assert sorted(_plotted_y(main)) == [1.0, 1.0]  # only what was observed
    assert _markers(strip) == 2 and strip.get_yticklabels()[0].get_text() == "no value"
    assert any("no value (oom)" in t.get_text() for t in main.get_legend().get_texts())


def test_a_pass_without_an_observation_is_not_drawn_under_a_throughput_threshold():
    # A record whose PASS trials carry no throughput observation (throughput >= 40 req/s).
    points = [Point(0, 41.0, 40.5, 41.5, "PASS", "baseline"), Point(1, None, None, None, "PASS", "baseline")]
    fig = trial_figure("throughput", ["1 core", "2 cores"], points, "request / second", 40.0, ">=")
    main, strip = fig.axes
    assert _plotted_y(main) == [41.0]
    assert _markers(strip) == 1


def test_nothing_observed_draws_no_value_scale():
    points = [Point(0, None, None, None, "FAIL", "fp32", "oom")]
    fig = trial_figure("quality", ["4 MiB"], points, None, 0.999, ">=")
    main, strip = fig.axes
    assert _plotted_y(main) == [] and _markers(strip) == 1


def test_a_plot_with_every_value_has_no_strip_and_renders():
    points = [Point(0, 0.02, 0.01, 0.03, "PASS", "fp32"), Point(1, 0.06, 0.05, 0.07, "FAIL", "fp32")]
    assert len(trial_figure("p95_latency", ["a", "b"], points, "second", 0.05, "<=").axes) == 1
    svg = trial_plot("plot-x", "p95_latency", ["a", "b"], points, "second", 0.05, "<=")
    assert svg.startswith("<svg") and "no value" not in svg
