"""What the ledger's columns accept and how its times read back: plain Python, no database driver,
so the write checks and the readers of trust records need not import SQLAlchemy."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from luma.errors import LedgerError

#: Longest text of each bounded column, in characters: checked before any write, the same on
#: every database (SQLite would store longer text; PostgreSQL refused it, echoing the payload).
MAX_LENGTHS = {"kind": 64, "content_hash": 64, "evidence_class": 32, "submitter": 256, "source": 1024}


def check_text(field: str, value: str, source: str | None = None) -> None:
    """LedgerError when `value` does not fit the ledger's `field` column."""
    limit = MAX_LENGTHS[field]
    if len(value) > limit:
        raise LedgerError(f"is {len(value)} characters long, over the ledger's limit of {limit}", source=source,
                          field=field)
    if "\x00" in value:
        raise LedgerError("holds a NUL character", source=source, field=field)


def as_utc(value: datetime) -> datetime:
    """SQLite hands datetimes back without a zone; they were written in UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def sqlite_path(url: str) -> Path | None:
    """The file of a plain `sqlite:///PATH` ledger URL; None for any other URL (a server, an
    in-memory database, driver options after `?`)."""
    if not url.startswith("sqlite:///") or "?" in url or len(url) == len("sqlite:///"):
        return None
    return Path(url[len("sqlite:///"):])


def missing(url: str) -> bool:
    """True when the ledger at `url` does not exist yet (an SQLite file not made): readers then
    read nothing, and create nothing."""
    return url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file()
