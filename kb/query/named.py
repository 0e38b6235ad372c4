"""Named queries: `.rq` files shipped in `kb/queries/`, run with `luma kb query --name NAME`.

A file starts with `# description:` and may say `# derived-by: RULE-ID …`: it reads what those
rules derive (and not the records themselves), so it has nothing to answer before `luma rules
run`. A page of a named query (`--limit/--offset`) is its LIMIT/OFFSET at the end (kb/query/paging.py),
unless the query ships a form for pages, `NAME.page.rq`, with a `${page}` slot where the slice
belongs: Oxigraph keeps no statistics, so the plan that returns the whole answer fastest (hash
joins) is not the one that finds a few rows fastest (index lookups per row).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

from luma.errors import UnknownName
from luma.kb.query.paging import PAGE_SLOT, paged, slice_clause

#: File suffix of a named query's form for pages.
PAGE_SUFFIX = ".page.rq"


@dataclass(frozen=True)
class NamedQuery:
    """A shipped query (`luma kb query --name NAME`): its description, its text, the rules whose
    facts it reads, and its form for pages when it has one."""

    name: str
    description: str
    template: str
    #: Rules whose derived facts the query reads.
    derived_by: tuple[str, ...] = ()
    #: The form for pages (with a `${page}` slot), when the query ships one.
    page_template: str | None = None

    @property
    def sparql(self) -> str:
        """The query for the whole answer."""
        return self.template

    def text(self, limit: int | None = None, offset: int = 0) -> str:
        """The query for the answer's rows [offset, offset + limit) (all of them by default)."""
        clause = slice_clause(limit, offset)
        if not clause:
            return self.template
        if self.page_template is not None:
            return self.page_template.replace(PAGE_SLOT, clause)
        return paged(self.template, limit, offset, source=self.name)


def _header(text: str, key: str) -> str:
    prefix = f"# {key}:"
    return next((line[len(prefix):].strip() for line in text.splitlines() if line.startswith(prefix)), "")


def named_queries() -> dict[str, NamedQuery]:
    """Every shipped named query, by name (the file name without `.rq`)."""
    files = {e.name: e for e in importlib.resources.files("luma.kb.queries").iterdir() if e.name.endswith(".rq")}
    out = {}
    for file_name, entry in files.items():
        if file_name.endswith(PAGE_SUFFIX):
            continue
        text = entry.read_text()
        name = file_name[:-3]
        page = files.get(name + PAGE_SUFFIX)
        out[name] = NamedQuery(name, _header(text, "description"), text, tuple(_header(text, "derived-by").split()),
                               page.read_text() if page is not None else None)
    return dict(sorted(out.items()))


def get_named_query(name: str) -> NamedQuery:
    """The named query `name`; UnknownName listing the known ones otherwise."""
    queries = named_queries()
    try:
        return queries[name]
    except KeyError:
        raise UnknownName(f"no named query {name!r} (known: {', '.join(queries)})", field="name") from None
