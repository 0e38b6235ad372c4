"""`luma sprint plan`: a sprint's experiment matrix frozen before any trial runs
(luma.experiments.sprint.run.frozen_matrix), for `luma sprint run --matrix`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, project, settings
from luma.cli.states import parse_levels
from luma.experiments.sprint.run import frozen_matrix


@click.command("plan")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--dimension", help="Dimension to sweep (default: the contract's).")
@click.option("--levels", help="Comma-separated levels (default: the contract's).")
@click.option("--intervention", help="Intervention to apply at the FAIL level (default: the contract's).")
@click.option("--repetitions", type=click.IntRange(1, 20), help="Trials that must reproduce the minimum PASS.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the frozen experiment matrix (JSON) for `luma sprint run --matrix`.")
@format_option(choices=("table", "json"))
@project(NONE)
def plan_cmd(contract_ref, dimension, levels, intervention, repetitions, out_path, fmt) -> None:
    """Freeze the experiment matrix of a sprint without running it: the levels, base state,
    intervention and repetitions, with the analytical model's verdict at each level."""
    plan, m = frozen_matrix(settings(), contract_ref, dimension, parse_levels(levels), intervention, repetitions)
    if out_path:
        out_path.write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(m, indent=2))
        return
    dim = plan.dimension
    rows = [{"configuration": cf["name"], "intervention": cf["intervention"] or "-", dim: s["state"][dim],
             "role": s["role"], "predicted": s.get("predicted", "-")}
            for cf in m["configurations"] for s in cf["states"]]
    base = ", ".join(f"{k}={v}" for k, v in m["configurations"][0]["states"][0]["state"].items() if k != dim)
    print_rows(rows, ["configuration", "intervention", dim, "role", "predicted"], "table",
               title=f"{plan.contract.name} over {base}: {plan.repetitions} repetitions per state")
    click.echo(f"matrix {m['sha256'][:12]} (frozen)" + (f"; written to {out_path}" if out_path else ""))
