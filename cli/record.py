"""`luma record template`: a complete, valid, commented skeleton of a record kind to write by hand
(luma.kb.records.template)."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.project import NONE, project
from luma.kb.records.kinds import COMMAND_ONLY, FILE_KINDS
from luma.kb.records.template import template

#: Every kind `luma kb ingest` accepts from a file.
TEMPLATE_KINDS = tuple(k for k in FILE_KINDS if k not in COMMAND_ONLY)


@click.command("template")
@click.argument("kind", type=click.Choice(TEMPLATE_KINDS))
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="yaml: every field explained in a comment; json: the same record, without comments.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout (never over an existing file).")
@project(NONE)
def template_cmd(kind: str, fmt: str, out: Path | None) -> None:
    """Print a complete, valid, commented skeleton of a KIND record.

    Edit it and ingest it; the values are made up for illustration. A measured record must then be signed (`luma runner
    sign FILE`); `luma kb ingest FILE` lists every problem of a record, one per line."""
    text = template(kind, fmt)
    if out is None:
        click.echo(text, nl=False)
    else:
        if out.exists():
            raise click.UsageError(f"{out} exists: choose another --out (a template never overwrites a record)")
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}", err=True)
    if fmt == "json":
        click.echo(f"(JSON has no comments: `luma record template {kind}` explains every field in YAML)", err=True)
