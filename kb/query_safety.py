"""The read-only query path: parse every user query and refuse what it must never run.

Oxigraph executes `SERVICE` and `LOAD` through its own HTTP client, with no switch to turn it
off (DESIGN §9), so the query is *parsed* (rdflib's SPARQL grammar) and its syntax tree
inspected before it reaches the engine; a regular expression would be fooled by comments,
strings and prefixes.
"""

from __future__ import annotations

from pyparsing import ParseException, ParseResults
from rdflib.plugins.sparql.parser import parseQuery, parseUpdate
from rdflib.plugins.sparql.parserutils import CompValue

from luma.errors import QueryError, QueryRefused

#: Syntax-tree nodes that would make the engine reach outside the knowledge base.
_REMOTE_NODES = {"ServiceGraphPattern": "SERVICE (remote federation) is not allowed"}
_KINDS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "graph", "DescribeQuery": "graph"}


def with_prefixes(sparql: str) -> str:
    """The query with LUMA's usual prefixes (luma:, id:, dim:, prov:, rdf:, rdfs:, xsd:, qudt:,
    unit:, …) declared in front, except those the query declares itself."""
    import re

    from luma.kb.vocab import PREFIXES

    declared = {m.lower() for m in re.findall(r"(?i)\bPREFIX\s+([A-Za-z][\w.-]*)?:", sparql)}
    # One line, so that the line numbers of syntax errors stay the user's.
    head = "".join(f"PREFIX {p}: <{iri}> " for p, iri in PREFIXES.items() if p.lower() not in declared)
    return head + sparql


def check_read_only(sparql: str, source: str = "query") -> str:
    """Return the query kind (select, ask, graph) or raise QueryRefused / QueryError."""
    if not sparql or not sparql.strip():
        raise QueryError("the query is empty", source=source)
    try:
        tree = parseQuery(sparql)
    except ParseException as exc:
        if _is_update(sparql):
            raise QueryRefused(
                "updates (INSERT, DELETE, LOAD, CLEAR, DROP, …) are not allowed: `luma kb query` is read-only",
                source=source,
            ) from None
        raise QueryError(f"invalid SPARQL at line {exc.lineno}, column {exc.col}: {exc.msg}", source=source) from None
    names = set(_node_names(tree))
    for node, message in _REMOTE_NODES.items():
        if node in names:
            raise QueryRefused(message, source=source)
    for node, kind in _KINDS.items():
        if node in names:
            return kind
    raise QueryError("unsupported query form", source=source)


def _is_update(sparql: str) -> bool:
    try:
        parseUpdate(sparql)
    except ParseException:
        return False
    return True


def _node_names(node):
    if isinstance(node, CompValue):
        yield node.name
        for value in node.values():
            yield from _node_names(value)
    elif isinstance(node, (list, tuple, ParseResults)):
        for value in node:
            yield from _node_names(value)
