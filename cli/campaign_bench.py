"""`luma campaign bench`: what a campaign costs the fleet engine and the head, on a live cluster."""

from __future__ import annotations

import click

from luma.cli.ray_session import on_cluster
from luma.cli.output import format_option, print_rows
from luma.cli.project import READ, project, require
from luma.experiments.fleet import overhead


@click.command("bench")
@click.option("--cluster", metavar="ADDRESS", required=True, help="The Ray cluster's address.")
@click.option("--repeat", type=click.IntRange(5, 1000), default=30, show_default=True,
              help="Round trips per figure (the median is shown).")
@format_option()
@project(READ)
def bench_cmd(cluster: str, repeat: int, fmt: str) -> None:
    """What a campaign costs the fleet engine and the head, on a live cluster: a unit-shaped Ray
    task (class labels, trusted-key selector, runner slot) against an empty task with Ray's
    defaults measured in the same run, `ray.nodes()`, and the head's ingest per sprint."""
    s = require()
    with on_cluster(s):
        rows = overhead.run(s, cluster, repeat)
    print_rows(rows, ["measure", "value", "unit", "vs_baseline", "note"], fmt, title=f"campaign bench on {cluster}")
