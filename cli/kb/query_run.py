"""What `luma kb query` does (cli/kb/query.py parses the options): check the query, run it in the
scope asked for, print one page or the whole answer."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from luma.cli.kb.access import maybe_exploratory, open_for_reading
from luma.cli.output import print_rows, raw_requested
from luma.cli.project import exists, require, settings as command_settings
from luma.cli.sparql_table import print_table as print_sparql_table
from luma.cli.spreadsheet_csv import print_sparql_csv
from luma.errors import LumaError
from luma.kb.query.named import get_named_query, named_queries
from luma.kb.query.paging import paged
from luma.kb.query.safety import check_user_query
from luma.kb.query.scope import Scope, scoped_query
from luma.kb.records.input_files import QUERY_FILE, read_text
from luma.kb.store import isolated_query
from luma.kb.store.base import QueryLimits
from luma.rules.derivations import require as require_derived
from luma.rules.loader import load_all
from luma.settings import MIN_QUERY_MEMORY, parse_size, rules_cache


def run(sparql, query_file, query_name, list_names, timeout, memory, scope, exploratory, limit, offset, fmt) -> None:
    """Run `luma kb query` with its parsed options (see its help)."""
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
        if flag == "--name":  # a name this LUMA does not ship: a usage mistake (2), on one Error: line
            error = click.ClickException(f"{flag}: {exc.message}")
            error.exit_code = 2
            raise error from None
        raise click.BadParameter(exc.message, param_hint=flag) from None  # a usage mistake, exit 2
    if settings.kb_url.startswith("oxigraph:"):
        isolated_query.prestart()  # the query's child starts now: its start-up overlaps what follows
    # LUMA's usual prefixes (`luma:` …) are declared in front; the check sees the text that runs.
    # The parser's verdict is kept in the project (a reader creates nothing where there is none).
    cache = settings.home / "cache" / "query-check" if exists(settings) else None
    checked = check_user_query(sparql, source, cache)
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
        if named is not None and where.partner is None and _no_rows(answer, results):
            # On stderr: json and csv output stay the answer alone.
            from luma.rules.empty_answer import why_empty  # rdflib and networkx: only for an empty answer

            click.echo(f"note: no rows: {why_empty(view.store, named, _analysed(view))}", err=True)


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


def _analysed(view) -> list:
    """The rule set in use, analysed (cached under the project, as `luma rules run` caches it)."""
    from luma.rules.analysis import analyse_cached  # rdflib and networkx: only for an empty answer

    home = view.settings.home
    return [analyse_cached(r, home / "cache" / "rules" / "analysis", rules_cache() / "analysis")
            for r in load_all(home / "rules")]


def _no_rows(answer, results: str) -> bool:
    """Whether a SELECT answer holds no row (an empty answer is a few hundred bytes at most)."""
    if answer.kind != "select" or answer.size() > 4096:
        return False
    if results == "json":
        return not answer.json()["results"]["bindings"]
    return not answer.data().strip(b"\r\n").count(b"\n")  # the header line alone


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
