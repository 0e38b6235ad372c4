"""`luma sprint list`: the sprints run in this project (luma.experiments.sprint.history reads
their folders)."""

from __future__ import annotations

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import OPTIONAL, project, settings
from luma.experiments.sprint.history import sprints

_COLUMNS = ["sprint", "kind", "contract", "dimension", "started", "trials", "chain", "outcome", "path"]
#: The table leaves out what the sprint ID already says (its contract, dimension and start).
_TABLE = ["sprint", "trials", "chain", "outcome", "path"]


@click.command("list")
@format_option()
@project(OPTIONAL)
def list_cmd(fmt: str) -> None:
    """The sprints run in this project: what each was, when, its trials, its chain or why none, and its folder.

    Read from the sprint folders under LUMA_HOME/sprints (a campaign's sprints are in the project
    of the runner that ran them)."""
    entries = sprints(settings().home)
    rows = [{**e.row(), "chain": e.chain if fmt != "table" else ("yes" if e.chain else "no")} for e in entries]
    if fmt == "table" and not rows:
        click.echo(f"no sprint in {settings().home / 'sprints'}: `luma sprint run CONTRACT` runs one")
        return
    print_rows(rows, _TABLE if fmt == "table" else _COLUMNS, fmt, title=f"sprints in {settings().home}")
