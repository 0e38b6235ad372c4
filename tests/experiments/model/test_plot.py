"""The frontier plot of `luma model explore --plot` draws a demand point where no state passes
as missing (issue 15, item 16): its line breaks there instead of joining the neighbours."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("matplotlib")

from luma.experiments.model.plot import figure  # noqa: E402


def _row(conc: str, cost: float | None) -> dict:
    state = {"accelerator_type": "gpu-a", "accelerator_count": "1"} if cost is not None else None
    return {"demand": {"concurrency": conc}, "state": state, "cost": cost}


def test_a_point_where_nothing_passes_breaks_the_line():
    result = {"demand_axes": ["concurrency"], "contract": "c", "space": "s", "evidence_class": "projected",
              "states": 3, "cost_unit": "USD per hour",
              "frontier": [_row("1", 3.0), _row("2", None), _row("4", 6.0)]}
    ax = figure(result).axes[0]
    line = next(ln for ln in ax.lines if ln.get_linestyle() == "-")
    ys = list(line.get_ydata())
    assert list(line.get_xdata()) == [1.0, 2.0, 4.0]
    assert ys[0] == 3.0 and math.isnan(ys[1]) and ys[2] == 6.0
    markers = [float(y) for ln in ax.lines if ln.get_linestyle() in ("None", "none", "")
               for y in ln.get_ydata()]
    assert markers == [3.0, 6.0]
