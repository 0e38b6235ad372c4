"""`luma sprint bench`: physical trials per boundary, bisection against an exhaustive sweep of the
same levels (luma.experiments.sprint.bisection_bench)."""

from __future__ import annotations

import json
import math

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import trials
from luma.cli.project import WRITE, project, settings as command_settings
from luma.cli.sprint.run import print_model_start
from luma.cli.states import parse_levels
from luma.experiments.sprint import bisection_bench as bench
from luma.experiments.sprint.run import contract_plan


@click.command("bench")
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
    plan = contract_plan(command_settings(), contract_ref, dimension, parse_levels(levels), None, repetitions)
    err = console(stderr=True)
    home = command_settings().home
    start = print_model_start(plan, home, use_model, err)
    budget = math.ceil(math.log2(len(plan.levels))) + plan.repetitions
    expected = budget * (2 if start is not None else 1) + (len(plan.levels) * plan.repetitions if sweep else 0)
    with trials("sprint bench", expected, err) as progress:
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
