"""SVG plots for the reports, drawn with matplotlib and returned as text.

Figures are made with `matplotlib.figure.Figure` (no pyplot: no global figure state, nothing to
close) and saved as SVG with text kept as text (`svg.fonttype = none`: smaller, searchable), no
date in the metadata and the plot's own id as the hash salt, so the same data gives the same
bytes and two plots on one page never share an element id.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from luma.errors import ConfigError
from luma.reports.fmt import axis_scale

PALETTE = ["#1f5fa8", "#d9730d", "#2b8a3e", "#7048e8", "#c2255c", "#5c940d"]
VERDICT_MARKERS = {"PASS": "o", "FAIL": "X", "INCONCLUSIVE": "^"}
_HEAD = re.compile(r"\A.*?(?=<svg)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


def require() -> None:
    """ConfigError (one line, before any query runs) when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("reports draw their plots with matplotlib, a dependency of luma: reinstall it "
                          "(pip install -e .)") from None


def _t(text: str) -> str:
    """Text for matplotlib: a `$` would start mathtext."""
    return str(text).replace("$", r"\$")


def _svg(fig, plot_id: str) -> str:
    """The figure as inline SVG (no XML declaration, DOCTYPE or metadata block)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": plot_id, "svg.id": f"svg-{plot_id}"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = _METADATA.sub("", _HEAD.sub("", buf.getvalue(), count=1), count=1).strip() + "\n"
    return _own_ids(svg, plot_id)


_ID = re.compile(r'\bid="([^"]+)"')


def _own_ids(svg: str, plot_id: str) -> str:
    """Every element id (matplotlib names groups `figure_1`, `axes_1` ... in every plot) prefixed
    with the plot's id, references included, so that ids stay unique on a page of several plots."""
    ids = set(_ID.findall(svg)) - {f"svg-{plot_id}"}
    if not ids:
        return svg

    def fix(m: re.Match) -> str:
        return f"{m.group(1)}{plot_id}-{m.group(2)}{m.group(3)}" if m.group(2) in ids else m.group(0)

    return re.sub(r'(\bid="|href="#|url\(#)([^")]+)([")])', fix, svg)


def standalone(svg: str) -> str:
    """An inline SVG as a file of its own (the XML declaration back in front)."""
    return '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + svg


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    fig.patch.set_facecolor("white")
    return fig


def _log_wanted(values: list[float]) -> bool:
    vals = [v for v in values if v is not None]
    return bool(vals) and min(vals) > 0 and max(vals) / min(vals) > 20


def _plain_log(axis) -> None:
    """Log ticks at 1, 2, 5 × 10^k written as plain numbers (no mathtext, no crowded minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


@dataclass
class Point:
    """One trial on a trial plot: level position, value (canonical unit) and interval, verdict."""

    x: int
    value: float | None
    lo: float | None
    hi: float | None
    verdict: str
    series: str
    note: str = ""


def trial_plot(plot_id: str, title: str, levels: list[str], points: list[Point], unit: str | None,
               threshold: float | None = None, op: str = "", boundary: float | None = None,
               level_label: str = "level") -> str:
    """Observed values per level (error bars: the confidence interval), the threshold as a line,
    marker shape by verdict, colour by series. A trial without a value for the metric (out of
    memory, time-out, or never observed) is drawn as missing: in a "no value" strip under the
    plot, never at a value it did not have (not on the axis floor, not on the threshold)."""
    return _svg(trial_figure(title, levels, points, unit, threshold, op, boundary, level_label), plot_id)


def trial_figure(title: str, levels: list[str], points: list[Point], unit: str | None,
                 threshold: float | None = None, op: str = "", boundary: float | None = None,
                 level_label: str = "level"):
    """The figure of `trial_plot`: axes[0] holds the values, axes[1] (only when some trial has no
    value) the trials without one."""
    from matplotlib.lines import Line2D

    fig = _figure(7.2, 3.4)
    missing_points = [p for p in points if p.value is None]
    if missing_points:
        grid = fig.add_gridspec(2, 1, height_ratios=(6, 1), hspace=0.08)
        ax = fig.add_subplot(grid[0])
        strip = fig.add_subplot(grid[1], sharex=ax)
    else:
        ax, strip = fig.add_subplot(1, 1, 1), None
    values = [v for p in points for v in (p.value, p.lo, p.hi) if v is not None]
    scale, unit_label = axis_scale(unit, values + ([threshold] if threshold is not None else []))
    series = list(dict.fromkeys(p.series for p in points))
    colours = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(series)}
    for i, name in enumerate(series):
        mine = [p for p in points if p.series == name]
        offset = (i - (len(series) - 1) / 2) * 0.2
        by_x: dict[int, list[Point]] = {}
        for p in mine:
            by_x.setdefault(p.x, []).append(p)
        for x, group in sorted(by_x.items()):
            for j, p in enumerate(group):
                xpos = x + offset + (j - (len(group) - 1) / 2) * 0.05
                marker = VERDICT_MARKERS.get(p.verdict, "o")
                if p.value is None:
                    strip.plot([xpos], [0.0], marker=marker, color=colours[name], markersize=7, linestyle="none",
                               markerfacecolor="none" if marker == "o" else colours[name])
                    continue
                y = p.value / scale
                if p.lo is not None and p.hi is not None:
                    ax.errorbar([xpos], [y], yerr=[[y - p.lo / scale], [p.hi / scale - y]], fmt="none",
                                ecolor=colours[name], elinewidth=1.2, capsize=3)
                ax.plot([xpos], [y], marker=marker, color=colours[name], markersize=7, linestyle="none",
                        markeredgecolor="white" if marker == "o" else colours[name])
    handles = [Line2D([], [], color=colours[s], marker="s", linestyle="none", label=_t(s)) for s in series]
    handles += [Line2D([], [], color="#555555", marker=m, linestyle="none", label=v)
                for v, m in VERDICT_MARKERS.items() if any(p.verdict == v for p in points)]
    if threshold is not None:
        ax.axhline(threshold / scale, color="#c92a2a", linestyle="--", linewidth=1.2)
        handles.append(Line2D([], [], color="#c92a2a", linestyle="--",
                              label=_t(f"threshold {op} {threshold / scale:.4g} {unit_label}".strip())))
    if boundary is not None:
        for a in (ax, strip) if strip is not None else (ax,):
            a.axvline(boundary, color="#868e96", linestyle=":", linewidth=1.2)
        handles.append(Line2D([], [], color="#868e96", linestyle=":", label="boundary"))
    if not values:  # nothing observed at all: an empty value axis, not a made-up range
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no trial has a value", ha="center", va="center", transform=ax.transAxes,
                fontsize=9, color="#555555")
    elif _log_wanted(values + ([threshold] if threshold else [])):
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
    bottom = strip if strip is not None else ax
    if strip is not None:
        causes = sorted({p.note for p in missing_points if p.note})
        handles.append(Line2D([], [], color="#555555", marker="o", markerfacecolor="none", linestyle="none",
                              label=_t("no value" + (f" ({', '.join(causes)})" if causes else "") + ": strip below")))
        strip.set_yticks([0.0], [_t("no value")])
        strip.set_ylim(-1, 1)
        strip.tick_params(axis="y", length=0, labelsize=8)
        for side in ("top", "right", "left"):
            strip.spines[side].set_visible(False)
        ax.tick_params(axis="x", labelbottom=False)
    bottom.set_xticks(range(len(levels)), [_t(x) for x in levels])
    bottom.set_xlim(-0.6, len(levels) - 0.4)
    bottom.set_xlabel(_t(level_label))
    ax.set_ylabel(_t(f"{title} ({unit_label})" if unit_label else title))
    ax.set_title(_t(title), fontsize=10)
    ax.grid(axis="y", color="#e9ecef")
    ax.legend(handles=handles, fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


@dataclass
class Span:
    """One row of a range plot: min, median and max of a quantity (canonical unit)."""

    label: str
    low: float
    mid: float | None
    high: float
    unit: str | None
    note: str = ""


def range_plot(plot_id: str, title: str, spans: list[Span]) -> str:
    """Min–median–max per row, one small axis each (rows have their own units)."""
    fig = _figure(7.2, 0.85 * len(spans) + 0.7)
    axes = fig.subplots(len(spans), 1, squeeze=False)[:, 0]
    for ax, s in zip(axes, spans, strict=True):
        vals = [v for v in (s.low, s.mid, s.high) if v is not None]
        scale, unit_label = axis_scale(s.unit, vals)
        lo, hi = s.low / scale, s.high / scale
        ax.plot([lo, hi], [0, 0], color=PALETTE[0], linewidth=4, solid_capstyle="round")
        ax.plot([lo, hi], [0, 0], linestyle="none", marker="|", markersize=14, color=PALETTE[0])
        if s.mid is not None:
            ax.plot([s.mid / scale], [0], marker="D", color=PALETTE[1], markersize=7, linestyle="none")
        if _log_wanted(vals):
            ax.set_xscale("log")
            _plain_log(ax.xaxis)
        pad = (hi - lo) * 0.15 or abs(hi) * 0.15 or 1.0
        if ax.get_xscale() == "linear":
            ax.set_xlim(lo - pad, hi + pad)
        ax.set_yticks([0], [_t(s.label)])
        ax.set_ylim(-1, 1)
        ax.set_xlabel(_t(unit_label), fontsize=8, labelpad=1)
        ax.tick_params(labelsize=8)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    axes[0].set_title(_t(title + "  (bar: min–max, ◆ median)"), fontsize=10)
    fig.tight_layout()
    return _svg(fig, plot_id)


def bar_plot(plot_id: str, title: str, categories: list[str], stacks: dict[str, list[int]],
             xlabel: str = "records") -> str:
    """Horizontal stacked bars: one bar per category, one colour per stack, totals at the ends."""
    fig = _figure(7.2, 0.5 * len(categories) + 1.2)
    ax = fig.add_subplot(1, 1, 1)
    left = [0] * len(categories)
    for i, (name, counts) in enumerate(stacks.items()):
        ax.barh(range(len(categories)), counts, left=left, color=PALETTE[i % len(PALETTE)], label=_t(name),
                height=0.6)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total}", va="center", fontsize=8)
    ax.set_yticks(range(len(categories)), [_t(c) for c in categories])
    ax.invert_yaxis()
    ax.set_xlim(0, max(left + [1]) * 1.15)
    ax.set_xlabel(_t(xlabel))
    ax.set_title(_t(title), fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _svg(fig, plot_id)


def change_plot(plot_id: str, title: str, labels: list[str], changes: list[float]) -> str:
    """Diverging horizontal bars: the relative change of each figure (negative = less), labelled."""
    fig = _figure(7.2, 0.45 * len(labels) + 1.2)
    ax = fig.add_subplot(1, 1, 1)
    pct = [100.0 * c for c in changes]
    ax.barh(range(len(labels)), pct, color=[PALETTE[2] if p < 0 else PALETTE[1] for p in pct], height=0.6)
    for y, p in enumerate(pct):
        ax.text(p, y, f" {p:+.1f} %" if p >= 0 else f"{p:+.1f} % ", va="center", ha="left" if p >= 0 else "right",
                fontsize=8)
    ax.axvline(0, color="#444", linewidth=0.8)
    ax.set_yticks(range(len(labels)), [_t(x) for x in labels])
    ax.invert_yaxis()
    span = max([abs(p) for p in pct] + [1.0]) * 1.35
    ax.set_xlim(-span, span)
    ax.set_xlabel(_t("change with the intervention, after its own costs (%)"))
    ax.set_title(_t(title), fontsize=10)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _svg(fig, plot_id)


def timeline_plot(plot_id: str, title: str, windows: list[dict], states: list[str], slo: float | None = None,
                  currency: str = "", baselines: dict[str, list[dict]] | None = None,
                  events: list[tuple[float, str]] = (), trace: list[list[float]] = ()) -> str:
    """A controlled run on one trace-time axis, four stacked panels: (1) offered and observed
    request rate, (2) the state in force as a step line (y ticks: `states`, short labels, the
    first at the bottom), (3) p95 latency per window against the SLO, the marker by the window's
    verdict, (4) cost per accepted output per window, each of `baselines` ({name: windows})
    dashed beside it. Verification windows are shaded and `events` ((trace time, kind): switch,
    rollback, breach) drawn as vertical lines in every panel.

    `windows` are dicts with start_s, end_s, rate_offered, rate_observed, state (one of `states`),
    verification, p95_latency (seconds), p95_ci, verdict and cost_per_accepted; a value that is
    None is a gap in its line, never a point at some other value. `trace`: [time, rate] points
    of the offered load as replayed."""
    import math

    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    nan = float("nan")

    def value(w: dict, key: str):
        v = w.get(key)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None

    def steps(ws: list[dict], get) -> tuple[list[float], list[float]]:
        # One flat segment per window, joined where windows touch, broken where a value or a window is missing.
        xs, ys, end = [], [], None
        for w in ws:
            if end is not None and w["start_s"] != end:
                xs.append(end)
                ys.append(nan)
            y = get(w)
            xs += [w["start_s"], w["end_s"]]
            ys += [nan if y is None else y] * 2
            end = w["end_s"]
        return xs, ys

    def mids(ws: list[dict], key: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
        return ([(w["start_s"] + w["end_s"]) / 2 for w in ws],
                [nan if value(w, key) is None else value(w, key) / scale for w in ws])

    fig = _figure(7.6, 8.4)
    axes = fig.subplots(4, 1, sharex=True, gridspec_kw={"height_ratios": (1.0, 0.9, 1.1, 1.1), "hspace": 0.14})
    rate_ax, state_ax, lat_ax, cost_ax = axes
    baselines = baselines or {}
    handles: list[list] = [[], [], [], []]

    # (1) request rate
    if trace:
        rate_ax.plot([p[0] for p in trace], [p[1] for p in trace], color="#adb5bd", linestyle=":", linewidth=1.0)
        handles[0].append(Line2D([], [], color="#adb5bd", linestyle=":", label="trace (as replayed)"))
    for key, colour, label in (("rate_offered", PALETTE[0], "offered"), ("rate_observed", PALETTE[1], "observed")):
        rate_ax.plot(*steps(windows, lambda w, k=key: value(w, k)), color=colour, linewidth=1.4)
        handles[0].append(Line2D([], [], color=colour, label=label))
    rate_ax.set_ylabel("requests/s", fontsize=8)
    rate_ax.set_ylim(bottom=0)

    # (2) the state in force
    where = {s: i for i, s in enumerate(states)}
    state_ax.plot(*steps(windows, lambda w: where.get(w.get("state"))), color=PALETTE[3], linewidth=2.0)
    state_ax.set_yticks(range(len(states)), [_t(s) for s in states])
    state_ax.set_ylim(-0.6, max(len(states), 1) - 0.4)
    state_ax.set_ylabel("state", fontsize=8)
    handles[1].append(Line2D([], [], color=PALETTE[3], linewidth=2.0, label="state in force"))

    # (3) p95 latency per window against the SLO
    lat_values = [v for w in windows for v in (value(w, "p95_latency"), *(w.get("p95_ci") or ())) if v is not None]
    scale, unit = axis_scale("second", lat_values + ([slo] if slo else []))
    xs, ys = mids(windows, "p95_latency", scale)
    lat_ax.plot(xs, ys, color="#868e96", linewidth=0.8)
    for w, x, y in zip(windows, xs, ys, strict=True):
        ci = w.get("p95_ci")
        if ci and not math.isnan(y) and all(isinstance(c, (int, float)) for c in ci):
            lat_ax.errorbar([x], [y], yerr=[[max(y - ci[0] / scale, 0)], [max(ci[1] / scale - y, 0)]], fmt="none",
                            ecolor="#adb5bd", elinewidth=0.9, capsize=2)
    verdict_colours = {"PASS": PALETTE[2], "FAIL": "#c92a2a", "INCONCLUSIVE": "#868e96"}
    for verdict, marker in VERDICT_MARKERS.items():
        chosen = [(x, y) for w, x, y in zip(windows, xs, ys, strict=True)
                  if w.get("verdict") == verdict and not math.isnan(y)]
        if chosen:
            lat_ax.plot([c[0] for c in chosen], [c[1] for c in chosen], marker=marker, linestyle="none",
                        color=verdict_colours[verdict], markersize=5.5)
            handles[2].append(Line2D([], [], marker=marker, linestyle="none", color=verdict_colours[verdict],
                                     label=f"window {verdict}"))
    if slo is not None:
        lat_ax.axhline(slo / scale, color="#c92a2a", linestyle="--", linewidth=1.2)
        handles[2].append(Line2D([], [], color="#c92a2a", linestyle="--", label=_t(f"SLO {slo / scale:.4g} {unit}")))
    if _log_wanted(lat_values + ([slo] if slo else [])):
        lat_ax.set_yscale("log")
        _plain_log(lat_ax.yaxis)
    else:
        lat_ax.set_ylim(bottom=0)
    lat_ax.set_ylabel(_t(f"p95 latency ({unit})"), fontsize=8)

    # (4) cost per accepted output: tiny figures, so one power of ten (a multiple of 3) on the axis
    series = {"pilot": windows, **baselines}
    costs = [value(w, "cost_per_accepted") for ws in series.values() for w in ws]
    top = max((abs(c) for c in costs if c is not None), default=0.0)
    exp = 3 * math.floor(math.log10(top) / 3) if top and top < 0.01 else 0
    factor = 10.0 ** exp
    for i, (name, ws) in enumerate(series.items()):
        dashed = i > 0  # the baselines: dashed, in colours of their own
        colour = PALETTE[1 + (i - 1) % (len(PALETTE) - 1)] if dashed else PALETTE[0]
        cost_ax.plot(*mids(ws, "cost_per_accepted", factor), color=colour, linestyle="--" if dashed else "-",
                     linewidth=1.2 if dashed else 1.6, marker=None if dashed else "o", markersize=3)
        handles[3].append(Line2D([], [], color=colour, linestyle="--" if dashed else "-", label=_t(name)))
    scaled = [c / factor for c in costs if c is not None]
    if _log_wanted(scaled):
        cost_ax.set_yscale("log")
        _plain_log(cost_ax.yaxis)
    else:
        cost_ax.set_ylim(bottom=0)
        cost_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    unit_text = " ".join(x for x in (f"×1e{exp}" if exp else "", currency) if x)
    cost_ax.set_ylabel(_t(f"cost per accepted ({unit_text})" if unit_text else "cost per accepted"), fontsize=8)

    # shading and events across every panel
    shaded = [w for w in windows if w.get("verification")]
    event_style = {"switch": ("#1f5fa8", "-."), "rollback": ("#d9730d", "-"), "breach": ("#c92a2a", ":")}
    kinds = sorted({k if k in event_style else "other" for _, k in events})
    for ax in axes:
        for w in shaded:
            ax.axvspan(w["start_s"], w["end_s"], color="#ffe8a1", alpha=0.7, linewidth=0, zorder=0)
        for t, kind in events:
            colour, style = event_style.get(kind, ("#868e96", "--"))
            ax.axvline(t, color=colour, linestyle=style, linewidth=1.0, alpha=0.85)
        ax.grid(axis="y", color="#e9ecef")
        ax.tick_params(labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if shaded:
        handles[1].append(Patch(color="#ffe8a1", label="verification window"))
    for kind in kinds:
        colour, style = event_style.get(kind, ("#868e96", "--"))
        handles[1].append(Line2D([], [], color=colour, linestyle=style, label=kind))
    for ax, hs in zip(axes, handles, strict=True):
        if hs:
            ax.legend(handles=hs, fontsize=7.5, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
    if not windows:
        rate_ax.text(0.5, 0.5, "no window recorded", ha="center", va="center", transform=rate_ax.transAxes,
                     fontsize=9, color="#555555")
    ends = [w["end_s"] for ws in series.values() for w in ws] + [p[0] for p in trace]
    cost_ax.set_xlim(0, max(ends, default=1.0) or 1.0)
    cost_ax.set_xlabel("trace time (s)")
    rate_ax.set_title(_t(title), fontsize=10)
    return _svg(fig, plot_id)
