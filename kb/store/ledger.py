"""The evidence ledger: append-only records of everything ingested (SQLModel).

The ledger is the source of truth and the commit point: a batch is ingested when its ledger
transaction commits. The knowledge base is a projection of it. Rows are never updated or
deleted (database triggers refuse it); identity is the content hash, so re-submitting the
same record is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import event, func, insert, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Field, SQLModel, create_engine

from luma.errors import ConfigError, LedgerError
from luma.kb.store.ledger_fields import MAX_LENGTHS, as_utc, check_text

_CHUNK = 500  # bound on IN (...) lists: SQLite allows 999 parameters per statement


class LedgerRecord(SQLModel, table=True):
    """One ingested record."""

    __tablename__ = "ledger_record"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True, max_length=MAX_LENGTHS["kind"])
    content_hash: str = Field(unique=True, max_length=MAX_LENGTHS["content_hash"])
    evidence_class: str = Field(index=True, max_length=MAX_LENGTHS["evidence_class"])
    submitter: str = Field(max_length=MAX_LENGTHS["submitter"])
    source: str = Field(max_length=MAX_LENGTHS["source"])
    ingested_at: datetime
    schema_version: int
    payload: str


@dataclass(frozen=True)
class LedgerEntry:
    """A committed ledger row (a plain dataclass: building ORM objects costs ~100 us each)."""

    id: int
    kind: str
    content_hash: str
    evidence_class: str
    submitter: str
    source: str
    ingested_at: datetime
    schema_version: int
    payload: str


@dataclass(frozen=True)
class NewRecord:
    """What a caller appends; the ledger adds id and time."""

    kind: str
    content_hash: str
    evidence_class: str
    submitter: str
    source: str
    schema_version: int
    payload: str

    def check(self) -> None:
        """LedgerError naming the field when a text is longer than its column (or holds NUL)."""
        check_text("submitter", self.submitter)
        for name in ("kind", "content_hash", "evidence_class", "source"):
            check_text(name, getattr(self, name), source=self.source[:200] if name != "source" else None)


_TRIGGERS = {
    "sqlite": [
        "CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger_record "
        "BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
        "CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger_record "
        "BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    ],
    "postgresql": [
        "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger AS $$ "
        "BEGIN RAISE EXCEPTION 'the ledger is append-only'; END $$ LANGUAGE plpgsql",
        "DROP TRIGGER IF EXISTS ledger_append_only ON ledger_record",
        "CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger_record "
        "FOR EACH ROW EXECUTE FUNCTION ledger_append_only()",
    ],
}


class Ledger:
    """Append-only store of ingested records behind any SQLAlchemy URL."""

    def __init__(self, url: str):
        self.url = url
        try:
            self.engine: Engine = create_engine(url)
        except (SQLAlchemyError, ValueError, ImportError) as exc:
            raise ConfigError(f"cannot use ledger URL: {exc}", source="LUMA_DB_URL") from None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._table = LedgerRecord.__table__

    def init(self) -> None:
        """Create the table and its append-only triggers (idempotent; safe when several
        processes open a new project at once)."""
        for attempt in range(3):
            try:
                SQLModel.metadata.create_all(self.engine, tables=[self._table])
                with self.engine.begin() as conn:
                    for stmt in _TRIGGERS.get(self.engine.dialect.name, []):
                        conn.execute(text(stmt))
                return
            except SQLAlchemyError as exc:
                # create_all looks before it creates: another process may create in between.
                if "already exists" in db_message(exc) and attempt < 2:
                    continue
                raise LedgerError(f"cannot open ledger: {db_message(exc)}", source=_safe_url(self.url)) from None

    def existing_hashes(self, hashes: Iterable[str], *, missing_ok: bool = False) -> set[str]:
        """The subset of `hashes` already in the ledger. `missing_ok`: a ledger without its table
        yet holds none (any other database error is still a LedgerError)."""
        hashes = list(hashes)
        found: set[str] = set()
        col = self._table.c.content_hash
        try:
            with self.engine.connect() as conn:
                for i in range(0, len(hashes), _CHUNK):
                    rows = conn.execute(select(col).where(col.in_(hashes[i : i + _CHUNK])))
                    found.update(r[0] for r in rows)
        except SQLAlchemyError as exc:
            if missing_ok and self._no_table():
                return set()
            raise self._read_error(exc) from None
        return found

    def rows_of_kinds(self, kinds: Iterable[str], *columns: str, submitter: str | None = None) -> list[tuple]:
        """`columns` of every record of these kinds (that `submitter` ingested, when given: a
        campaign head finds the sprints it took in by them), oldest first. A ledger without its
        table yet (a project nothing was ingested into) has none; any other database error -- a
        login refused, an unreachable server, a damaged file -- is a LedgerError, never "no records"."""
        c = self._table.c
        stmt = select(*(c[name] for name in columns)).where(c.kind.in_(list(kinds)))
        if submitter is not None:
            stmt = stmt.where(c.submitter == submitter)
        stmt = stmt.order_by(c.id)
        try:
            with self.engine.connect() as conn:
                return [tuple(row) for row in conn.execute(stmt)]
        except SQLAlchemyError as exc:
            if self._no_table():
                return []
            raise self._read_error(exc) from None

    def _no_table(self) -> bool:
        """True only when the database answers and has no ledger table (False when it cannot
        even be asked: that error is the news)."""
        try:
            return not inspect(self.engine).has_table(self._table.name)
        except SQLAlchemyError:
            return False

    def _read_error(self, exc: SQLAlchemyError) -> LedgerError:
        return LedgerError(f"cannot read the ledger: {db_message(exc)}", source=_safe_url(self.url))

    def append(self, records: list[NewRecord], at: datetime | None = None) -> list[LedgerEntry]:
        """Append all records in one transaction (all or nothing); return them with ids."""
        if not records:
            return []
        for r in records:
            r.check()
        # In UTC, as `after` reads it back: the projection of an entry must not depend on
        # whether it came from here or from a replay.
        now = as_utc(at) if at is not None else datetime.now(timezone.utc).replace(microsecond=0)
        rows = [{**r.__dict__, "ingested_at": now} for r in records]
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Commit order = id order, so a reader never sees id n+1 before id n (the
                    # store's watermark relies on it when several runners share the ledger).
                    conn.execute(text("LOCK TABLE ledger_record IN EXCLUSIVE MODE"))
                start = conn.execute(select(func.coalesce(func.max(self._table.c.id), 0))).scalar_one()
                conn.execute(insert(self._table), rows)
                ids = dict(
                    conn.execute(
                        select(self._table.c.content_hash, self._table.c.id).where(self._table.c.id > start)
                    ).all()
                )
        except IntegrityError:
            raise LedgerError("a record of this batch was committed concurrently; nothing was written, retry") from None
        except SQLAlchemyError as exc:
            raise LedgerError(f"ledger write failed, nothing was written: {db_message(exc)}") from None
        return [LedgerEntry(id=ids[r["content_hash"]], **r) for r in rows]

    def after(self, last_id: int, batch: int = 5000) -> Iterator[LedgerEntry]:
        """Every record with id > last_id, in id order (streamed in batches)."""
        cols = self._table.c
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(select(self._table).where(cols.id > last_id).order_by(cols.id).limit(batch)).all()
            if not rows:
                return
            for row in rows:
                m = row._mapping
                yield LedgerEntry(**{**m, "ingested_at": as_utc(m["ingested_at"])})
            last_id = rows[-1].id

    def hashes_after(self, last_id: int, limit: int | None = None) -> list[tuple[int, str, str]]:
        """(id, content hash, kind) of every record with id > last_id (the first `limit` of them), in
        id order (no payloads)."""
        c = self._table.c
        query = select(c.id, c.content_hash, c.kind).where(c.id > last_id).order_by(c.id)
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(query if limit is None else query.limit(limit))]

    def entries(self, hashes: Iterable[str]) -> list[LedgerEntry]:
        """The records with these content hashes, in id order."""
        hashes = list(hashes)
        col = self._table.c.content_hash
        out: list[LedgerEntry] = []
        with self.engine.connect() as conn:
            for i in range(0, len(hashes), _CHUNK):
                for row in conn.execute(select(self._table).where(col.in_(hashes[i:i + _CHUNK]))):
                    m = row._mapping
                    out.append(LedgerEntry(**{**m, "ingested_at": as_utc(m["ingested_at"])}))
        return sorted(out, key=lambda e: e.id)

    def last_id(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.coalesce(func.max(self._table.c.id), 0))).scalar_one()

    def count_by(self) -> dict[tuple[str, str], int]:
        """Record counts by (kind, evidence class)."""
        c = self._table.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.kind, c.evidence_class, func.count()).group_by(c.kind, c.evidence_class))
            return {(k, e): n for k, e, n in rows}

    def dispose(self) -> None:
        self.engine.dispose()


def db_message(exc: SQLAlchemyError) -> str:
    """The database's own reason, first line only: never SQLAlchemy's text, which carries the
    statement and its parameters (a record's whole payload)."""
    orig = getattr(exc, "orig", None)
    text = str(orig) if orig is not None else type(exc).__name__
    return (text.strip().splitlines() or [type(exc).__name__])[0][:200]


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # WAL: readers never block the single writer; synchronous=NORMAL is still crash-safe in WAL.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "LUMA_DB_URL"
