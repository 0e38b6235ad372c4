"""Pages of a query's answer: `LIMIT`/`OFFSET` put where the engine can use them.

A query without its own slice gets `LIMIT n OFFSET m` at the end (SPARQL's solution modifiers
apply to the whole answer). A named query may instead mark where its page belongs with a
`${page}` slot (kb/query/named.py): e.g. on the boundaries of qualified-boundaries before its
columns are joined, which Oxigraph evaluates without building the whole answer first. Without
ORDER BY, pages follow the engine's order, which is the same for the same KB contents: the pages
of an unchanged KB hold every row once.
"""

from __future__ import annotations

from luma.errors import QueryError

#: The slot a named query marks for its page.
PAGE_SLOT = "${page}"


def check_page(limit: int | None, offset: int) -> None:
    """QueryError naming the field when a page bound is not a whole number >= 0."""
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise QueryError(f"must be a whole number >= 0, got {value!r}", field=name)


def slice_clause(limit: int | None, offset: int = 0) -> str:
    """`LIMIT n OFFSET m` (the parts that apply), or "" for the whole answer."""
    check_page(limit, offset)
    parts = ([f"LIMIT {limit}"] if limit is not None else []) + ([f"OFFSET {offset}"] if offset else [])
    return " ".join(parts)


def paged(sparql: str, limit: int | None, offset: int = 0, source: str = "query") -> str:
    """`sparql` with its answer sliced to [offset, offset + limit); the text itself when neither is
    given. QueryError when the query cannot take a page at its end: an ASK query (one answer), a
    query with its own top-level LIMIT/OFFSET (change those instead), or one ending in a VALUES
    clause (which must stay last)."""
    clause = slice_clause(limit, offset)
    if not clause:
        return sparql
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        query = parseQuery(sparql)[1]
    except (ParseException, RecursionError):
        return sparql + "\n" + clause  # the query check names the syntax error at its own position
    if query.name == "AskQuery":
        raise QueryError("an ASK query has one answer: there is nothing to page", source=source, field="limit")
    if "limitoffset" in query:
        raise QueryError("the query has its own LIMIT/OFFSET: change those rather than page it", source=source,
                         field="limit")
    if "valuesClause" in query:
        raise QueryError("the query ends in a VALUES clause, after which nothing may follow: page it with "
                         "LIMIT/OFFSET before that clause", source=source, field="limit")
    # On a line of its own: the query may end in a comment.
    return sparql + "\n" + clause
