"""`luma sprint`: PEX qualification sprints on this machine."""

from __future__ import annotations

import json

import click

from luma.cli.output import format_option, print_rows


@click.group()
def sprint() -> None:
    """Qualify resource boundaries with physical trials on this machine."""


def _levels(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


@sprint.command("contracts")
@format_option(choices=("table", "json"))
def contracts_cmd(fmt: str) -> None:
    """List the example contracts shipped with LUMA."""
    from luma.experiments import contract

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
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--dimension", help="Dimension to sweep (compute, host_memory, kv_cache, runtime).")
@click.option("--levels", help="Comma-separated levels, e.g. '64 MiB,96 MiB,128 MiB' (default: the contract's).")
@click.option("--intervention", help="Intervention to apply at the FAIL level (default: the contract's).")
@click.option("--repetitions", type=click.IntRange(1, 20), help="Trials that must reproduce the minimum PASS.")
@click.option("--start-level", help="A predicted boundary level: bisection probes it (and its neighbour) first.")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest every trial and the chain into the ledger and KB.")
@format_option(choices=("table", "json"))
def run_cmd(contract_ref, dimension, levels, intervention, repetitions, start_level, record, fmt) -> None:
    """Find the minimum PASS and adjacent FAIL along one dimension, diagnose the binding resource,
    recover PASS with an intervention and re-qualify the boundary with it in place."""
    from rich.console import Console

    from luma.experiments import contract, sprint as sprint_mod, summary
    from luma.experiments.records import Recorder
    from luma.settings import Settings

    c = contract.load(contract_ref)
    plan = sprint_mod.plan(c, dimension, _levels(levels), intervention, repetitions, start_level)
    home = Settings.from_env().home
    err = Console(stderr=True)
    runner = sprint_mod.Sprint(plan, home / "artifacts")
    recorder = Recorder(home, plan, runner.result.sprint_id, ingest=record)
    runner._record = recorder.trial
    with err.status("starting") as status:
        def progress(msg: str) -> None:
            status.update(msg)
            if "->" in msg:
                err.print(f"  {msg}")
        runner._progress = progress
        result = runner.run()
    out = summary.summarize(result)
    chain = recorder.finish(result, out)
    out["chain_recorded"] = chain is not None and record
    out["records_folder"] = str(recorder.folder)
    if fmt == "json":
        click.echo(json.dumps(out, indent=2, default=str))
        return
    print_rows(out["trials"], ["trial", "phase", "state", "variant", "verdict", "cause", "peak_rss_mib", "quality",
                               "throughput"], "table", title=f"sprint {out['sprint']}: trials")
    keys = ["min_pass", "adjacent_fail", "binding", "recovered", "requalified_min_pass", "frontier", "next_binding",
            "boundary_trials", "trial_budget", "exhaustive_trials", "physical_trials", "problems", "chain_recorded",
            "records_folder"]
    rows = [{"item": k, "value": json.dumps(out[k], default=str) if isinstance(out[k], (dict, list)) else out[k]}
            for k in keys]
    print_rows(rows, ["item", "value"], "table", title="boundary")
