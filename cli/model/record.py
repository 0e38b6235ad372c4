"""`--record` of `luma model predict|explore` and `luma partner evaluate`, and the line saying what
was recorded (luma.experiments.model.recording records it)."""

from __future__ import annotations

import click


def record_option(fn):
    """`--record`: the output becomes ledger records and KB facts (simulated or projected)."""
    return click.option("--record", is_flag=True, default=False,
                        help="Record the output in the ledger and KB (a model-prediction record; evidence class "
                             "simulated on this host, projected elsewhere), where `luma kb query --name "
                             "model-vs-pex` sets it beside what PEX measures.")(fn)


def recorded_line(recorded: dict | None) -> None:
    if recorded:
        click.echo(f"recorded: {recorded['states']} predicted state(s) as {recorded['evidence_class']} evidence "
                   f"({recorded['records']} new record(s); {recorded['file']})")
