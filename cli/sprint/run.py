"""`luma sprint run`: one PEX qualification sprint on this machine (luma.experiments.sprint.run
runs it), its trials on screen, its boundary as a table."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import trials
from luma.cli.project import WRITE, project, settings as command_settings
from luma.cli.states import parse_levels
from luma.errors import Interrupted
from luma.experiments.sprint import matrix as matrix_mod
from luma.experiments.sprint.history import kept
from luma.experiments.sprint.run import contract_plan, matrix_plan, model_start, run_sprint, sprint_trials
from luma.reports.fmt import bytes_text, num


@click.command("run")
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
    settings = command_settings()
    err = console(stderr=True)
    if matrix_path is not None:
        plan = _matrix_plan(settings, matrix_path, contract_ref, record, dimension=dimension, levels=levels,
                            intervention=intervention, repetitions=repetitions, start_level=start_level)
    else:
        if contract_ref is None:
            raise click.UsageError("Missing argument 'CONTRACT' (or give --matrix MATRIX.json)")
        plan = contract_plan(settings, contract_ref, dimension, parse_levels(levels), intervention, repetitions,
                             start_level)
    if start_level is None and (matrix_path is None or plan.start is None):
        plan.start = print_model_start(plan, settings.home, use_model, err)
    sprint_id = plan.new_id()  # named here: a Ctrl-C says which folder kept the trials
    try:
        with trials("sprint run", sprint_trials(plan), err) as progress:
            out = run_sprint(plan, settings, record, progress, sprint_id=sprint_id).summary
    except KeyboardInterrupt:
        raise Interrupted(kept(settings.home / "sprints" / sprint_id, record)) from None
    if fmt == "json":
        click.echo(json.dumps(out, indent=2, default=str))
        return
    print_rows(out["trials"], ["trial", "phase", "level", "restored", "variant", "verdict", "cause", "steal_pct",
                               "cotenant_pct", "peak_rss_mib",
                               "runtime_footprint_mib", "quality", "throughput"], "table",
               title=f"sprint {out['sprint']}: {out['dimension']} over {out['base_state']}")
    print_rows(boundary_rows(out), ["item", "value"], "table", title="boundary")


def _matrix_plan(settings, path: Path, contract_ref: str | None, record: bool, **overrides):
    """The Plan of the matrix at `path` (recorded with `record`); the matrix is frozen, so no other
    option may change what it says."""
    given = [f"--{k.replace('_', '-')}" for k, v in overrides.items() if v is not None]
    if given:
        raise click.UsageError(f"--matrix runs the frozen matrix as it is: leave out {', '.join(given)}")
    m = matrix_mod.read(path, settings)
    if contract_ref is not None and contract_ref != (m.get("contract") or {}).get("name"):
        raise click.UsageError(f"the matrix is of contract {(m.get('contract') or {}).get('name')!r}, not "
                               f"{contract_ref!r} (give the matrix alone)")
    return matrix_plan(settings, m, str(path), record)


def print_model_start(plan, home, use_model, err: Console) -> int | None:
    """The model's predicted start (luma.experiments.sprint.run.model_start), said on stderr."""
    start = model_start(plan, home, use_model)
    if start.note:
        err.print(f"  {start.note}", soft_wrap=not start.endpoint)
    return start.start


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

    foot = entry.get("runtime_footprint_bytes")
    if foot is None:
        return f"{level} (over the runtime's footprint, not measured: add it)"
    if foot == 0:  # an engine behind an endpoint: the level limits the whole server
        return f"{level} in all ({entry['variant']}: the whole server's data segment)"
    return (f"{level} over the runtime's {bytes_text(foot)} footprint = {bytes_text(entry['total_bytes'])} "
            f"in all ({entry['variant']})")


def _amount(value: float, unit: str | None) -> str:
    """A frontier's saving as people read it: bytes in the shortest exact unit (64 KiB, 16 MiB)."""
    if unit == "byte":
        return bytes_text(value)
    return f"{value:g} {unit}" + ("s" if unit in ("core", "token") and value != 1 else "")


def boundary_rows(out: dict) -> list[dict]:
    fr, nb = out["frontier"], out["next_binding"]
    frontier = None
    if fr:
        frontier = f"{fr['before']} -> {fr['after']}" + (" (or lower: below the levels given)" if fr["below_range"] else "")
        if "saved" in fr:
            share = num((1 - fr["ratio"]) * 100, 2)
            frontier += f"  (saves {_amount(fr['saved'], fr.get('unit'))} = {share} % of the minimum PASS)"
    dep = out.get("deployment") or {}
    rows = [
        ("minimum PASS", _in_all(out["min_pass"], dep.get("min_pass"))), ("adjacent FAIL", out["adjacent_fail"]),
        ("binding resource", out["binding"]), ("diagnosis", _restorations(out["diagnosis"]) if out["diagnosis"] else None),
        ("recovered with " + str(out["intervention"]), None if out["recovered"] is None else
         f"{'yes' if out['recovered'] else 'no'} ({', '.join(out['recovery_verdicts'])})"),
        ("frontier shift", frontier),
        *([("re-qualified minimum PASS", _in_all(out["requalified_min_pass"], dep.get("requalified_min_pass")))]
          if out.get("requalified_min_pass") else []),
        ("next binding resource", nb.get("binding") if nb else None),
        ("boundary trials", f"{out['boundary_trials']} (budget {out['trial_budget']}, sweep {out['exhaustive_trials']})"),
        ("physical trials", out["physical_trials"]), ("problems", "; ".join(out["problems"]) or "none"),
        ("chain recorded", "yes" if out["chain_recorded"] else "no"), ("records", out["records_folder"]),
    ]
    return [{"item": k, "value": v if v is not None else "-"} for k, v in rows]
