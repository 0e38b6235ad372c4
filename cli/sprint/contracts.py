"""`luma sprint contracts`: the example contracts shipped with LUMA."""

from __future__ import annotations

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, project
from luma.experiments.sprint import contract


@click.command("contracts")
@format_option(choices=("table", "json"))
@project(NONE)
def contracts_cmd(fmt: str) -> None:
    """List the example contracts shipped with LUMA.

    NAME is what `luma sprint run` takes; RECORDED AS is the contract's own `name`, which its
    records, sprint ids and reports carry (either loads it)."""
    rows = []
    for name, path in sorted(contract.shipped().items()):
        c = contract.load(path)
        rows.append({"name": name, "recorded as": c.name, "service": c.service, "dimension": c.sprint.dimension if c.sprint else None,
                     "intervention": c.sprint.intervention if c.sprint else None,
                     "clauses": "; ".join(f"{x.metric} {x.op} {x.value:g} {x.unit}" for x in c.clauses),
                     "description": c.description})
    print_rows(rows, ["name", "recorded as", "service", "dimension", "intervention", "clauses", "description"], fmt,
               title="shipped contracts")
