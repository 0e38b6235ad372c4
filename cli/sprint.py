"""`luma sprint`: PEX qualification sprints on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, WRITE, project


@click.group()
def sprint() -> None:
    """Qualify resource boundaries with physical trials on this machine."""


def import_service(contract) -> None:
    """Import the contract's service before anything runs: its trials run in child processes,
    where a missing extra (torch for the MiniLM, digits and decoder services) would otherwise
    surface as failed trials, not as one line naming what to install."""
    import importlib

    from luma.experiments.services import SERVICES

    if contract.service in SERVICES:  # an unknown service is the contract loader's error
        importlib.import_module(SERVICES[contract.service].partition(":")[0])


def _levels(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


@sprint.command("contracts")
@format_option(choices=("table", "json"))
@project(NONE)
def contracts_cmd(fmt: str) -> None:
    """List the example contracts shipped with LUMA."""
    from luma.experiments.sprint import contract

    rows = []
    for name, path in sorted(contract.shipped().items()):
        c = contract.load(path)
        rows.append({"name": name, "service": c.service, "dimension": c.sprint.dimension if c.sprint else None,
                     "intervention": c.sprint.intervention if c.sprint else None,
                     "clauses": "; ".join(f"{x.metric} {x.op} {x.value:g} {x.unit}" for x in c.clauses),
                     "description": c.description})
    print_rows(rows, ["name", "service", "dimension", "intervention", "clauses", "description"], fmt,
               title="shipped contracts")


@sprint.command("run")
@click.argument("contract_ref", metavar="[CONTRACT]", required=False)
@click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Run the sprint a frozen experiment matrix describes (`luma partner evaluate --out`, `luma sprint "
                   "plan --out`): its contract, dimension, levels, base state, intervention and repetitions.")
@click.option("--dimension", help="Dimension to sweep (compute, host_memory, kv_cache, runtime).")
@click.option("--levels", help="Comma-separated levels, e.g. '64 MiB,96 MiB,128 MiB' (default: the contract's).")
@click.option("--intervention", help="Intervention to apply at the FAIL level (default: the contract's).")
@click.option("--repetitions", type=click.IntRange(1, 20), help="Trials that must reproduce the minimum PASS.")
@click.option("--start-level", help="A predicted boundary level: bisection probes it (and its neighbour) first.")
@click.option("--model/--no-model", "use_model", default=None,
              help="Start the bisection at the analytical model's predicted boundary (default: on when "
                   "`luma model calibrate` has run; --start-level wins).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest every trial and the chain into the ledger and KB.")
@format_option(choices=("table", "json"))
@project(WRITE)
def run_cmd(contract_ref, matrix_path, dimension, levels, intervention, repetitions, start_level, use_model, record,
            fmt) -> None:
    """Find the minimum PASS and adjacent FAIL along one dimension, diagnose the binding resource,
    recover PASS with an intervention and re-qualify the boundary with it in place (CONTRACT, or
    the frozen experiment matrix of --matrix)."""
    from rich.console import Console

    from luma.experiments.sprint import contract, pex as sprint_mod
    from luma.cli.project import settings as command_settings

    home = command_settings().home
    err = Console(stderr=True)
    if matrix_path is not None:
        from luma.cli.sprint_matrix import matrix_plan

        plan = matrix_plan(matrix_path, contract_ref, record, dimension=dimension, levels=levels,
                           intervention=intervention, repetitions=repetitions, start_level=start_level)
        import_service(plan.contract)
    else:
        if contract_ref is None:
            raise click.UsageError("Missing argument 'CONTRACT' (or give --matrix MATRIX.json)")
        c = contract.load(contract_ref, command_settings())
        import_service(c)
        plan = sprint_mod.plan(c, dimension, _levels(levels), intervention, repetitions, start_level)
    if start_level is None and (matrix_path is None or plan.start is None):
        plan.start = _model_start(plan, home, use_model, err)
    out = execute(plan, command_settings(), record, err)
    if fmt == "json":
        click.echo(json.dumps(out, indent=2, default=str))
        return
    print_rows(out["trials"], ["trial", "phase", "level", "restored", "variant", "verdict", "cause", "peak_rss_mib",
                               "runtime_footprint_mib", "quality", "throughput"], "table",
               title=f"sprint {out['sprint']}: {out['dimension']} over {out['base_state']}")
    print_rows(_boundary_rows(out), ["item", "value"], "table", title="boundary")


def execute(plan, project, record: bool, err) -> dict:
    """Run one sprint of `plan` with its trials on screen, write its records (and ingest them when
    `record`); the sprint's summary with `chain_recorded` and `records_folder`."""
    from luma.experiments.sprint import pex as sprint_mod, summary
    from luma.experiments.sprint.records import Recorder

    sprint_id = plan.new_id()
    recorder = Recorder(project, plan, sprint_id, ingest=record)
    with _trials("sprint run", sprint_trials(plan), err) as progress:
        result = sprint_mod.Sprint(plan, project.home / "artifacts", recorder.trial, progress, sprint_id).run()
    out = summary.summarize(result)
    chain = recorder.finish(result, out)
    out["chain_recorded"] = chain is not None and record
    out["records_folder"] = str(recorder.folder)
    return out


def _trials(title: str, expected: int, console):
    """The progress line of a command that runs physical trials: a message with `->` is a
    trial's verdict (kept on screen), any other says what runs."""
    from luma.cli.progress import Tracker

    class Trials(Tracker):
        def __call__(self, message: str) -> None:
            super().__call__(message)
            if "->" in str(message):
                self.log(f"  {message}")

    return Trials(title, [("trial", 1.0)] * max(expected, 1), unit="trial", ends=lambda m: "->" in str(m),
                  console=console)


def sprint_trials(plan) -> int:
    """At most how many trials the sprint of `plan` runs (`sprint.max_trials`)."""
    from luma.experiments.sprint.pex import max_trials

    return max_trials(len(plan.levels), plan.repetitions, max(len(plan.state(0).levels) - 1, 0),
                      plan.variant is not None)


def _restorations(diagnosis: dict) -> str:
    parts = []
    for r in diagnosis.get("restorations", [])[1:]:
        if r["verdict"] == "not-tested":
            parts.append(f"{r['dimension']}: not tested ({r['reason']})")
            continue
        parts.append(f"{r['dimension']} -> {r['restored_to']}: {r['verdict']}" + (f" ({r['cause']})" if r.get("cause") else ""))
    co = diagnosis.get("also_recovering")
    text = "; ".join(parts) or "no other dimension to restore"
    return text + (f" — co-binding: {', '.join(co)}" if co else "")


def _in_all(level: str | None, entry: dict | None) -> str | None:
    """A budget level (host_memory) with what a deployment needs in all: level + the runtime's footprint."""
    if level is None or not entry:
        return level
    from luma.reports.fmt import bytes_text

    foot = entry.get("runtime_footprint_bytes")
    if foot is None:
        return f"{level} (over the runtime's footprint, not measured: add it)"
    if foot == 0:  # an engine behind an endpoint: the level limits the whole server
        return f"{level} in all ({entry['variant']}: the whole server's data segment)"
    return (f"{level} over the runtime's {bytes_text(foot)} footprint = {bytes_text(entry['total_bytes'])} "
            f"in all ({entry['variant']})")


def _boundary_rows(out: dict) -> list[dict]:
    fr, nb = out["frontier"], out["next_binding"]
    frontier = None
    if fr:
        frontier = f"{fr['before']} -> {fr['after']}" + (" (or lower: below the levels given)" if fr["below_range"] else "")
        if "saved" in fr:
            saved = f"{fr['saved'] / 2**20:g} MiB" if fr.get("unit") == "byte" else f"{fr['saved']:g} {fr.get('unit')}"
            frontier += f"  (saves {saved}, x{fr['ratio']:.2f})"
    dep = out.get("deployment") or {}
    rows = [
        ("minimum PASS", _in_all(out["min_pass"], dep.get("min_pass"))), ("adjacent FAIL", out["adjacent_fail"]),
        ("binding resource", out["binding"]), ("diagnosis", _restorations(out["diagnosis"]) if out["diagnosis"] else None),
        ("recovered with " + str(out["intervention"]), None if out["recovered"] is None else
         f"{'yes' if out['recovered'] else 'no'} ({', '.join(out['recovery_verdicts'])})"),
        ("frontier shift", frontier),
        *([("re-qualified minimum PASS", _in_all(out["requalified_min_pass"], dep["requalified_min_pass"]))]
          if dep.get("requalified_min_pass") else []),
        ("next binding resource", nb.get("binding") if nb else None),
        ("boundary trials", f"{out['boundary_trials']} (budget {out['trial_budget']}, sweep {out['exhaustive_trials']})"),
        ("physical trials", out["physical_trials"]), ("problems", "; ".join(out["problems"]) or "none"),
        ("chain recorded", "yes" if out["chain_recorded"] else "no"), ("records", out["records_folder"]),
    ]
    return [{"item": k, "value": v if v is not None else "-"} for k, v in rows]


@sprint.command("bench")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--dimension", help="Dimension to sweep (default: the contract's).")
@click.option("--levels", help="Comma-separated levels (default: the contract's).")
@click.option("--repetitions", type=click.IntRange(1, 20))
@click.option("--model/--no-model", "use_model", default=None,
              help="Also run bisection started at the analytical model's predicted boundary (default: on when "
                   "`luma model calibrate` has run).")
@click.option("--sweep/--no-sweep", default=True, show_default=True, help="Run the exhaustive sweep too.")
@format_option(choices=("table", "json"))
@project(WRITE)
def bench_cmd(contract_ref, dimension, levels, repetitions, use_model, sweep, fmt) -> None:
    """Physical trials per boundary: bisection vs an exhaustive sweep of the same levels (same run),
    and bisection started at the model's predicted boundary (--model)."""
    from rich.console import Console

    import math

    from luma.experiments.sprint import bisection_bench as bench, contract, pex as sprint_mod
    from luma.cli.project import settings as command_settings

    c = contract.load(contract_ref, command_settings())
    import_service(c)
    plan = sprint_mod.plan(c, dimension, _levels(levels), None, repetitions)
    err = Console(stderr=True)
    home = command_settings().home
    start = _model_start(plan, home, use_model, err)
    budget = math.ceil(math.log2(len(plan.levels))) + plan.repetitions
    expected = budget * (2 if start is not None else 1) + (len(plan.levels) * plan.repetitions if sweep else 0)
    with _trials("sprint bench", expected, err) as progress:
        out = bench.run(plan, home / "artifacts", progress, start=start, sweep=sweep)
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    names = [("bisection", "bisection"), ("model", "bisection from the model's start"), ("sweep", "sweep")]
    rows = [{"search": label, "trials": out[name]["trials"], "min_pass": out[name]["min_pass"],
             "seconds": out[name]["seconds"]} for name, label in names if out.get(name)]
    print_rows(rows, ["search", "trials", "min_pass", "seconds"], "table",
               title=f"{out['contract']}: {out['levels']} levels x {out['repetitions']} repetitions")
    if out.get("model"):
        click.echo(f"physical trials: {out['bisection']['trials']} plain bisection, {out['model']['trials']} from the "
                   f"model's predicted boundary ({out['model']['start']}); same boundary: {out['model']['same_boundary']}")
    if "sweep" not in out:
        return
    click.echo(f"budget ceil(log2 L) + repetitions = {out['budget']}; within budget: {out['within_budget']}; "
               f"same boundary: {out['same_boundary']}; sweep/bisection trials: {out['trial_ratio']}x; "
               f"sweep monotone: {out['sweep']['monotone']}")


def _model_start(plan, home, use_model, err) -> int | None:
    """The model's predicted minimum PASS level (an index into the plan's levels), when asked for
    or when a calibration exists; None otherwise."""
    from luma.experiments.model import calibrate, guide
    from luma.experiments.sprint.states import describe

    if plan.contract.endpoint is not None:
        if use_model:
            err.print("  model: the analytical model has no description of an endpoint's engine: plain bisection")
        return None
    calibration = calibrate.load(home)
    if use_model is False or (use_model is None and calibration is None):
        return None
    start = guide.predicted_start(plan, calibration)
    what = "calibrated" if calibration else "uncalibrated"
    err.print(f"  model ({what}): " + ("no level predicted to pass, plain bisection" if start is None else
                                       f"predicted minimum PASS {describe(plan.levels[start])}"), soft_wrap=True)
    return start


def _state(contract, text: str | None):
    from luma.experiments.sprint import states

    levels = dict(contract.state)
    for part in (text.split(",") if text else []):
        dim, sep, value = part.partition("=")
        if not sep:
            raise click.BadParameter(f"expected DIMENSION=LEVEL, got {part!r}", param_hint="--state")
        levels[dim.strip()] = value.strip()
    return states.State.of(states.resolve(levels))


def _ints(text: str | None, name: str) -> list[int] | None:
    if not text:
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated whole numbers, got {text!r}", param_hint=name) from None
    if not values or min(values) < 1:
        raise click.BadParameter("values must be at least 1", param_hint=name)
    return values


def _optimize_trials(contract, service, layouts, batches, variants) -> int:
    """At most how many trials `optimize` runs: every batch size of every variant and thread and
    replica layout (the walk stops early once throughput stops rising), and two confirmations."""
    from luma.experiments.sprint.optimize import batches_for

    known = variants or ["fp32", *dict.fromkeys(service.interventions.values())]
    return len(known) * max(sum(len(batches_for(contract, batches, r)) for _, r in layouts), 1) + 2


@sprint.command("optimize")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--state", "state_text", help="Fixed machine state over the contract's, e.g. "
              "'compute=2 core,host_memory=512 MiB'.")
@click.option("--threads", help="Thread counts to try (default: 1 and the state's cores).")
@click.option("--replicas", help="Engine replicas to try, each with its own threads (default: 1, and one per core "
              "where the service's engine can be replicated); threads x replicas never exceeds the cores.")
@click.option("--batches", help="Batch sizes to try, ascending (default: 1,2,4,8,16,32).")
@click.option("--variants", help="Precision variants to try, e.g. 'fp32,int8-ffn' (default: all the service has).")
@click.option("--record/--no-record", default=True, show_default=True, help="Ingest every trial into the KB.")
@format_option(choices=("table", "json"))
@project(WRITE)
def optimize_cmd(contract_ref, state_text, threads, replicas, batches, variants, record, fmt) -> None:
    """Highest accepted throughput on a fixed machine state, over precision, batch size, threads
    and engine replicas."""
    from datetime import datetime, timezone

    from rich.console import Console

    from luma.experiments.sprint import contract, optimize
    from luma.experiments.sprint.records import Recorder
    from luma.experiments.services import get as get_service
    from luma.cli.project import settings as command_settings

    c = contract.load(contract_ref, command_settings())
    import_service(c)
    state = _state(c, state_text)
    home = command_settings().home
    err = Console(stderr=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    thread_counts, batch_sizes = _ints(threads, "--threads"), _ints(batches, "--batches") or optimize.BATCHES
    replica_counts = _ints(replicas, "--replicas")
    chosen = [v.strip() for v in variants.split(",") if v.strip()] if variants else None
    service, cores = get_service(c.service), state.enforced().get("compute") or 1
    layouts = optimize.layouts(service, cores, thread_counts, replica_counts)
    if not layouts:
        why = (f"the {c.service} service's engine cannot be replicated" if not getattr(service, "replicable", False)
               and any(r > 1 for r in replica_counts or []) else f"threads x replicas exceeds the state's {cores} core(s)")
        raise click.BadParameter(f"no thread and replica layout to try: {why}", param_hint="--threads/--replicas")
    recorder = Recorder(command_settings(), optimize.plan_for(c, state.as_dict()), f"{c.name}-optimize-{stamp}", ingest=record)
    with _trials("sprint optimize", _optimize_trials(c, service, layouts, batch_sizes, chosen), err) as progress:
        out = optimize.run(c, state, home / "artifacts", thread_counts, batch_sizes, recorder.trial, progress, chosen,
                           replica_counts)
    public = {k: v for k, v in out.items() if not k.startswith("_")}
    recorded = recorder.optimum(c, state, out, public) if out["_trials"] else None
    out = {**public, "result_recorded": recorded is not None and record, "records_folder": str(recorder.folder)}
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    print_rows(out["configurations"], ["variant", "threads", "replicas", "max_batch", "concurrency", "verdict", "cause",
                                       "throughput", "quality"], "table", title=f"{out['contract']} on {out['state']}")
    best = out["best"]
    for f in out["finalists"]:
        click.echo(f"finalist {_layout(f)}: "
                   f"{' and '.join(f'{x:.1f}' for x in f['throughputs'])} requests/s -> {f['verdict']}")
    click.echo("no configuration meets the contract on this state" if best is None else
               f"best accepted: {_layout(best)}: "
               f"{best['throughput']:.1f} requests/s (the lower of its two runs)")
    click.echo(f"result recorded: {'yes' if out['result_recorded'] else 'no'} ({out['records_folder']})"
               + ("; `luma rules run`, then `luma kb query --name stale-boundaries` shows the boundaries it "
                  "made stale" if out["result_recorded"] else ""))


def _layout(row: dict) -> str:
    reps = row.get("replicas") or 1
    return (f"{row['variant']}, {row['threads']} thread(s)" + (f" x {reps} replicas" if reps > 1 else "")
            + f", batch {row['max_batch']}")


from luma.cli.requalify import requalify_cmd  # noqa: E402 (a subcommand in a module of its own)

sprint.add_command(requalify_cmd)


from luma.cli.sprint_matrix import plan_cmd  # noqa: E402 (the command lives with the matrix code)

sprint.add_command(plan_cmd)
