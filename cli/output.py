"""Printing results: rich tables for people, standard JSON for machines, CSV for spreadsheets
(escaped, cli/spreadsheet_csv.py; `--raw` for programs)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence

import click

FORMATS = ("table", "json", "csv")


#: How every message of a failed command starts: click's own prefix for usage errors and
#: ClickException, used by the CLI's own lines too (one style, `Error: ...`).
ERROR_PREFIX = "Error: "


def format_help(choices: Sequence[str]) -> str:
    """The --format help for exactly the formats offered ("table for people, json for machines.")."""
    machine = [c for c in choices if c != "table"]
    people = "table for people" if "table" in choices else ""
    return ", ".join(x for x in (people, f"{'/'.join(machine)} for machines" if machine else "") if x) + "."


#: Where `--raw` is kept for the command being run (click's ctx.meta, shared by its contexts).
_RAW_KEY = "luma.output.raw"
RAW_HELP = ("With --format csv: write every cell as it is, for programs. Without it, csv is for people: "
            "a text cell starting with = + - @ tab or CR gets a leading ' so that a spreadsheet does not run "
            "it as a formula (numbers stay numbers).")


def format_option(default: str = "table", choices: Sequence[str] = FORMATS):
    """`--format`, and `--raw` where csv is offered: one decorator, so every command that writes
    CSV escapes it the same way and offers the same opt-out."""
    fmt = click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default=default, show_default=True,
        help=format_help(choices),
    )
    if "csv" not in choices:
        return fmt
    # Not passed to the command function (expose_value=False): print_rows and `kb query` read it
    # from the context, so the commands' signatures stay as they are.
    raw = click.option("--raw", is_flag=True, expose_value=False, callback=_remember_raw, help=RAW_HELP)
    return lambda f: fmt(raw(f))


def _remember_raw(ctx: click.Context, param, value: bool) -> bool:
    ctx.meta[_RAW_KEY] = value
    return value


def raw_requested() -> bool:
    """Whether the command being run was given `--raw` (False outside a command)."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(_RAW_KEY))


#: The width of a table written to a file or a pipe when COLUMNS is not set: wide enough that no
#: cell folds or is cut (rich would otherwise assume 80 columns and fold `trial` into `tria/l`); a
#: table is then as wide as its widest row, as a CI log or `less -S` shows it best.
UNBOUNDED = 100_000


def table_width(stream=None) -> int | None:
    """The width a table is laid out in on `stream` (stdout by default): None (the terminal's, or
    COLUMNS when set) on a terminal or where COLUMNS is set, else UNBOUNDED."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return None  # rich honours COLUMNS itself
    try:
        return None if stream.isatty() else UNBOUNDED
    except (AttributeError, ValueError):  # a closed or odd stream: as a file
        return UNBOUNDED


def console(*, stderr: bool = False, width: int | None = None):
    """A rich Console for tables: `width` when given, else the terminal's on a terminal, COLUMNS
    when set, and no width limit on a file or pipe (table_width). Every table the CLI prints goes
    through one of these."""
    from rich.console import Console  # reason: rich loads only for commands that print a table

    return Console(stderr=stderr, width=width or table_width(sys.stderr if stderr else sys.stdout), soft_wrap=False)


def print_rows(rows: list[dict], columns: Sequence[str], fmt: str, title: str | None = None,
               raw: bool | None = None) -> None:
    """Print plain rows (dicts of scalars) as a table, a JSON array, or CSV (formula-leading text
    escaped unless `raw`; None: as the command line's --raw says; cli/spreadsheet_csv.py)."""
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
    elif fmt == "csv":
        from luma.cli.spreadsheet_csv import rows_csv  # reason: decimal and csv load only for --format csv

        click.echo(rows_csv(rows, columns, raw_requested() if raw is None else raw), nl=False)
    else:
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        console().print(table)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def echo_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def slug_callback(ctx, param, text: str | None) -> str | None:
    """A click callback for names that become IRIs and file names (partners, runner keys)."""
    if text is not None and not _SLUG.match(text):
        raise click.BadParameter(f"a slug: lower-case letters, digits, '.', '_' or '-' (at most 64), got {text!r}")
    return text
