"""`luma model`: the analytical model — predict one state, explore a space, calibrate on this host."""

from __future__ import annotations

import json
import math

import click

from luma.cli.output import format_option, print_rows
from luma.cli.model_record import record_explored, record_option, record_predictions, recorded_line
from luma.cli.project import NONE, WRITE, project


@click.group()
def model() -> None:
    """Predict PASS/FAIL and binding resources analytically; explore state spaces (simulated or
    projected evidence: it narrows the search, PEX trials qualify)."""


def _contract(ref: str):
    """A contract by path, shipped name, or one of the model's own contracts (e.g. llm-chat)."""
    import importlib.resources
    from pathlib import Path

    from luma.cli.project import settings
    from luma.errors import ConfigError
    from luma.experiments.sprint import contract

    own = {p.name[:-5]: Path(str(p)) for p in importlib.resources.files("luma.experiments.model.contracts").iterdir()
           if p.name.endswith(".toml")}
    try:
        return contract.load(ref, settings())
    except ConfigError as exc:
        if ref in own:
            return contract.load(own[ref], settings())
        if Path(ref).exists() or "(shipped:" not in exc.message:
            raise  # a file that is there but wrong: its own error
        names = sorted({*contract.shipped(), *own})
        raise ConfigError(f"no contract file or shipped contract named {ref!r} (known: {', '.join(names)})",
                          source=ref) from None


def _calibration():
    """This host's calibration, with the project's own LLM calibration when it has one."""
    from luma.experiments.model import calibrate, llm_calibrate
    from luma.cli.project import settings as command_settings

    home = command_settings().home
    cal = calibrate.load(home) or {}
    if llm_calibrate.path(home).is_file():
        cal = {**cal, "llm": llm_calibrate.current(home)}
    return cal or None


def _fmt(value, unit: str) -> str:
    """A model figure in the reports' units: memory in binary units (GiB), time in s/ms/µs."""
    from luma.reports.fmt import binary_text, num, seconds_text

    if value is None or math.isnan(value):
        return "n/a"
    if unit == "B":
        return binary_text(value)
    if unit == "s":
        return seconds_text(value)
    return f"{num(value, 4)} {unit}".strip()


@model.command("predict")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--state", "state_text", help="Machine state over the contract's, e.g. 'host_memory=512 MiB,compute=1 core' "
              "(an LLM: 'accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8').")
@click.option("--llm", "llm_ref", help="Serve this LLM (preset such as llama-2-70b, or a config.json path) instead "
              "of the contract's own service.")
@click.option("--space", "space_ref", help="A space file whose machines, prices and quality table to use.")
@record_option
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def predict_cmd(contract_ref, state_text, llm_ref, space_ref, record, fmt) -> None:
    """Predict PASS/FAIL per clause of CONTRACT on one machine state, and the binding resource."""
    from luma.cli.project import settings
    from luma.cli.states import parse_state
    from luma.experiments.model import predict, space

    levels = parse_state(state_text)
    c = _contract(contract_ref)
    base = space.load(space_ref, c, project=settings()) if space_ref else None
    one = space.from_state(levels, c, llm_ref, base, settings())
    p = predict.predict(c, one, _calibration())
    recorded = record_predictions("luma model predict", c, [(p, "state")], one, space_ref) if record else None
    if fmt == "json":
        click.echo(json.dumps({**p.as_dict(), **({"recorded": recorded} if recorded else {})}, indent=2, default=str))
        return
    f = p.figures
    llm = "kv_per_device" in f
    memory_check = "memory per device, 1 sequence" if llm else "memory beyond the runtime"
    rows = [{"check": memory_check if r["check"] == "memory" else r["check"], "op": r["op"],
             "predicted": f"{r['predicted']:g} sequences" if r["check"] == "kv_cache" else _fmt(r["predicted"], r["unit"]),
             "threshold": "1 sequence" if r["check"] == "kv_cache" else _fmt(r["threshold"], r["unit"]),
             "margin": "n/a" if math.isnan(r["margin"]) else f"{r['margin']:+.1%}", "verdict": r["verdict"],
             "resource": r["resource"]} for r in p.clauses]
    state = ", ".join(f"{k}={v}" for k, v in p.state.items()) or "the contract's state"
    print_rows(rows, ["check", "op", "predicted", "threshold", "margin", "verdict", "resource"], "table",
               title=f"{p.contract} on {state}")
    click.echo(f"verdict: {p.verdict}" + (f"; binding resource: {p.binding}" if p.binding else
                                          f"; tightest resource: {p.tightest}"))
    click.echo(_memory_line(f, llm))
    shown = [(k, u) for k, u in (("latency", "s"), ("ttft", "s"), ("tpot", "s"), ("throughput", "1/s"),
                                 ("energy_per_token", "J")) if k in f]
    click.echo("p50 figures: " + ", ".join(f"{k} {_fmt(f[k], u)}" for k, u in shown))
    errs = ", ".join(f"{k} {v:.0%}" for k, v in p.errors.items())
    which = "held-out published measurements, p90" if p.error_detail else "held out, max"
    click.echo(f"evidence: {p.evidence_class}" + (f"; calibrated error ({which}): {errs}" if errs else ""))
    for note in p.notes:
        click.echo(f"note: {note}")
    recorded_line(recorded)


def _memory_line(f: dict, llm: bool) -> str:
    """The state's memory figures, each named for what it is (the check above is the first)."""
    if llm:
        cap = f.get("memory_capacity")
        return (f"memory per device: {_fmt(f.get('memory_min'), 'B')} with one sequence (the memory check), "
                f"{_fmt(f.get('memory_need'), 'B')} with every sequence of the load resident"
                + (f"; capacity {_fmt(cap, 'B')}" if cap is not None and math.isfinite(cap) else "")
                + (" (the rest wait for KV room)" if cap is not None and f.get("memory_need", 0) > cap else ""))
    return (f"memory: {_fmt(f.get('memory_need'), 'B')} beyond the runtime's own footprint (the memory check, "
            f"against the host_memory budget); peak RSS with the runtime: {_fmt(f.get('peak_rss'), 'B')}")


@model.command("explore")
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
    from luma.cli.project import settings
    from luma.experiments.model import plot, simulate, space

    c = _contract(contract_ref)
    sp = space.load(space_ref, c, project=settings())
    out = simulate.explore(c, sp, _calibration(), propose=propose)
    if plot_path:
        out["plot"] = str(plot.frontier(out, plot_path))
    if record:
        out["recorded"] = record_explored(c, sp, space_ref, out)
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


@model.command("calibrate")
@click.argument("contract_refs", metavar="[CONTRACT]...", nargs=-1)
@click.option("--repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Rounds of the design (each point's figures are the median of its rounds).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the error figures into the KB (evidence class simulated).")
@click.option("--llm", "llm_mode", is_flag=True,
              help="Calibrate the LLM serving model on published measurements instead (no trials run here).")
@click.option("--published", type=click.Path(exists=True, dir_okay=False),
              help="With --llm: a file of your own published figures (the format of "
                   "experiments/model/published/llm-serving.json) to add.")
@format_option(choices=("table", "json"))
@project(WRITE)
def calibrate_cmd(contract_refs, repeats, record, llm_mode, published, fmt) -> None:
    """Measure a short design of trials per contract (default: every shipped contract), fit the
    model's efficiency figures, and report its error per metric. With --llm: fit the LLM serving
    model to published measurements and report its error on the held-out ones."""
    if llm_mode or published:
        if contract_refs:
            raise click.UsageError("--llm calibrates on published measurements; it takes no CONTRACT")
        from luma.cli.model_llm import calibrate_llm

        calibrate_llm(published, record, fmt)
        return
    import numpy as np
    from rich.console import Console

    from luma.experiments.sprint import contract
    from luma.experiments.model import calibrate, facts
    from luma.cli.project import settings as command_settings

    project = command_settings()
    home = project.home
    # The analytical model describes the in-process services; an endpoint's engine is not one of them.
    contracts = [_contract(r) for r in contract_refs] or [c for _, p in sorted(contract.shipped().items())
                                                          if (c := contract.load(p)).endpoint is None]
    from luma.cli.sprint import import_service

    for c in contracts:
        import_service(c)  # the trials run the services in child processes: a missing extra is one line here
    from luma.cli.sprint import _trials
    from luma.experiments.model import trials

    # The host's figures first (one step), then every design point of every contract per round.
    expected = 1 + repeats * sum(len(trials.design(c)) for c in contracts)
    with _trials("model calibrate", expected, Console(stderr=True)) as progress:
        progress("measuring the host")
        cal = calibrate.calibrate(contracts, project, repeats=repeats,
                                  progress=lambda m: progress(f"host measured -> {m[6:]}" if m.startswith("host: ") else m))
    cal["ledger_check"] = facts.ledger_check(project, cal)
    if record:
        cal["facts"] = str(facts.record(project, cal))
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


@model.command("bench")
@click.argument("contract_ref", metavar="CONTRACT", default="llm-chat")
@click.option("--space", "space_ref", default="llm-70b-whatif", show_default=True, help="The space to evaluate.")
@format_option(choices=("table", "json"))
@project(NONE)
def bench_cmd(contract_ref, space_ref, fmt) -> None:
    """States per second of the model over a space (evaluation and verdicts, best of 3)."""
    from luma.cli.project import settings
    from luma.experiments.model import simulate, space

    c = _contract(contract_ref)
    out = simulate.bench(c, space.load(space_ref, c, project=settings()), _calibration())
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['space']}: {out['states']:,} states in {out['seconds']:.3f} s = {out['states_per_second']:,} states/s")
