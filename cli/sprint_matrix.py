"""`luma sprint run --matrix` and `luma sprint plan`: sprints from frozen experiment matrices
(experiments/sprint/matrix.py), and the matrix of a sprint written out before any trial runs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, project


def matrix_plan(path: Path, contract_ref: str | None, record: bool, **overrides):
    """The Plan of the matrix at `path`; with `record`, the matrix goes to the ledger and KB as an
    experiment-matrix record (after the plan is checked: a matrix that does not fit writes
    nothing). The matrix is frozen, so no other option may change what it says."""
    from luma.cli.project import settings
    from luma.experiments.sprint import matrix as matrix_mod

    given = [f"--{k.replace('_', '-')}" for k, v in overrides.items() if v is not None]
    if given:
        raise click.UsageError(f"--matrix runs the frozen matrix as it is: leave out {', '.join(given)}")
    m = matrix_mod.read(path, settings())
    if contract_ref is not None and contract_ref != (m.get("contract") or {}).get("name"):
        raise click.UsageError(f"the matrix is of contract {(m.get('contract') or {}).get('name')!r}, not "
                               f"{contract_ref!r} (give the matrix alone)")
    plan = matrix_mod.to_plan(m, settings(), str(path))
    if record:
        from luma.experiments.model import record as record_mod

        record_mod.save_and_ingest(settings(), [record_mod.matrix_record(m, "luma sprint run --matrix")], "matrix",
                                   "luma sprint run --matrix")
    return plan


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
    from luma.cli.project import settings
    from luma.cli.sprint import _levels, import_service
    from luma.experiments.sprint import contract, matrix as matrix_mod, pex as sprint_mod
    from luma.experiments.model import calibrate, guide

    c = contract.load(contract_ref, settings())
    import_service(c)
    plan = sprint_mod.plan(c, dimension, _levels(levels), intervention, repetitions)
    predicted = guide.predicted_levels(plan, calibrate.load(settings().home))
    m = matrix_mod.freeze(plan, predicted)
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
               title=f"{c.name} over {base}: {plan.repetitions} repetitions per state")
    click.echo(f"matrix {m['sha256'][:12]} (frozen)" + (f"; written to {out_path}" if out_path else ""))
