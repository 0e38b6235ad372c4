"""Printing results: rich tables for people, standard JSON for machines, CSV for spreadsheets
(escaped, cli/spreadsheet_csv.py; `--raw` for programs)."""

from __future__ import annotations

import json
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


def compact(value: str) -> str:
    """Shorten IRIs with the project's prefixes for display."""
    from luma.kb.vocab import PREFIXES

    for prefix, ns in PREFIXES.items():
        if value.startswith(ns) and len(value) > len(ns):
            return f"{prefix}:{value[len(ns):]}"
    return value


def print_rows(rows: list[dict], columns: Sequence[str], fmt: str, title: str | None = None,
               raw: bool | None = None) -> None:
    """Print plain rows (dicts of scalars) as a table, a JSON array, or CSV (formula-leading text
    escaped unless `raw`; None: as the command line's --raw says; cli/spreadsheet_csv.py)."""
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, default=str))
    elif fmt == "csv":
        from luma.cli.spreadsheet_csv import rows_csv

        click.echo(rows_csv(rows, columns, raw_requested() if raw is None else raw), nl=False)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        Console(soft_wrap=False).print(table)


def print_sparql_table(answer: dict, width: int | None = None) -> None:
    """A SPARQL JSON answer as a table for people: human units, short IRIs, fitted to the
    terminal (cli/sparql_table.py); json (and csv with --raw) stay the W3C results formats."""
    from luma.cli.sparql_table import print_table

    print_table(answer, width)


_ENTITY_SLUG = re.compile(r"^id:(workload|architecture|intervention|model|agent)/(.+?)(?:-[0-9a-f]{8}){0,2}$")
_HASHED = re.compile(r"^id:(chain|record|state|contract)/([0-9a-f]{10})[0-9a-f]+$")


def display(value: str) -> str:
    """Tables only: IRIs shortened for reading (`id:workload/embed-minilm-1a2b3c4d` -> `embed-minilm`)."""
    short = compact(value)
    m = _ENTITY_SLUG.match(short)
    if m:
        return m.group(2)
    m = _HASHED.match(short)
    if m:
        return f"{m.group(1)}/{m.group(2)}…"
    return short


def _term(binding: dict | None) -> str:
    if binding is None:
        return ""
    if binding["type"] == "uri":
        return display(binding["value"])
    return binding["value"]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_sparql_csv(answer) -> None:
    """A SELECT/ASK answer spooled as SPARQL TSV, as CSV for people (formula-leading text
    escaped, numeric literals as they are: cli/spreadsheet_csv.py), streamed."""
    from luma.cli.spreadsheet_csv import sparql_csv

    last = ""
    for chunk in sparql_csv(answer):
        if chunk:
            click.echo(chunk, nl=False)
            last = chunk
    if not last.endswith("\n"):
        click.echo()  # an ASK answer: every answer ends with a newline, as the raw one does


def echo_bytes(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def slug_callback(ctx, param, text: str | None) -> str | None:
    """A click callback for names that become IRIs and file names (partners, runner keys)."""
    if text is not None and not _SLUG.match(text):
        raise click.BadParameter(f"a slug: lower-case letters, digits, '.', '_' or '-' (at most 64), got {text!r}")
    return text


def submitter_option(help_text: str = "Who submits (default: user@host)."):
    """`--submitter`, checked against the ledger's column before anything is read or written."""

    def check(ctx, param, value):
        if value is None:
            return value
        from luma.errors import LedgerError
        from luma.kb.store.ledger import check_text

        try:
            check_text("submitter", value)
        except LedgerError as exc:
            raise click.BadParameter(exc.message) from None
        return value

    return click.option("--submitter", default=None, callback=check, help=help_text)
