"""Named queries: `.rq` files shipped in `kb/queries/`, run with `luma kb query --name NAME`."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from luma.errors import UnknownName


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    sparql: str


def named_queries() -> dict[str, NamedQuery]:
    """Every shipped named query, by name (the file name without `.rq`)."""
    out = {}
    for entry in importlib.resources.files("luma.kb.queries").iterdir():
        if entry.name.endswith(".rq"):
            text = entry.read_text()
            desc = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("# description:")), "")
            name = entry.name[:-3]
            out[name] = NamedQuery(name, desc, text)
    return dict(sorted(out.items()))


def get_named_query(name: str) -> NamedQuery:
    queries = named_queries()
    try:
        return queries[name]
    except KeyError:
        raise UnknownName(f"no named query {name!r} (known: {', '.join(queries)})", source="--name") from None
