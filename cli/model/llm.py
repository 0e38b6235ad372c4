"""`luma model calibrate --llm`: fit the LLM serving model to published measurements and state
its error on the held-out ones (experiments/model/llm_calibrate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import print_rows
from luma.cli.project import settings as command_settings
from luma.experiments.model import llm_calibrate


def calibrate_llm(published: str | None, record: bool, fmt: str) -> None:
    """Refit on the shipped published figures (plus PUBLISHED's), write the project's LLM
    calibration, load the figures (vendor-claim) and the error facts into the KB, print the error."""
    project = command_settings()
    home = project.home
    cal = llm_calibrate.run(home, Path(published) if published else None)
    if record:
        cal["facts"] = [str(p) for p in llm_calibrate.record(project, cal)]
    cal.pop("_doc", None)
    if fmt == "json":
        click.echo(json.dumps({k: v for k, v in cal.items() if k not in ("predictions", "tail_checks")}, indent=2))
        return
    rows = [{"metric": m, "set": which, "n": e["n"], "median": f"{e['median']:.1%}", "p90": f"{e['p90']:.1%}",
             "max": f"{e['max']:.1%}", "bias": f"{e['bias']:+.1%}"}
            for which in ("held-out", "calibration") for m, e in cal["errors"][which].items()]
    print_rows(rows, ["metric", "set", "n", "median", "p90", "max", "bias"], "table",
               title="LLM model error vs published measurements (relative; bias: median signed, + = model predicts more)")
    src = [{"source": s, "held-out n": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}",
            "bias": f"{e['bias']:+.1%}"} for s, e in cal["by_source"].items()]
    print_rows(src, ["source", "held-out n", "median", "max", "bias"], "table", title="held-out error per source")
    click.echo("fitted: " + ", ".join(f"{k} {v:g}" for k, v in cal["fitted"].items())
               + "; tails p95/p50: " + ", ".join(f"{k} {v:g}" for k, v in cal["tail"].items()))
    click.echo(f"calibration: {llm_calibrate.path(home)}" + (f"; facts: {', '.join(cal['facts'])}" if record else ""))
