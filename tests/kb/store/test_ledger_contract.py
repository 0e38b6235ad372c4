"""The evidence ledger's contract, run against every backend (`ledger_url`: SQLite, PostgreSQL).

The ledger is the commit point and the source the knowledge base is rebuilt from, so what is
pinned here is what a rebuild relies on: ids in commit order, all-or-nothing batches, rows
that cannot change, and timestamps that read back as the same UTC instant.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from luma.errors import ConfigError, LedgerError
from luma.kb.store.ledger import Ledger, NewRecord


def record(n: int, kind: str = "trial", evidence_class: str = "Measured") -> NewRecord:
    return NewRecord(
        kind=kind,
        content_hash=f"{n:064x}",
        evidence_class=evidence_class,
        submitter="tester",
        source=f"records/{n}.json",
        schema_version=1,
        payload=f'{{"n": {n}}}',
    )


@pytest.fixture
def ledger(ledger_url):
    led = Ledger(ledger_url)
    led.init()
    yield led
    led.dispose()


def test_init_is_idempotent(ledger):
    ledger.append([record(1)])
    ledger.init()
    ledger.init()
    assert ledger.last_id() == 1
    assert [e.content_hash for e in ledger.after(0)] == [record(1).content_hash]


def test_a_new_ledger_is_empty(ledger):
    assert ledger.last_id() == 0
    assert list(ledger.after(0)) == []
    assert ledger.count_by() == {}
    assert ledger.existing_hashes([record(1).content_hash]) == set()


def test_append_gives_increasing_ids_and_one_time(ledger):
    first = ledger.append([record(1), record(2), record(3)])
    second = ledger.append([record(4), record(5)])
    ids = [e.id for e in first + second]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert min(e.id for e in second) > max(e.id for e in first)
    assert len({e.ingested_at for e in first}) == 1  # one batch, one time
    assert [e.content_hash for e in first] == [record(n).content_hash for n in (1, 2, 3)]
    assert first[0].payload == record(1).payload and first[0].source == record(1).source
    assert ledger.last_id() == max(ids)


def test_append_of_nothing_writes_nothing(ledger):
    assert ledger.append([]) == []
    assert ledger.last_id() == 0


def test_existing_hashes(ledger):
    ledger.append([record(1), record(2)])
    asked = [record(n).content_hash for n in (1, 2, 3)]
    assert ledger.existing_hashes(asked) == {record(1).content_hash, record(2).content_hash}
    assert ledger.existing_hashes([]) == set()


def test_existing_hashes_beyond_one_in_list(ledger):
    # More hashes than one IN (...) list holds (SQLite allows 999 parameters per statement).
    ledger.append([record(n) for n in range(1200)])
    asked = [record(n).content_hash for n in range(0, 2400, 2)]
    assert ledger.existing_hashes(asked) == {record(n).content_hash for n in range(0, 1200, 2)}


def test_after_streams_in_id_order_across_batches(ledger):
    for start in (0, 4, 7):  # three commits of uneven size
        ledger.append([record(n) for n in range(start, start + (4 if start == 0 else 3))])
    entries = list(ledger.after(0, batch=3))
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert [e.content_hash for e in entries] == [record(n).content_hash for n in range(10)]
    cut = entries[4].id
    assert [e.id for e in ledger.after(cut, batch=3)] == [e.id for e in entries[5:]]
    assert list(ledger.after(entries[-1].id, batch=3)) == []


def test_hashes_after_matches_after_without_payloads(ledger):
    ledger.append([record(n) for n in range(5)])
    ledger.append([record(n) for n in range(5, 8)])
    full = [(e.id, e.content_hash, e.kind) for e in ledger.after(0)]
    assert ledger.hashes_after(0) == full
    assert ledger.hashes_after(full[2][0]) == full[3:]
    assert ledger.hashes_after(full[-1][0]) == []
    assert ledger.hashes_after(full[2][0], limit=2) == full[3:5]


def test_entries_by_hash_in_id_order(ledger):
    ledger.append([record(n) for n in range(6)])
    want = [record(n).content_hash for n in (4, 1, 5)]
    got = ledger.entries(want + ["f" * 64])
    assert [e.content_hash for e in got] == [record(n).content_hash for n in (1, 4, 5)]
    assert [e.id for e in got] == sorted(e.id for e in got)


def test_a_batch_with_a_known_hash_writes_nothing(ledger):
    ledger.append([record(1), record(2)])
    with pytest.raises(LedgerError):
        ledger.append([record(3), record(2), record(4)])
    assert ledger.last_id() == 2
    assert [e.content_hash for e in ledger.after(0)] == [record(1).content_hash, record(2).content_hash]
    assert ledger.existing_hashes([record(3).content_hash, record(4).content_hash]) == set()
    # The ledger is still usable afterwards.
    assert [e.content_hash for e in ledger.append([record(3)])] == [record(3).content_hash]


def test_a_batch_repeating_a_hash_writes_nothing(ledger):
    with pytest.raises(LedgerError):
        ledger.append([record(1), record(1)])
    assert ledger.last_id() == 0


@pytest.mark.parametrize(
    "statement",
    ["UPDATE ledger_record SET payload = 'forged'", "DELETE FROM ledger_record", "UPDATE ledger_record SET id = id + 100"],
)
def test_rows_cannot_be_changed_or_deleted(ledger, statement):
    ledger.append([record(1), record(2)])
    with pytest.raises(DBAPIError, match="append-only"):
        with ledger.engine.begin() as conn:
            conn.execute(text(statement))
    assert [(e.content_hash, e.payload) for e in ledger.after(0)] == [
        (record(1).content_hash, record(1).payload),
        (record(2).content_hash, record(2).payload),
    ]


def test_the_trigger_survives_init_again(ledger):
    ledger.append([record(1)])
    ledger.init()
    with pytest.raises(DBAPIError, match="append-only"):
        with ledger.engine.begin() as conn:
            conn.execute(text("DELETE FROM ledger_record"))
    assert ledger.last_id() == 1


AT_UTC = datetime(2026, 3, 29, 0, 30, 15, tzinfo=timezone.utc)  # the night Europe changes clocks


@pytest.mark.parametrize(
    "at",
    [AT_UTC, AT_UTC.astimezone(timezone(timedelta(hours=5, minutes=30))), AT_UTC.astimezone(timezone(-timedelta(hours=7)))],
    ids=["utc", "plus-0530", "minus-0700"],
)
def test_ingested_at_reads_back_as_the_same_utc_instant(ledger, at):
    (appended,) = ledger.append([record(1)], at=at)
    (replayed,) = ledger.after(0)
    for entry in (appended, replayed):
        assert entry.ingested_at == AT_UTC
        assert entry.ingested_at.utcoffset() == timedelta(0)
    # What the projection writes must be identical whether it came from append or a replay.
    assert appended.ingested_at.isoformat() == replayed.ingested_at.isoformat() == AT_UTC.isoformat()
    assert appended == replayed


def test_ingested_at_defaults_to_now_in_utc(ledger):
    before = datetime.now(timezone.utc).replace(microsecond=0)
    (appended,) = ledger.append([record(1)])
    after = datetime.now(timezone.utc)
    (replayed,) = ledger.after(0)
    assert before <= appended.ingested_at <= after
    assert appended.ingested_at.utcoffset() == timedelta(0)
    assert appended == replayed


def test_ingested_at_does_not_depend_on_the_session_time_zone(pg_url):
    """A PostgreSQL server whose TimeZone is not UTC still hands back the instant written."""
    sep = "&" if "?" in pg_url else "?"
    writer = Ledger(f"{pg_url}{sep}options=-c%20timezone%3DAmerica/New_York")
    reader = Ledger(f"{pg_url}{sep}options=-c%20timezone%3DAsia/Kolkata")
    try:
        writer.init()
        with writer.engine.connect() as conn:
            assert conn.execute(text("SHOW timezone")).scalar_one() == "America/New_York"
        (appended,) = writer.append([record(1)], at=AT_UTC)
        (replayed,) = reader.after(0)
        assert appended.ingested_at == replayed.ingested_at == AT_UTC
        assert replayed.ingested_at.isoformat() == AT_UTC.isoformat()
    finally:
        writer.dispose()
        reader.dispose()


def test_count_by_groups_by_kind_and_evidence_class(ledger):
    ledger.append(
        [
            record(1, "trial", "Measured"),
            record(2, "trial", "Measured"),
            record(3, "trial", "Simulated"),
            record(4, "partner", "VendorClaim"),
        ]
    )
    assert ledger.count_by() == {("trial", "Measured"): 2, ("trial", "Simulated"): 1, ("partner", "VendorClaim"): 1}


def test_a_bad_url_is_a_config_error():
    with pytest.raises(ConfigError):
        Ledger("nosuchdialect://x/y")


def test_an_unreachable_ledger_is_a_ledger_error(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "ledger.sqlite"
    with pytest.raises(LedgerError):
        Ledger(f"sqlite:///{missing}").init()


@pytest.mark.parametrize("field, length", [("submitter", 257), ("source", 1025), ("kind", 65),
                                           ("evidence_class", 33)])
def test_text_over_a_column_is_refused_naming_the_field_on_every_backend(ledger, field, length):
    """PostgreSQL answered "value too long" followed by the whole SQL statement and the record's
    payload; SQLite stored it. Now both refuse before writing, naming the field, echoing nothing."""
    secret = "PAYLOAD-" + "s" * 50
    rec = NewRecord(**{**record(1).__dict__, field: "x" * length, "payload": f'{{"secret": "{secret}"}}'})
    with pytest.raises(LedgerError) as err:
        ledger.append([rec])
    assert err.value.field == field and f"limit of {length - 1}" in err.value.message
    assert secret not in err.value.one_line() and "INSERT" not in err.value.one_line()
    assert ledger.last_id() == 0


def test_a_database_error_never_echoes_sql_or_payload(ledger, monkeypatch):
    """Whatever the database refuses, the message is its reason's first line."""
    from sqlalchemy.exc import DataError

    secret = "PAYLOAD-secret-figures"

    class Orig(Exception):
        def __str__(self):
            return "value too long for type character varying(256)\nDETAIL: something"

    def fail(*args, **kwargs):
        raise DataError(f"INSERT INTO ledger_record VALUES ('{secret}')", {"payload": secret}, Orig())

    monkeypatch.setattr(ledger.engine, "begin", fail)
    with pytest.raises(LedgerError) as err:
        ledger.append([record(1)])
    line = err.value.one_line()
    assert "value too long" in line and secret not in line and "INSERT" not in line and "DETAIL" not in line
