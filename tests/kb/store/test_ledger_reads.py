"""Reads of the ledger for partners, runner keys, the records of one kind and the measured-evidence
gate: a ledger without its table yet holds nothing, but a ledger that cannot be read -- a damaged
file, a login the database refuses -- is a one-line LedgerError, never an empty answer ("no
partners", "no trusted key")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import LedgerError, LumaError, RecordError
from luma.kb.ingest.evidence_gate import check_before_open
from luma.kb.store.ledger import Ledger
from luma.kb.store.ledger_read import payloads_of_kind
from luma.kb.trust.partners import read_ledger
from luma.kb.records.loader import validate_document
from luma.kb.trust.runners import trusted_keys
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "data"


def _reads(settings: Settings) -> dict:
    """Every reader, run against the project of `settings`: {name: its answer or the LumaError}."""
    chain = validate_document(json.loads((DATA / "valid_chain.json").read_text()), "chain.json", settings.home)
    readers = {
        "partners": lambda ledger: read_ledger(ledger).entries,
        "runner keys": lambda ledger: trusted_keys(ledger),
        "records of a kind": lambda ledger: payloads_of_kind(settings, "machine"),
        "gate before open": lambda ledger: check_before_open(settings, [chain]),
    }
    out = {}
    for name, read in readers.items():
        ledger = Ledger(settings.db_url)
        try:
            out[name] = read(ledger)
        except LumaError as exc:
            out[name] = exc
        finally:
            ledger.dispose()
    return out


def test_a_ledger_without_its_table_is_empty(luma_home):
    sqlite3.connect(luma_home / "ledger.sqlite").close()  # a database, but nothing ingested yet
    found = _reads(Settings.from_env(home=luma_home))
    assert found["partners"] == [] and found["runner keys"] == {} and found["records of a kind"] == []
    # The gate reads the ledger, finds no trusted key, and refuses the unsigned measured chain.
    gate = found["gate before open"]
    assert isinstance(gate, RecordError) and gate.field == "attestation", gate


def test_a_damaged_ledger_file_is_an_error_not_an_empty_ledger(luma_home):
    (luma_home / "ledger.sqlite").write_bytes(b"this is not an SQLite database " * 100)
    found = _reads(Settings.from_env(home=luma_home))
    for name, answer in found.items():
        assert isinstance(answer, LedgerError), (name, answer)
        line = answer.one_line()
        assert "\n" not in line and "file is not a database" in line and "ledger.sqlite" in line, line
    for args in (("partner", "list"), ("runner", "list")):
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "file is not a database" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_refused_postgresql_login_is_an_error_not_an_empty_ledger(pg_url, luma_home, monkeypatch):
    from sqlalchemy.engine import make_url

    url = make_url(pg_url)
    wrong = url.set(password=(url.password or "") + "-wrong").render_as_string(hide_password=False)
    monkeypatch.setenv("LUMA_DB_URL", wrong)
    found = _reads(Settings.from_env(home=luma_home))
    for name, answer in found.items():
        assert isinstance(answer, LedgerError), (name, answer)
        line = answer.one_line()
        assert "\n" not in line and "authentication failed" in line and "-wrong" not in line, line
    result = CliRunner().invoke(cli, ["partner", "list"])
    assert result.exit_code == 1 and "authentication failed" in result.stderr and "-wrong" not in result.output


@pytest.mark.parametrize("kind", ["missing table", "wrong database"])
def test_a_postgresql_ledger_without_its_table_is_empty_but_a_wrong_database_is_not(pg_url, luma_home, monkeypatch,
                                                                                   kind):
    from sqlalchemy.engine import make_url

    url = pg_url if kind == "missing table" else make_url(pg_url).set(database="luma_no_such_database").render_as_string(
        hide_password=False)
    monkeypatch.setenv("LUMA_DB_URL", url)
    found = _reads(Settings.from_env(home=luma_home))
    if kind == "missing table":  # pg_url drops the ledger's table: a new project
        assert found["partners"] == [] and found["runner keys"] == {} and found["records of a kind"] == []
    else:
        assert all(isinstance(a, LedgerError) and "luma_no_such_database" in a.one_line() for a in found.values())
