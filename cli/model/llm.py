"""`luma model calibrate --llm`: fit the LLM serving model to published measurements and state
its error on the held-out ones (experiments/model/llm_calibrate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import print_rows
from luma.cli.project import settings as command_settings
from luma.experiments.model import llm_calibrate, llm_calibration_facts


def calibrate_llm(published: str | None, record: bool, fmt: str, quick: bool = False) -> None:
    """Refit on the shipped published figures (plus PUBLISHED's), write the project's LLM
    calibration, load the figures (vendor-claim) and the error facts into the KB, print the error."""
    project = command_settings()
    home = project.home
    if not quick:  # the leave-one-out folds are minutes of work: say so before starting them
        click.echo("fitting, then one refit per source, engine and machine left out (a few minutes) ...", err=True)
    cal = llm_calibrate.run(home, Path(published) if published else None, honest=not quick)
    if record:
        cal["facts"] = [str(p) for p in llm_calibration_facts.record(project, cal)]
    cal.pop("_doc", None)
    if fmt == "json":
        click.echo(json.dumps({k: v for k, v in cal.items() if k not in ("predictions", "tail_checks")}, indent=2))
        return
    rows = [{"metric": m, "set": which, "n": e["n"], "median": f"{e['median']:.1%}", "p90": f"{e['p90']:.1%}",
             "max": f"{e['max']:.1%}", "bias": f"{e['bias']:+.1%}"}
            for which in ("held-out", "held-out-source", "calibration") for m, e in cal["errors"].get(which, {}).items()]
    print_rows(rows, ["metric", "set", "n", "median", "p90", "max", "bias"], "table",
               title="LLM model error vs published measurements (relative; bias: median signed, + = model predicts more)")
    src = [{"source": s, "held-out n": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}",
            "bias": f"{e['bias']:+.1%}"} for s, e in cal["by_source"].items()]
    print_rows(src, ["source", "held-out n", "median", "max", "bias"], "table", title="held-out error per source")
    loso = [{"source": s, "n": e["n"], "median": f"{e['median']:.1%}", "p90": f"{e['p90']:.1%}",
             "bias": f"{e['bias']:+.1%}"} for s, e in (cal.get("loso_by_source") or {}).items()]
    if loso:
        print_rows(loso, ["source", "n", "median", "p90", "bias"], "table",
                   title="each source predicted by a fit without it (leave-one-source-out)")
        bands = ", ".join(f"{k.replace('|*', '')} ±{v:.0%}" for k, v in cal["bands"].items() if k.count("*") == 2)
        click.echo(f"stated bands (per metric; finer per batching x load): {bands}")
        click.echo("inside their band: " + "; ".join(f"{w} {c['inside']}/{c['n']} ({c['share']:.0%})"
                                                   for w, c in (cal.get("coverage") or {}).items()))
    fitted = {k: v for k, v in cal["fitted"].items() if k != "engines"}
    click.echo("fitted: " + ", ".join(f"{k} {v:g}" for k, v in fitted.items())
               + "; tails p95/p50: " + ", ".join(f"{k} {v:g}" for k, v in cal["tail"].items()))
    for engine, prof in (cal["fitted"].get("engines") or {}).items():
        click.echo(f"engine {engine} ({prof['records']} records): compute x{prof['compute']:.2f}, bandwidth "
                   f"x{prof['bandwidth']:.2f}, queueing x{prof['queue']:.2f}, {prof['step_overhead'] * 1e3:.2f} ms a step")
    click.echo(f"calibration: {llm_calibrate.path(home)}" + (f"; facts: {', '.join(cal['facts'])}" if record else ""))
