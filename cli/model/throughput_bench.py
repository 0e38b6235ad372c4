"""`luma model bench`: states per second of the model over a space."""

from __future__ import annotations

import json

import click

from luma.cli.model.common import calibration, load_contract
from luma.cli.output import format_option
from luma.cli.project import NONE, project, settings
from luma.experiments.model import simulate, space


@click.command("bench")
@click.argument("contract_ref", metavar="CONTRACT", default="llm-chat")
@click.option("--space", "space_ref", default="llm-70b-whatif", show_default=True, help="The space to evaluate.")
@format_option(choices=("table", "json"))
@project(NONE)
def bench_cmd(contract_ref, space_ref, fmt) -> None:
    """States per second of the model over a space (evaluation and verdicts, best of 3)."""
    c = load_contract(contract_ref)
    out = simulate.bench(c, space.load(space_ref, c, project=settings()), calibration())
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{out['space']}: {out['states']:,} states in {out['seconds']:.3f} s = {out['states_per_second']:,} states/s")
