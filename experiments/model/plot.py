"""The frontier plot of `luma model explore --plot FILE.svg`: minimum PASS cost per demand point,
one line per level of the second demand axis, markers by the frontier state's accelerator type
(or variant). matplotlib with the Agg backend: no display needed."""

from __future__ import annotations

from pathlib import Path

_MARKERS = "osD^vP*Xh<>"


def frontier(result: dict, path: str | Path, max_lines: int = 10) -> Path:
    import matplotlib.pyplot as plt

    fig = figure(result, max_lines)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def figure(result: dict, max_lines: int = 10):
    """The frontier figure. A demand point where no state passes has no cost: its line breaks
    there (drawn as missing, never joined across it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    demand = result["demand_axes"]
    rows = [r for r in result["frontier"] if r.get("state")]
    fig, ax = plt.subplots(figsize=(8, 5))
    if not demand or not rows:
        ax.text(0.5, 0.5, "no PASS state in the space" if not rows else "the space has no demand axis",
                ha="center", va="center", transform=ax.transAxes)
    else:
        x_axis, rest = demand[0], demand[1:]
        kind = next((k for k in ("accelerator_type", "variant", "precision") if k in rows[0]["state"]), None)
        kinds = sorted({r["state"].get(kind) for r in rows}) if kind else [None]
        lines: dict[tuple, list] = {}
        for r in result["frontier"]:
            lines.setdefault(tuple(r["demand"][k] for k in rest), []).append(r)
        for key, pts in [(k, v) for k, v in lines.items() if any(r.get("state") for r in v)][:max_lines]:
            pts.sort(key=lambda r: _num(r["demand"][x_axis]))
            xs = [_num(r["demand"][x_axis]) for r in pts]
            ys = [r["cost"] if r.get("state") else float("nan") for r in pts]
            label = ", ".join(f"{k}={v}" for k, v in zip(rest, key)) or "frontier"
            (line,) = ax.plot(xs, ys, "-", alpha=0.6, label=label)
            for r, x, y in zip(pts, xs, ys):
                if not r.get("state"):
                    continue
                m = _MARKERS[kinds.index(r["state"].get(kind)) % len(_MARKERS)] if kind else "o"
                ax.plot([x], [y], m, color=line.get_color())
        if kind:
            for k in kinds:
                ax.plot([], [], _MARKERS[kinds.index(k) % len(_MARKERS)], color="black", label=f"{kind}: {k}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(x_axis)
        ax.set_ylabel(f"minimum PASS cost ({result['cost_unit']})")
        ax.legend(fontsize=7, loc="best")
    ax.set_title(f"{result['contract']} over {result['space']} ({result['evidence_class']}, "
                 f"{result['states']:,} states)", fontsize=9)
    fig.tight_layout()
    return fig


def _num(label: str) -> float:
    try:
        return float(str(label).split()[0])
    except ValueError:
        return 0.0
