"""`luma pilot`: the Economic Control Pilot — the qualified-state library of a contract, and a
live service run inside it under a workload trace (docs/pilot.md)."""

from __future__ import annotations

import json

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.project import READ, WRITE, project, settings
from luma.experiments.pilot import energy, library as lib, run as pilot_run
from luma.experiments.pilot.resume import conflicts, prepare_resume
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint.records import architecture
from luma.experiments import prices as prices_mod


def _money(x, currency: str = "") -> str:
    return "-" if x is None else f"{x:.3g} {currency}".strip()


@click.command("library")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--price-table", "price_path", type=click.Path(dir_okay=False), default=None,
              help="Price table (TOML) that prices each state (default: the contract's, else the shipped example).")
@format_option()
@project(READ)
def library_cmd(contract_ref: str, price_path: str | None, fmt: str) -> None:
    """The states a pilot of CONTRACT may apply: attested, measured, non-stale, on this machine."""
    s = settings()
    c = contract_mod.load(contract_ref, s)
    spec = c.pilot or contract_mod.PilotSpec()
    table = prices_mod.load(price_path or spec.price_table, s)
    states, notes = lib.build(s, c, table)
    power = energy.host_model(architecture()["name"])
    slo = next((c.threshold(x) for x in c.clauses if x.metric.endswith("latency") and x.metric.startswith("p")), None)
    rows = []
    for st in states:
        rows.append({"key": st.key, "state": st.label(), "capacity": round(st.capacity, 2),
                     "p95_latency_ms": None if st.p95_latency is None else round(st.p95_latency * 1000, 1),
                     "latency_margin": None if not (slo and st.p95_latency) else round(1 - st.p95_latency / slo, 3),
                     "quality": st.quality, "cost_per_hour": st.cost_per_hour, "currency": st.currency,
                     "cost_per_accepted": st.cost_per_hour / 3600 / st.capacity if st.cost_per_hour else None,
                     "energy_per_accepted_j": power.joules(st.cores, st.cores, 1.0) / st.capacity,
                     "energy_class": "simulated" if energy.counters()[0] is None else "measured",
                     "trials": st.trials, "sources": ", ".join(st.sources)})
    if fmt != "table":
        print_rows(rows, list(rows[0]) if rows else ["key"], fmt)
    elif rows:
        print_rows([{**r, "cost_per_accepted": _money(r["cost_per_accepted"], r["currency"]),
                     "energy_per_accepted_j": f"{r['energy_per_accepted_j']:.3g} (simulated)"
                     if r["energy_class"] == "simulated" else f"{r['energy_per_accepted_j']:.3g}"} for r in rows],
                   ["key", "state", "capacity", "p95_latency_ms", "latency_margin", "cost_per_accepted",
                    "energy_per_accepted_j", "trials"], "table",
                   title=f"Qualified-state library of {c.name} (capacity: accepted requests/s, measured)")
        click.echo(f"prices: {table.title}" + (" — EXAMPLE figures, not quotes" if table.example else ""))
        click.echo(f"energy: {power.describe() if energy.counters()[0] is None else energy.counters()[1]}; "
                   f"counters: {energy.counters()[1]}")
    for n in notes:
        click.echo(n, err=True)
    if not rows:
        raise lib.empty_library(c.name, contract_ref, notes, listed=True)


@click.command("run")
@click.argument("contract_ref", metavar="CONTRACT", required=False)
@click.option("--trace", "trace_ref", help="Workload trace: a shipped name (diurnal, step-burst) or a CSV file.")
@click.option("--duration", type=float, help="Replay the trace over this many seconds (default: its own length).")
@click.option("--rate-scale", type=float, default=1.0, show_default=True, help="Multiply the trace's rates.")
@click.option("--window", "window_s", type=float, help="Control window in seconds (default: the contract's).")
@click.option("--price-table", "price_path", type=click.Path(dir_okay=False), help="Price table (TOML).")
@click.option("--margin", type=float, help="Safety margin on predicted capacity and latency, one for every state (default: the "
              "contract's, else each state's measured margin).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the trace's arrivals.")
@click.option("--baselines/--no-baselines", default=True, show_default=True,
              help="Replay the trace on the static largest state and the hindsight-best state after the pilot.")
@click.option("--record/--no-record", default=True, show_default=True, help="Sign and ingest decision records.")
@click.option("--resume", "resume_id", metavar="RUN", help="Continue a killed run from its journal and ledger.")
@format_option(choices=("table", "json"))
@project(WRITE)
def run_cmd(contract_ref, trace_ref, duration, rate_scale, window_s, price_path, margin, seed, baselines, record,
            resume_id, fmt) -> None:
    """Serve CONTRACT's service under a trace, switching among qualified states to cut cost."""

    s = settings()
    err = console(stderr=True)
    if resume_id:
        ctx = prepare_resume(s, resume_id)
        cli_ctx = click.get_current_context()
        given = {n: v for n, v in cli_ctx.params.items()
                 if cli_ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
        if bad := conflicts(ctx, given):
            flags = [next(p for p in cli_ctx.command.params if p.name == n) for n in bad]
            raise click.UsageError(f"--resume continues {resume_id} with the options it started with: drop "
                                   + ", ".join(p.secondary_opts[0] if p.secondary_opts and given[p.name] is False
                                               else (p.opts[0] if p.param_type_name == "option" else p.metavar)
                                               for p in flags))
        baselines, record = ctx.baselines, ctx.record
    else:
        if not contract_ref:
            raise click.UsageError("give CONTRACT (or --resume RUN)")
        ctx = pilot_run.prepare(s, contract_ref, trace_ref=trace_ref, duration=duration, rate_scale=rate_scale,
                                window_s=window_s, price_path=price_path, seed=seed, margin=margin)
    err.print(f"pilot {ctx.run_id}: {ctx.contract.name} over trace {ctx.trace.name} ({ctx.trace.duration:.0f} s, "
              f"{ctx.n_windows} windows of {ctx.window_s:g} s), library of {len(ctx.library)} state(s)")
    err.print(f"energy: {ctx.energy_how if ctx.energy_class == 'simulated' else ctx.counters}; counters: {ctx.counters}")

    def progress(seg: str, w: int, fig: dict) -> None:
        label = ctx.library_state(fig["state"]).label()
        p95 = "-" if fig.get("p95_latency") is None else f"{fig['p95_latency'] * 1000:.0f} ms"
        err.print(f"  {seg:15s} window {w + 1:3d}/{ctx.n_windows} {fig['rate_observed']:7.1f}/s  {label:40s} "
                  f"p95 {p95:>7s}  {fig['verdict']:12s}" + (f"  {fig['event']}" if fig.get("event") else "")
                  + ("  (verification)" if fig.get("verification") else ""))

    summary = pilot_run.run(ctx, s, record=record, baselines=baselines, progress=progress, resume=bool(resume_id))
    if fmt == "json":
        click.echo(json.dumps({"run": summary["run"], "figures": summary["figures"],
                               "folder": str(pilot_run.folder_of(s, ctx.run_id))}, indent=2))
        return
    _print_summary(summary, ctx.currency)
    click.echo(f"run folder: {pilot_run.folder_of(s, ctx.run_id)}; report: luma report pilot {ctx.run_id}")


def _print_summary(summary: dict, currency: str) -> None:
    rows = []
    for seg in summary["segments"]:
        t = seg["totals"]
        cpa, epa = t.get("cost_per_accepted") or {}, t.get("energy_per_accepted") or {}
        rows.append({"segment": seg["name"], "requests": t["requests"], "accepted": t["accepted"],
                     "outside_contract": f"{t['outside_share']:.2%}",
                     "cost_per_accepted": "-" if not cpa else
                     f"{cpa['value']:.3g} [{cpa['ci_low']:.3g}, {cpa['ci_high']:.3g}] {currency} (projected)",
                     "energy_per_accepted": "-" if not epa else
                     f"{epa['value']:.3g} [{epa['ci_low']:.3g}, {epa['ci_high']:.3g}] J "
                     f"({summary['energy']['evidence_class']})"})
    print_rows(rows, ["segment", "requests", "accepted", "outside_contract", "cost_per_accepted",
                      "energy_per_accepted"], "table", title=f"Pilot {summary['run']}: realized value")
    f = summary["figures"]
    if "saving_vs_static" in f:
        click.echo(f"cost per accepted output vs static largest state: {f['saving_vs_static']:+.1%} saving")
    click.echo(f"requests outside the contract (outside verification windows): {f.get('outside_share', 0):.2%}")
    if "vs_hindsight" in f:
        click.echo(f"cost per accepted output vs hindsight-best state: {f['vs_hindsight']:+.1%}")
    click.echo(f"decisions: {f.get('downscales', 0)} downscale(s), {f.get('upscales', 0)} upscale(s), "
               f"{f.get('rollbacks', 0)} rollback(s)")
