"""`luma model`: the analytical model — predict one state, explore a space, calibrate on this host."""

from __future__ import annotations

import json
import math

import click

from luma.cli.output import format_option, print_rows


@click.group()
def model() -> None:
    """Predict PASS/FAIL and binding resources analytically; explore state spaces (simulated or
    projected evidence: it narrows the search, PEX trials qualify)."""


def _contract(ref: str):
    """A contract by path, shipped name, or one of the model's own contracts (e.g. llm-chat)."""
    import importlib.resources
    from pathlib import Path

    from luma.errors import ConfigError
    from luma.experiments import contract

    try:
        return contract.load(ref)
    except ConfigError:
        own = Path(str(importlib.resources.files("luma.experiments.model.contracts") / f"{ref}.toml"))
        if own.is_file():
            return contract.load(own)
        raise


def _calibration():
    from luma.experiments.model import calibrate
    from luma.settings import Settings

    return calibrate.load(Settings.from_env().home)


def _fmt(value, unit: str) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if unit == "B":
        return f"{value / 2**20:,.1f} MiB" if value < 2**30 else f"{value / 1e9:,.1f} GB"
    if unit == "s":
        return f"{value * 1e3:,.2f} ms" if value < 10 else f"{value:,.1f} s"
    return (f"{value:,.0f} {unit}" if abs(value) >= 1e4 else f"{value:,.4g} {unit}").strip()


@model.command("predict")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--state", "state_text", help="Machine state over the contract's, e.g. 'host_memory=512 MiB,compute=1 core' "
              "(an LLM: 'accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8').")
@click.option("--llm", "llm_ref", help="Serve this LLM (preset such as llama-2-70b, or a config.json path) instead "
              "of the contract's own service.")
@click.option("--space", "space_ref", help="A space file whose machines, prices and quality table to use.")
@format_option(choices=("table", "json"))
def predict_cmd(contract_ref, state_text, llm_ref, space_ref, fmt) -> None:
    """Predict PASS/FAIL per clause of CONTRACT on one machine state, and the binding resource."""
    from luma.cli.states import parse_state
    from luma.experiments.model import predict, space

    levels = parse_state(state_text)
    c = _contract(contract_ref)
    base = space.load(space_ref, c) if space_ref else None
    p = predict.predict(c, space.from_state(levels, c, llm_ref, base), _calibration())
    if fmt == "json":
        click.echo(json.dumps(p.as_dict(), indent=2, default=str))
        return
    rows = [{"check": r["check"], "op": r["op"],
             "predicted": f"{r['predicted']:g} sequences" if r["check"] == "kv_cache" else _fmt(r["predicted"], r["unit"]),
             "threshold": "1 sequence" if r["check"] == "kv_cache" else _fmt(r["threshold"], r["unit"]),
             "margin": "n/a" if math.isnan(r["margin"]) else f"{r['margin']:+.1%}", "verdict": r["verdict"],
             "resource": r["resource"]} for r in p.clauses]
    state = ", ".join(f"{k}={v}" for k, v in p.state.items()) or "the contract's state"
    print_rows(rows, ["check", "op", "predicted", "threshold", "margin", "verdict", "resource"], "table",
               title=f"{p.contract} on {state}")
    f = p.figures
    click.echo(f"verdict: {p.verdict}" + (f"; binding resource: {p.binding}" if p.binding else
                                          f"; tightest resource: {p.tightest}"))
    shown = [(k, u) for k, u in (("memory_need", "B"), ("peak_rss", "B"), ("latency", "s"), ("ttft", "s"),
                                 ("tpot", "s"), ("throughput", "1/s"), ("energy_per_token", "J")) if k in f]
    click.echo("p50 figures: " + ", ".join(f"{k} {_fmt(f[k], u)}" for k, u in shown))
    errs = ", ".join(f"{k} {v:.0%}" for k, v in p.errors.items())
    click.echo(f"evidence: {p.evidence_class}" + (f"; calibrated error (held out, max): {errs}" if errs else ""))
    for note in p.notes:
        click.echo(f"note: {note}")


@model.command("explore")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--space", "space_ref", required=True, help="SPACE.toml, or a shipped space's name (e.g. llm-70b).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write the frontier plot (SVG/PNG/PDF).")
@click.option("--propose", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="How many states to propose for physical trials.")
@format_option(choices=("table", "json"))
def explore_cmd(contract_ref, space_ref, plot_path, propose, fmt) -> None:
    """Sweep a state space: the minimum-cost PASS frontier, the binding resource per region and
    the states a PEX sprint should measure."""
    from luma.experiments.model import plot, simulate, space

    c = _contract(contract_ref)
    sp = space.load(space_ref, c)
    out = simulate.explore(c, sp, _calibration(), propose=propose)
    if plot_path:
        out["plot"] = str(plot.frontier(out, plot_path))
    if fmt == "json":
        click.echo(json.dumps(out, indent=2, default=str))
        return
    demand = out["demand_axes"]
    rows = [{**r["demand"], "state": _state(r.get("state")), "cost": r.get("cost"),
             "margin": f"{r['margin']:+.1%}" if "margin" in r else "", "tightest": r.get("resource", "-")}
            for r in out["frontier"]]
    print_rows(rows, [*demand, "state", "cost", "margin", "tightest"], "table",
               title=f"minimum-cost PASS frontier ({out['cost_unit']}; {out['evidence_class']})")
    reg = [{**r["region"], "states": r["states"], "pass": r["pass"], "binding": r["binding"] or "-",
            "fail bindings": ", ".join(f"{k} {v}" for k, v in r["fail_bindings"].items())} for r in out["regions"]]
    print_rows(reg, [*(out["regions"][0]["region"] if out["regions"] else []), "states", "pass", "binding",
                     "fail bindings"], "table", title="binding resource per region (FAIL states)")
    prop = [{"state": _state(p["state"]), "predicted": p["verdict"], "margin": f"{p['margin']:+.1%}",
             "resource": p["resource"], "why": p["reason"]} for p in out["proposals"]]
    print_rows(prop, ["state", "predicted", "margin", "resource", "why"], "table", title="proposed PEX states")
    click.echo(f"{out['states']:,} states in {out['seconds']:.3f} s: {out['states_per_second']:,} states/s; "
               f"{out['pass_states']:,} predicted PASS" + (f"; plot: {out['plot']}" if plot_path else ""))


_SHORT = {"accelerator_type": "", "precision": "", "variant": "", "accelerator_count": "x", "concurrency": "conc=",
          "context": "ctx=", "max_new_tokens": "new=", "host_memory": "mem=", "compute": "cores=", "max_batch": "batch=",
          "hbm_capacity": "hbm=", "memory_bandwidth": "bw=", "interconnect": "link=", "kv_cache": "kv="}


def _state(state: dict | None) -> str:
    """A state compactly: 'nvidia-h100-sxm5-80gb x4 fp8 conc=32'."""
    if not state:
        return "none passes"
    return " ".join(f"{_SHORT.get(k, k + '=')}{v}" for k, v in state.items())


@model.command("calibrate")
@click.argument("contract_refs", metavar="[CONTRACT]...", nargs=-1)
@click.option("--repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Rounds of the design (each point's figures are the median of its rounds).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the error figures into the KB (evidence class simulated).")
@format_option(choices=("table", "json"))
def calibrate_cmd(contract_refs, repeats, record, fmt) -> None:
    """Measure a short design of trials per contract (default: every shipped contract), fit the
    model's efficiency figures, and report its error per metric."""
    import numpy as np
    from rich.console import Console

    from luma.experiments import contract
    from luma.experiments.model import calibrate, facts
    from luma.settings import Settings

    home = Settings.from_env().home
    contracts = [_contract(r) for r in contract_refs] or [contract.load(p) for _, p in sorted(contract.shipped().items())]
    err = Console(stderr=True)
    with err.status("calibrating") as status:
        cal = calibrate.calibrate(contracts, home, repeats=repeats,
                                  progress=lambda m: (status.update(m), err.print(f"  {m}", soft_wrap=True)))
    cal["ledger_check"] = facts.ledger_check(home, cal)
    if record:
        cal["facts"] = str(facts.record(home, cal))
    if fmt == "json":
        click.echo(json.dumps({k: v for k, v in cal.items() if k != "trials"}, indent=2))
        return
    rows = [{"contract": c, "metric": m, "trials": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}",
             "held-out median": _pct(e.get("held_out_median")), "held-out max": _pct(e.get("held_out_max")),
             "at contract load": _pct(e.get("contract_load_max"))}
            for c, ms in cal["errors"].items() for m, e in ms.items()]
    print_rows(rows, ["contract", "metric", "trials", "median", "max", "held-out median", "held-out max",
                      "at contract load"], "table",
               title="model error (relative, |predicted - measured| / measured)")
    val = [{"contract": c, "metric": m, "trials": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}"}
           for c, ms in cal["validation"].items() for m, e in ms.items()]
    if val:
        print_rows(val, ["contract", "metric", "trials", "median", "max"], "table",
                   title=f"the previous calibration ({cal['previous']}) on these new trials")
    spread = [r["p50_latency_spread"] for r in cal["trials"] if r.get("p50_latency_spread") is not None]
    if spread:
        click.echo(f"p50 latency spread between rounds of the same trial: median {np.median(spread):.0%}, "
                   f"max {max(spread):.0%} (the host's own noise)")
    for service, m in (cal.get("limit_margins") or {}).items():
        click.echo(f"{service}: a memory limit needs {m['bytes'] / 2**20:.2f} MiB beyond the predicted peak "
                   f"(fitted to {m['trials']} sprint trials in the ledger)")
    for r in cal["ledger_check"]:
        click.echo(f"{r['contract']}: the model reproduces {r['agree']} of {r['trials']} sprint verdicts in the ledger")
    click.echo(f"calibration: {calibrate.path(home)}" + (f"; facts: {cal['facts']}" if record else ""))


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


@model.command("bench")
@click.argument("contract_ref", metavar="CONTRACT", default="llm-chat")
@click.option("--space", "space_ref", default="llm-70b-whatif", show_default=True, help="The space to evaluate.")
@format_option(choices=("table", "json"))
def bench_cmd(contract_ref, space_ref, fmt) -> None:
    """States per second of the model over a space (evaluation and verdicts, best of 3)."""
    from luma.experiments.model import simulate, space

    c = _contract(contract_ref)
    out = simulate.bench(c, space.load(space_ref, c), _calibration())
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['space']}: {out['states']:,} states in {out['seconds']:.3f} s = {out['states_per_second']:,} states/s")
