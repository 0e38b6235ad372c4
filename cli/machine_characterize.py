"""`luma machine characterize`: measure this host (luma.experiments.characterize) and record it as a
signed, measured machine record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from luma.cli.machine import print_figures
from luma.cli.output import format_option
from luma.cli.progress import Tracker
from luma.cli.project import WRITE, project, settings as command_settings
from luma.experiments.characterize import usable_cpus
from luma.experiments.machine_record import characterize_host
from luma.extras import require


_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _core_counts(ctx, param, text: str | None) -> list[int] | None:
    """`--cores 1,2` -> [1, 2], checked against the CPUs this process may use (usage error otherwise)."""
    if text is None:
        return None
    import os

    try:
        counts = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise click.BadParameter(f"comma-separated whole numbers, got {text!r}") from None
    usable = len(os.sched_getaffinity(0))
    if not counts or counts[0] < 1 or counts[-1] > usable:
        raise click.BadParameter(f"core counts must be from 1 to {usable} (the CPUs this process may use), got {text!r}")
    return counts


def _name(ctx, param, text: str | None) -> str | None:
    if text is not None and not _SLUG.match(text):
        raise click.BadParameter(f"a slug: lower-case letters, digits, '.', '_' or '-' (at most 64), got {text!r}")
    return text


@click.command("characterize")
@click.option("--quick", is_flag=True, help="Short windows and small products (~15 s); the default takes ~1 minute.")
@click.option("--cores", callback=_core_counts, help="Core counts to measure, e.g. '1,2' (default: 1 to all usable).")
@click.option("--name", callback=_name, help="The machine's name (default: CPU model and core count, e.g. amd-epyc-2c).")
@click.option("--ingest/--no-ingest", default=True, show_default=True,
              help="Record the machine in the ledger and KB of LUMA_HOME.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the record to this file.")
@click.option("--allow-contended", is_flag=True,
              help="Keep figures measured beside a busy neighbour (noted in the record; never a contract's calibration).")
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["ingest"])
def characterize_cmd(quick, cores, name, ingest, out, allow_contended, fmt) -> None:
    """Measure this host (memory bandwidth, fp32/bf16/int8 matmul throughput per core count,
    usable memory) and record it as a measured machine record, signed with the project's runner
    key (made on first use; with --no-ingest only a key the project has signs it)."""
    require("kernels", "luma machine characterize")  # its matmul probes run torch in child processes
    counts = cores or list(range(1, len(usable_cpus()) + 1))
    plan = [("bandwidth", float(k)) for k in counts] + [("matmul", float(k)) for k in counts]
    with Tracker("machine characterize", plan, unit="probe") as progress:
        measured = characterize_host(command_settings(), quick, cores, name, ingest, out, progress, allow_contended)
    rec, recorded = measured.record, measured.recorded
    if fmt == "json":
        click.echo(json.dumps(rec.model_dump(mode="json", exclude_none=True), indent=2))
    else:
        print_figures(rec)
    if recorded:
        click.echo(f"recorded measured machine {rec.name} in the KB ({recorded})", err=True)
