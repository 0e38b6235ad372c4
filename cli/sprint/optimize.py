"""`luma sprint optimize`: the highest accepted throughput on a fixed machine state
(luma.experiments.sprint.run.run_optimize), every trial recorded."""

from __future__ import annotations

import json

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import trials
from luma.cli.project import WRITE, project, settings as command_settings
from luma.experiments.sprint.run import optimize_setup, run_optimize


def _state(text: str | None) -> dict[str, str]:
    """{dimension: level} of --state (over the contract's: the library resolves them)."""
    levels = {}
    for part in (text.split(",") if text else []):
        dim, sep, value = part.partition("=")
        if not sep:
            raise click.BadParameter(f"expected DIMENSION=LEVEL, got {part!r}", param_hint="--state")
        levels[dim.strip()] = value.strip()
    return levels


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


@click.command("optimize")
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
    settings = command_settings()
    chosen = [v.strip() for v in variants.split(",") if v.strip()] if variants else None
    setup = optimize_setup(settings, contract_ref, _state(state_text), _ints(threads, "--threads"),
                           _ints(replicas, "--replicas"), _ints(batches, "--batches"), chosen)
    if not setup.layouts:
        raise click.BadParameter(f"no thread and replica layout to try: {setup.why}", param_hint="--threads/--replicas")
    with trials("sprint optimize", setup.max_trials(), console(stderr=True)) as progress:
        out = run_optimize(setup, settings, record, progress)
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
