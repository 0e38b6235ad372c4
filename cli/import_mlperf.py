"""`luma import mlperf-results PATH`: published MLPerf Inference results as third-party evidence
(experiments/imports/mlperf_results.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings
from luma.experiments.imports import mlperf_results

_COLUMNS = ["round", "submitter", "system", "machine", "count", "benchmark", "scenario", "throughput", "unit"]
#: A clone has thousands of summaries; say how far the reading is past this many.
_PROGRESS_FROM = 200


def _progress(done: int, total: int) -> None:
    if total >= _PROGRESS_FROM and (done % _PROGRESS_FROM == 0 or done == total):
        click.echo(f"read {done}/{total} result summaries", err=True)


@click.command("mlperf-results")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
@click.option("--sample", is_flag=True, help="Read the small v4.1 sample shipped with LUMA instead of PATH.")
@click.option("--round", "round_", metavar="R",
              help="The round (e.g. v5.0); default: from the folder name (inference_results_v5.0).")
@click.option("--ingest/--no-ingest", default=True, show_default=True,
              help="Add the records to this project's KB (all or nothing); --no-ingest needs --out.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the records here as JSON Lines (for `luma kb ingest` later).")
@format_option()
@project(WRITE, when=lambda p: p["ingest"])
def mlperf_cmd(path, sample, round_, ingest, out, fmt) -> None:
    """Read an MLPerf Inference results checkout: each system becomes a machine record, each valid result a
    vendor-claim trial, PASS at the system's state against the benchmark's latency bounds.

    PATH is the root of a clone of github.com/mlcommons/inference_results_vX.Y (or --sample).
    Nothing here is measured: the results are published and audited, LUMA holds no per-request
    samples of them."""
    if (path is None) == (not sample):
        raise click.UsageError("give PATH or --sample (not both)")
    if not ingest and out is None:
        raise click.UsageError("--no-ingest writes nothing without --out FILE")
    result = mlperf_results.read_results(path or mlperf_results.sample_path(), round_, progress=_progress)
    if out is not None:
        mlperf_results.write(result, out)
    report = mlperf_results.ingest(settings(), result) if ingest else None
    rows = [{k: v for k, v in asdict(r).items() if k in _COLUMNS} for r in result.rows]
    if fmt == "json":
        click.echo(json.dumps({"round": result.round, "machines": [m.model.name for m in result.machines],
                               "results": [asdict(r) for r in result.rows], "skipped": dict(result.skipped),
                               "added": len(report.added) if report else 0,
                               "duplicates": len(report.duplicates) if report else 0}, indent=2))
        return
    columns = [c for c in _COLUMNS if c != "system"] if fmt == "table" else _COLUMNS  # the machine names it
    print_rows(rows, columns, fmt, title="published MLPerf results (vendor-claim: not measured by LUMA)")
    if fmt == "table":
        click.echo(result.summary())
        if report is not None:
            click.echo(f"ingested: {len(report.added)} records added, {len(report.duplicates)} already there")
        if out is not None:
            click.echo(f"records: {out}")
