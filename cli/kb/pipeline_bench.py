"""`luma kb bench`: ingest and named queries on synthetic records against raw Oxigraph and rdflib."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.bench_report import print_bench
from luma.cli.output import format_option
from luma.cli.progress import Tracker, sizes_plan
from luma.cli.project import NONE, project
from luma.rules import pipeline_bench as kb_bench


@click.command()
@click.option("--records", default="1000,10000,100000", show_default=True, help="Comma-separated batch sizes.")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Runs per named query (min and median reported).")
@click.option("--rdflib-max", type=int, default=10_000, show_default=True, help="Largest size also run on rdflib's in-memory store.")
@click.option("--rdflib-timeout", type=float, default=120.0, show_default=True, help="Seconds per rdflib query before giving up.")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None, help="Keep the work directories here.")
@format_option(choices=("table", "json"))
@project(NONE)
def bench(records: str, repeat: int, rdflib_max: int, rdflib_timeout: float, keep: Path | None, fmt: str) -> None:
    """Benchmark ingest and named queries on synthetic records against raw Oxigraph and rdflib."""
    try:
        sizes = [int(x) for x in records.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("give whole numbers separated by commas", param_hint="--records") from None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    with Tracker("kb bench", sizes_plan(sizes, rdflib_max)) as progress:
        results = kb_bench.run_bench(sizes, repeat, rdflib_max, rdflib_timeout, keep, progress=progress)
    if fmt == "json":
        click.echo(json.dumps(results, indent=2))
        return

    print_bench(results)
