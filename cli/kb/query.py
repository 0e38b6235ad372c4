"""`luma kb query`: a read-only SPARQL query over the KB (or a partner's view of it), one page or
the whole answer, as a table for people or the W3C results formats."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.output import format_option
from luma.cli.project import READ, project


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
    # rdflib, pyoxigraph and the store stack: `luma kb query --help` stays light
    from luma.cli.kb.query_run import run

    run(sparql, query_file, query_name, list_names, timeout, memory, scope, exploratory, limit, offset, fmt)
