"""`luma model calibrate --mlperf`: the LLM serving model fitted to the MLPerf results imported into
the KB, each submitter held out in turn (experiments/model/mlperf_calibrate.py)."""

from __future__ import annotations

import json

import click

from luma.cli.output import print_rows
from luma.cli.project import require, settings as command_settings
from luma.errors import NothingToReport
from luma.experiments.model import mlperf_calibrate


def calibrate_mlperf(fmt: str) -> None:
    """Fit on all submitters but one, state the error on the held-out one, for each; write the
    project's MLPerf calibration and print the error."""
    project = require(command_settings())
    trials = mlperf_calibrate.trials_from_kb(project)
    if not trials:
        raise NothingToReport("no imported MLPerf results in this project's KB: run `luma import mlperf-results PATH` "
                              "(or --sample) first")
    cal = mlperf_calibrate.run(project.home, trials)
    if fmt == "json":
        click.echo(json.dumps(cal, indent=2))
        return
    rows = [{"held-out submitter": s, "n": e["n"], "median": f"{e['median']:.1%}", "p90": f"{e['p90']:.1%}",
             "max": f"{e['max']:.1%}", "bias": f"{e['bias']:+.1%}"} for s, e in cal["held_out"].items()]
    print_rows(rows, ["held-out submitter", "n", "median", "p90", "max", "bias"], "table",
               title="LLM model error on each submitter's MLPerf results, fitted without them (relative)")
    click.echo(mlperf_calibrate.summary_line(cal))
    click.echo("assumed: " + "; ".join(f"{k}: {v}" for k, v in cal["assumed"].items()))
    click.echo(f"calibration: {project.home / mlperf_calibrate.FILE}")
