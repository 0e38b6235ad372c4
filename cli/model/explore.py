"""`luma model explore`: a state space swept by the model — the minimum-cost PASS frontier, the
binding resource per region and the states a PEX sprint should measure."""

from __future__ import annotations

import json
import math

import click

from luma.cli.model.common import calibration, load_contract
from luma.cli.model.record import record_option, recorded_line
from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings
from luma.experiments.model import plot, simulate, space
from luma.experiments.model.recording import record_explored


@click.command("explore")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--space", "space_ref", required=True, help="SPACE.toml, or a shipped space's name (e.g. llm-70b).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write the frontier plot (SVG/PNG/PDF).")
@click.option("--propose", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="How many states to propose for physical trials.")
@record_option
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def explore_cmd(contract_ref, space_ref, plot_path, propose, record, fmt) -> None:
    """Sweep a state space: the minimum-cost PASS frontier, the binding resource per region and
    the states a PEX sprint should measure."""
    c = load_contract(contract_ref)
    sp = space.load(space_ref, c, project=settings())
    out = simulate.explore(c, sp, calibration(), propose=propose)
    if plot_path:
        out["plot"] = str(plot.frontier(out, plot_path))
    if record:
        out["recorded"] = record_explored(settings(), c, sp, space_ref, out)
    if fmt == "json":
        click.echo(json.dumps(out, indent=2, default=str))
        return
    demand = out["demand_axes"]
    cost = f"cost ({_cost_short(out['cost_unit'])})"
    rows = [{**r["demand"], "state": _state(r.get("state")), cost: r.get("cost"),
             "tightest resource": r.get("resource", "-"), "its margin": _signed(r.get("resource_margin")),
             "closest check": _closest(r)} for r in out["frontier"]]
    print_rows(rows, [*demand, "state", cost, "tightest resource", "its margin", "closest check"], "table",
               title=f"minimum-cost PASS frontier ({out['cost_unit']}; prices: {out.get('cost_source', '?')}; "
                     f"{out['evidence_class']})")
    reg = [{**r["region"], "states": r["states"], "pass": r["pass"], "binding": r["binding"] or "-",
            "fail bindings": ", ".join(f"{k} {v}" for k, v in r["fail_bindings"].items())} for r in out["regions"]]
    print_rows(reg, [*(out["regions"][0]["region"] if out["regions"] else []), "states", "pass", "binding",
                     "fail bindings"], "table", title="binding resource per region (FAIL states)")
    prop = [{"state": _state(p["state"]), "predicted": p["verdict"], "resource": p["resource"],
             "its margin": _signed(p.get("resource_margin")), "closest check": _closest(p), "why": p["reason"]}
            for p in out["proposals"]]
    print_rows(prop, ["state", "predicted", "resource", "its margin", "closest check", "why"], "table",
               title="proposed PEX states")
    if any("host_memory" in (r.get("state") or {}) for r in out["frontier"]):
        click.echo("note: host_memory levels are budgets on top of the runtime's own footprint (as `luma sprint` "
                   "enforces them): a deployment needs the level plus the runtime's footprint")
    click.echo(f"{out['states']:,} states in {out['seconds']:.3f} s: {out['states_per_second']:,} states/s; "
               f"{out['pass_states']:,} predicted PASS" + (f"; plot: {out['plot']}" if plot_path else ""))
    for key in ("error_basis", "error_summary", "error_note"):
        if out.get(key):
            click.echo(f"{'projected: ' if key == 'error_basis' else ''}{out[key]}")
    recorded_line(out.get("recorded"))


_SHORT = {"accelerator_type": "", "precision": "", "variant": "", "accelerator_count": "x", "concurrency": "conc=",
          "context": "ctx=", "max_new_tokens": "new=", "host_memory": "mem=", "compute": "cores=", "max_batch": "batch=",
          "hbm_capacity": "hbm=", "memory_bandwidth": "bw=", "interconnect": "link=", "kv_cache": "kv="}


def _state(state: dict | None) -> str:
    """A state compactly: 'nvidia-h100-sxm5-80gb x4 fp8 conc=32'."""
    if not state:
        return "none passes"
    return " ".join(f"{_SHORT.get(k, k + '=')}{v}" for k, v in state.items())


def _signed(x) -> str:
    """A margin: "+12.3%" (negative: the check fails by that share)."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.1%}"


def _closest(row: dict) -> str:
    """The check with the smallest margin and that margin ("quality +0.5%"): a clause such as
    quality may be the closest call without being the tightest resource."""
    if not row.get("closest_check"):
        return "-"
    return f"{row['closest_check']} {_signed(row.get('closest_margin'))}"


def _cost_short(unit: str) -> str:
    """"USD/h" from "USD per hour"; other units as they are."""
    return unit.replace(" per hour", "/h") if len(unit.split()) == 3 else unit
