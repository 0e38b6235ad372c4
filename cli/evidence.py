"""`luma evidence`: the evidence set shipped with LUMA -- list, verify, load, record."""

from __future__ import annotations

import os
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, WRITE, project, settings
from luma.errors import ConfigError
from luma.experiments.evidence import recording, shipped

_FOLDER = click.option("--from", "folder", type=click.Path(file_okay=False, exists=True, path_type=Path),
                       default=None, help="An evidence folder (default: the set shipped with LUMA).")
_COLUMNS = ["machine", "cpu", "isa", "accelerator", "date", "contract", "sprint", "records", "wall_s", "steal_pct",
            "outcome"]
_TABLE = ["machine", "contract", "records", "wall_s", "steal_pct", "outcome"]


@click.command("list")
@_FOLDER
@format_option()
@project(NONE)
def list_cmd(folder: Path | None, fmt: str) -> None:
    """Machines and contracts of the shipped evidence set. Per contract: records, wall time, CPU
    steal while it ran, outcome."""
    print_rows(shipped.rows(folder), _TABLE if fmt == "table" else _COLUMNS, fmt, title="shipped evidence")


@click.command("verify")
@_FOLDER
@project(NONE)
def verify_cmd(folder: Path | None) -> None:
    """Check the evidence set's signatures, hashes and manifest; one line per problem. Every record's
    signature against its machine's shipped key, its content hash against the manifest's, and the
    manifest against the files (counts, SHA-256s)."""
    v = shipped.verify(folder)
    for problem in v.problems:
        click.echo(f"Error: {problem}", err=True)
    if not v.ok:
        raise SystemExit(1)
    click.echo(f"verified {v.count()} record(s) from {len(v.records)} machine(s) in {v.root}")


@click.command("load")
@_FOLDER
@format_option(choices=("table", "json"))
@project(WRITE)
def load_cmd(folder: Path | None, fmt: str) -> None:
    """Load the shipped evidence set, each machine's key trusted for its records only. All or
    nothing, and a second load adds nothing."""
    out = shipped.load(settings(), folder)
    rows = [{**t, "purpose": shipped.purpose(t["machine"])} for t in out.trusted]
    if fmt == "json":
        import json  # only the json format needs it

        click.echo(json.dumps({"trusted": rows, "added": out.added, "already_present": out.present}, indent=2))
        return
    print_rows(rows, ["machine", "fingerprint", "records", "trust"], fmt, title="keys trusted for the shipped records")
    click.echo(f"loaded {out.added} record(s), {out.present} already present; each key above authenticates "
               "only the shipped records it signed (`luma runner list --format json`, `luma runner revoke NAME`)")


def _default_out() -> Path:
    root = shipped.default_root()
    if not os.access(root, os.W_OK) or "site-packages" in root.parts:
        raise ConfigError(f"the shipped set at {root} is not a source checkout's: give --out FOLDER", source="--out")
    return root


@click.command("record")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Evidence folder to write into (default: the package folder of a source checkout).")
@click.option("--contract", "names", multiple=True, help="Run only this shipped contract (repeatable).")
@click.option("--machine-id", help="The machine's id in the set (default: CPU, widest ISA and CPUs as a slug).")
@click.option("--append", is_flag=True, help="Add these contracts to the machine's entry instead of replacing it.")
@format_option(choices=("table", "json"))
@project(WRITE)
def record_cmd(out: Path | None, names: tuple[str, ...], machine_id: str | None, append: bool, fmt: str) -> None:
    """Run the shipped contracts here and add this machine to an evidence folder. Run it in a scratch
    project (LUMA_HOME): its records, public key and manifest entry go to --out."""
    machine = recording.record(settings(), out or _default_out(), list(names) or None, None, machine_id, append)
    print_rows(machine["contracts"], ["name", "sprint", "records", "wall_s", "outcome"], fmt,
               title=f"machine {machine['id']} ({machine['cpu_model']})")
