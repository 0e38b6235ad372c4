"""Reads of the ledger for commands that only read (`luma kb stats`, `luma model predict`, reports).

A plain SQLite ledger (the default) is read with Python's own sqlite3, read-only: these commands
then start without SQLAlchemy (about 0.15 s of imports, most of a read command's start-up).
Any other URL (PostgreSQL, driver options) goes through `luma.kb.store.ledger.Ledger`. Both give the
same answers: a ledger without its table yet holds nothing; one that cannot be read is a one-line
LedgerError, never an empty answer (tests/kb/store/test_ledger_reads.py runs every reader on both).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from luma.errors import LedgerError
from luma.kb.store.ledger_fields import missing, sqlite_path

_TABLE = "ledger_record"


def _sqlite(url: str, sql: str, params: tuple = ()) -> list[tuple] | None:
    """Rows of `sql` on the SQLite ledger at `url` (opened read-only); [] when it has no table
    yet; None when `url` is not a plain SQLite file (the caller asks the full ledger)."""
    path = sqlite_path(url)
    if path is None:
        return None
    try:
        # mode=ro: a reader never creates or changes the file; the timeout matches the writer's
        # busy_timeout (kb/store/ledger.py), so a reader waits out a checkpoint instead of failing.
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)) as conn:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_TABLE,)).fetchone() is None:
                return []
            return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise LedgerError(f"cannot read the ledger: {reason}", source=url) from None


def payloads_of_kind(settings, kind: str) -> list[tuple[str, str]]:
    """(content hash, JSON payload) of every record of `kind` in the ledger of the project
    `settings` names, oldest first. Reads nothing (and creates nothing) when the project has no
    ledger yet."""
    if missing(settings.db_url):
        return []
    rows = _sqlite(settings.db_url, f"SELECT content_hash, payload FROM {_TABLE} WHERE kind = ? ORDER BY id", (kind,))
    if rows is not None:
        return rows
    from luma.kb.store.ledger import Ledger  # SQLAlchemy: only for a server ledger

    ledger = Ledger(settings.db_url)
    try:
        return ledger.rows_of_kinds([kind], "content_hash", "payload")
    finally:
        ledger.dispose()


def last_id(url: str) -> int | None:
    """The id of the ledger's last record (0 when it holds none); None when `url` is not a plain
    SQLite file."""
    rows = _sqlite(url, f"SELECT COALESCE(MAX(id), 0) FROM {_TABLE}")
    return None if rows is None else (rows[0][0] if rows else 0)


def count_by(url: str) -> dict[tuple[str, str], int] | None:
    """Record counts by (kind, evidence class); None when `url` is not a plain SQLite file."""
    rows = _sqlite(url, f"SELECT kind, evidence_class, COUNT(*) FROM {_TABLE} GROUP BY kind, evidence_class")
    return None if rows is None else {(k, e): n for k, e, n in rows}
