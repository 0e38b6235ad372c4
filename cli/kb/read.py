"""`luma kb export|stats`: the whole KB as RDF, and its counts."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.kb.access import open_for_reading
from luma.cli.output import echo_bytes, format_option, print_rows
from luma.cli.project import READ, project


@click.command()
@click.option("--format", "fmt", type=click.Choice(["nquads", "trig", "turtle", "jsonld"]), default="nquads", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write to a file instead of stdout.")
@project(READ)
def export(fmt: str, out: Path | None) -> None:
    """Export every named graph (N-Quads lines are sorted, so two exports diff cleanly)."""
    with open_for_reading() as base:
        data = base.store.dump(fmt, sort=True)
    if out:
        out.write_bytes(data)
        click.echo(f"wrote {len(data)} bytes to {out}", err=True)
    else:
        echo_bytes(data)


@click.command()
@format_option()
@project(READ)
def stats(fmt: str) -> None:
    """Counts: quads, record graphs, ledger records by kind and evidence class."""
    with open_for_reading() as base:
        st = base.stats()
    if fmt == "json":
        click.echo(json.dumps(st, indent=2))
        return
    rows = [{"what": k, "value": v} for k, v in st.items() if k != "by_kind_and_evidence"]
    rows += [{"what": f"records {k}", "value": v} for k, v in st["by_kind_and_evidence"].items()]
    print_rows(rows, ["what", "value"], fmt)
