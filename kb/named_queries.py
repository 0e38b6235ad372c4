"""Named queries: `.rq` files shipped in `kb/queries/`, run with `luma kb query --name NAME`.

A file starts with `# description:` and may say `# derived-by: RULE-ID …`: it reads what those
rules derive (and not the records themselves), so it has nothing to answer before `luma rules
run`. A `${page}` slot marks where a page's LIMIT/OFFSET belongs (kb/paging.py); without one
they go at the end.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from luma.errors import UnknownName
from luma.kb.paging import PAGE_SLOT, paged, slice_clause


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    template: str
    #: Rules whose derived facts the query reads.
    derived_by: tuple[str, ...] = ()

    @property
    def sparql(self) -> str:
        """The query for the whole answer."""
        return self.text()

    def text(self, limit: int | None = None, offset: int = 0) -> str:
        """The query for the answer's rows [offset, offset + limit) (all of them by default)."""
        if PAGE_SLOT in self.template:
            return self.template.replace(PAGE_SLOT, slice_clause(limit, offset))
        return paged(self.template, limit, offset, source=self.name)


def _header(text: str, key: str) -> str:
    prefix = f"# {key}:"
    return next((line[len(prefix):].strip() for line in text.splitlines() if line.startswith(prefix)), "")


def named_queries() -> dict[str, NamedQuery]:
    """Every shipped named query, by name (the file name without `.rq`)."""
    out = {}
    for entry in importlib.resources.files("luma.kb.queries").iterdir():
        if entry.name.endswith(".rq"):
            text = entry.read_text()
            name = entry.name[:-3]
            out[name] = NamedQuery(name, _header(text, "description"), text, tuple(_header(text, "derived-by").split()))
    return dict(sorted(out.items()))


def get_named_query(name: str) -> NamedQuery:
    """The named query `name`; UnknownName listing the known ones otherwise."""
    queries = named_queries()
    try:
        return queries[name]
    except KeyError:
        raise UnknownName(f"no named query {name!r} (known: {', '.join(queries)})", field="name") from None
