"""`luma kb query`: a read-only SPARQL query over the KB (or a partner's view of it), one page or
the whole answer, as a table for people or the W3C results formats."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.kb.access import maybe_exploratory, open_for_reading
from luma.cli.output import format_option, print_rows, raw_requested
from luma.cli.project import READ, project, require, settings as command_settings
from luma.cli.sparql_table import print_table as print_sparql_table
from luma.cli.spreadsheet_csv import print_sparql_csv
from luma.errors import LumaError
from luma.kb.records.input_files import QUERY_FILE, read_text
from luma.kb.store.base import QueryLimits
from luma.kb.query.named import get_named_query, named_queries
from luma.kb.query.paging import paged
from luma.kb.query.scope import Scope, scoped_query
from luma.rules.derivations import require as require_derived
from luma.rules.loader import load_all
from luma.settings import MIN_QUERY_MEMORY, parse_size


@click.command()
@click.argument("sparql", required=False)
@click.option("--file", "query_file", type=click.Path(dir_okay=False, path_type=Path), help="Read the query from a file.")
@click.option("--name", "query_name", help="Run a named query (see --list).")
@click.option("--list", "list_names", is_flag=True, help="List the named queries and exit.")
@click.option("--timeout", type=click.FloatRange(min=0.001), default=60.0, show_default=True,
              help="Seconds before the query is stopped.")
@click.option("--memory", default=None, metavar="SIZE",
              help="Memory the query may use, e.g. 2GiB (default: $LUMA_QUERY_MEMORY, else 4GiB).")
@click.option("--scope", default="owner", show_default=True, metavar="owner|partner:NAME",
              help="What the query sees: everything (owner), or the public facts and one partner's records. "
                   "A view, not access control: see docs/security.md.")
@click.option("--exploratory", is_flag=True,
              help="Query the last `luma rules run --exploratory` (its copy of the KB) instead of the KB.")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Rows of the answer to return (a page; see --offset). Without ORDER BY, pages follow the "
                   "store's order, the same while the KB does not change.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Rows of the answer to skip before the page.")
@format_option()
@project(READ)
def query(sparql, query_file, query_name, list_names, timeout, memory, scope, exploratory, limit, offset, fmt) -> None:
    """Run a read-only SPARQL query (argument, --file or --name) over all named graphs, or over
    what --scope partner:NAME may see (never another partner's records). FROM / FROM NAMED are
    honoured (within the scope). --limit/--offset return one page of the answer.

    json output is the W3C SPARQL 1.1 Query Results JSON format; csv is for spreadsheets (the
    layout of SPARQL CSV, a text cell starting with = + - @ tab or CR escaped with a leading ',
    numeric literals as they are); csv --raw is the W3C SPARQL 1.1 CSV format, byte for byte.
    Updates, SERVICE, LOAD and \\u escapes are refused. On the embedded store the query runs in a
    child process without network access, stopped at --timeout, --memory or the answer size
    limit ($LUMA_QUERY_MAX_ANSWER_BYTES, default 2GiB). Named queries that read what the rules
    derive (qualified-boundaries …) need `luma rules run` first, and say so.
    """
    import tempfile


    if list_names:
        rows = [{"name": q.name, "description": q.description} for q in named_queries().values()]
        print_rows(rows, ["name", "description"], fmt)
        return
    given = [x for x in (sparql, query_file, query_name) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of: a SPARQL argument, --file F, --name NAME")
    source, named = "query", None
    try:
        if query_file:
            sparql = read_text(query_file, QUERY_FILE.under(command_settings()))  # untrusted: no FIFO, no device, 1 MiB
            source = str(query_file)
        if query_name:
            named = get_named_query(query_name)
            sparql, source = named.text(limit, offset), f"--name {query_name}"
        else:
            sparql = paged(sparql, limit, offset, source)
        where = Scope.parse(scope)
        settings = command_settings()
        memory_limit = parse_size(memory, "--memory", settings.query_memory, MIN_QUERY_MEMORY)
    except LumaError as exc:
        flag = _FLAGS.get(exc.field) or (exc.source if exc.source in _FLAGS.values() else None)
        if flag is None:
            raise
        if flag == "--name":  # not a malformed value: a name this LUMA does not ship (exit 1)
            raise click.ClickException(f"{flag}: {exc.message}") from None
        raise click.BadParameter(exc.message, param_hint=flag) from None
    from luma.kb.query.safety import check_user_query  # rdflib's parser: `luma kb query --help` stays light

    # LUMA's usual prefixes (`luma:` …) are declared in front; the check sees the text that runs.
    checked = check_user_query(sparql, source)
    limits = QueryLimits(timeout, memory_limit, settings.query_answer_bytes, settings.require_sandbox)
    # csv for people is made from TSV, which keeps each term's datatype (a number is not escaped).
    results = ("csv" if raw_requested() else "tsv") if fmt == "csv" and checked.kind != "graph" else "json"
    require(settings)
    with (tempfile.TemporaryDirectory(prefix=".luma-query-", dir=settings.home) as spool, open_for_reading() as base,
          maybe_exploratory(base, exploratory) as view):
        _check_derived(view, named)
        try:
            answer = scoped_query(view, checked, where, results=results, limits=limits, spool=Path(spool))
        except LumaError as exc:
            if exc.field not in ("scope", "memory"):
                raise
            raise click.ClickException(f"{_FLAGS[exc.field]}: {exc.message}") from None
        _print_answer(answer, fmt)


#: Library fields (luma.errors.LumaError.field) that are this command's options.
_FLAGS = {"name": "--name", "limit": "--limit", "offset": "--offset", "scope": "--scope", "memory": "--memory"}


def _check_derived(view, named) -> None:
    """A named query that reads derived facts: a one-line error before the rules have run, a note
    on stderr when records came in after their last run."""
    if named is None or not named.derived_by:
        return

    rules = load_all(view.settings.home / "rules")
    notes = set()
    for rule in named.derived_by:
        note = require_derived(view.store, rule, f"named query {named.name}", rules).stale_note()
        if note:
            notes.add(note)
    for note in sorted(notes):
        click.echo(f"note: {note}", err=True)


#: Largest answer shown as a table (bigger ones: --format json or csv, streamed).
TABLE_MAX_BYTES = 64 * 2**20


def _print_answer(answer, fmt: str) -> None:
    if answer.kind == "graph":
        _stream(answer)
    elif fmt == "table":
        if answer.size() > TABLE_MAX_BYTES:
            raise click.ClickException(f"the answer is {answer.size() / 2**20:.0f} MiB: too large for a table; "
                                       "use --format json or csv")
        print_sparql_table(answer.json())
    elif fmt == "json":
        if not answer.complete:
            answer.json()  # refuse to pass on an answer that broke off
        _stream(answer)
    elif raw_requested():
        _stream(answer)
    else:
        print_sparql_csv(answer)


def _stream(answer) -> None:
    """The answer to stdout as it is (streamed from its spool file), ending with a newline."""
    import sys

    sys.stdout.flush()
    out = sys.stdout.buffer
    answer.write_to(out)
    if answer.size() and not _ends_with_newline(answer):
        out.write(b"\n")
    out.flush()


def _ends_with_newline(answer) -> bool:
    if answer.file is None:
        return answer.body.endswith(b"\n")
    with open(answer.file, "rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"
