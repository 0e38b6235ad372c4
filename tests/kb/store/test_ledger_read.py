"""The light ledger reads (kb/store/ledger_read.py) give what the SQLAlchemy ledger gives, read a
SQLite file without changing it, and hand any other URL back to the full ledger."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from luma.errors import LedgerError
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import write_jsonl
from luma.kb.store import ledger_read
from luma.kb.store.ledger import Ledger
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def filled(tmp_path) -> Settings:
    settings = Settings(home=tmp_path / "home", db_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
                        kb_url=f"oxigraph:{tmp_path / 'kb'}")
    with KnowledgeBase.open(settings) as base:
        base.ingest([write_jsonl(tmp_path / "a.jsonl", 7, seed=3)], submitter="tester")
    return settings


def test_the_light_reads_match_the_ledger(filled):
    ledger = Ledger(filled.db_url)
    try:
        assert ledger_read.last_id(filled.db_url) == ledger.last_id() == 7
        assert ledger_read.count_by(filled.db_url) == ledger.count_by()
        assert ledger_read.payloads_of_kind(filled, "pex-chain") == ledger.rows_of_kinds(["pex-chain"], "content_hash",
                                                                                         "payload")
    finally:
        ledger.dispose()
    with KnowledgeBase.open(filled, read_only=True) as base:
        stats = base.stats()
        assert base._ledger is None  # the reader never made the SQLAlchemy ledger
    assert stats["ledger_records"] == 7 and sum(stats["by_kind_and_evidence"].values()) == 7


def test_reading_changes_nothing_and_creates_nothing(tmp_path, filled):
    path = Path(filled.db_url[len("sqlite:///"):])
    before = path.read_bytes()
    ledger_read.count_by(filled.db_url)
    assert path.read_bytes() == before
    absent = f"sqlite:///{tmp_path / 'none.sqlite'}"
    assert ledger_read.payloads_of_kind(Settings(home=tmp_path, db_url=absent, kb_url="memory:"), "machine") == []
    assert not (tmp_path / "none.sqlite").exists()


def test_a_database_without_the_table_holds_nothing(tmp_path):
    sqlite3.connect(tmp_path / "empty.sqlite").close()
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    assert ledger_read.last_id(url) == 0 and ledger_read.count_by(url) == {}


def test_a_damaged_file_is_one_line_naming_the_ledger(tmp_path):
    (tmp_path / "bad.sqlite").write_bytes(b"not a database " * 200)
    url = f"sqlite:///{tmp_path / 'bad.sqlite'}"
    with pytest.raises(LedgerError) as err:
        ledger_read.count_by(url)
    line = err.value.one_line()
    assert "\n" not in line and "file is not a database" in line and "bad.sqlite" in line


@pytest.mark.parametrize("url", ["postgresql+psycopg://u:p@127.0.0.1:1/db", "sqlite://", "sqlite:///x.sqlite?mode=ro",
                                 "sqlite:///"])
def test_other_urls_go_to_the_full_ledger(url):
    assert ledger_read.last_id(url) is None and ledger_read.count_by(url) is None


def test_the_ledger_table_the_reads_query_is_the_models():
    from luma.kb.store.ledger import LedgerRecord

    assert LedgerRecord.__tablename__ == ledger_read._TABLE
    columns = set(LedgerRecord.__table__.c.keys())
    assert {"id", "kind", "evidence_class", "content_hash", "payload"} <= columns
    json.dumps(sorted(columns))


def test_stats_count_record_quads_as_a_filter_over_every_quad_would(filled):
    """`stats` counts record quads as all quads less the other graphs' (each by its index); the
    same figures as one COUNT over every quad filtered on its graph's IRI, derived graphs and all."""
    from luma.kb.vocab import RECORD_GRAPH

    with KnowledgeBase.open(filled) as base:  # a derived graph beside the records, as rules write one
        base.store.load_nquads(b"<urn:a> <urn:b> <urn:c> <https://w3id.org/luma/id/graph/derived/test> .\n"
                               b"<urn:a> <urn:b> <urn:d> <https://w3id.org/luma/id/graph/derived/test> .\n")
    with KnowledgeBase.open(filled, read_only=True) as base:
        stats = base.stats()
        rows = base.store.select(
            "SELECT (COUNT(DISTINCT ?g) AS ?graphs) (COUNT(*) AS ?quads) WHERE { GRAPH ?g { ?s ?p ?o } "
            f'FILTER(STRSTARTS(STR(?g), "{RECORD_GRAPH}")) }}', union=False)
        every = base.store.select("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }", union=False)
    assert stats["record_graphs"] == int(rows[0]["graphs"]) == 7
    assert stats["record_quads"] == int(rows[0]["quads"]) and stats["quads"] == int(every[0]["n"])
    assert stats["quads"] > stats["record_quads"]  # the ontology and the derived graphs
