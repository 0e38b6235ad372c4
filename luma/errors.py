"""The one error hierarchy of LUMA.

Every error names what is at fault (a file, a field, a query) so that the CLI can print one
line and exit non-zero without a traceback.
"""

from __future__ import annotations


class LumaError(Exception):
    """Base of every error LUMA raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message as the CLI prints it: `source: field: message`, on one line whatever a
        library below put into it (a file name or a parser's message may hold line breaks)."""
        parts = [p for p in (self.source, self.field) if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else str(self.message)
        return " ".join(text.split()) if "\n" in text or "\r" in text else text


class ConfigError(LumaError):
    """A setting (environment variable, URL, project directory) is invalid."""


class RecordError(LumaError):
    """An ingested record (file, JSON/YAML, schema, unit, shape) is invalid."""


class RdfSyntaxError(LumaError):
    """Plain RDF given to `luma kb load` does not parse."""


class QueryError(LumaError):
    """A SPARQL query is malformed or failed."""


class QueryRefused(QueryError):
    """A query asks for something the read-only query path never does (update, SERVICE, LOAD)."""


class QueryTimeout(QueryError):
    """A query ran longer than its time-out."""


class StoreError(LumaError):
    """The knowledge-base store (embedded or remote) failed or answered incompletely."""


class StoreBusy(StoreError):
    """The embedded knowledge base is held by another luma process (kb/store/access.py)."""


class LedgerError(LumaError):
    """The evidence ledger refused or failed an operation."""


class UnknownName(LumaError):
    """A named thing (named query, backend scheme, format) does not exist."""


class TensorError(LumaError):
    """A tensor or a quantisation setting given to a kernel is invalid (NaN/Inf, bits, axis, shape)."""
