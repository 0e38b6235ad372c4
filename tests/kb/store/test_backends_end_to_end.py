"""The whole write/read path on every backend pair: quad store (memory, disk, server) x ledger
(SQLite, PostgreSQL). Same records in, same triples and same answers out."""

from __future__ import annotations

from pathlib import Path

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import get_named_query
from luma.kb.records.synthetic import write_jsonl
from luma.settings import Settings

DATA = Path(__file__).parents[1] / "data"


def _answer(base: KnowledgeBase, name: str) -> list[dict]:
    rows = base.store.query(get_named_query(name).sparql).json()["results"]["bindings"]
    return sorted(({k: v["value"] for k, v in r.items()} for r in rows), key=lambda r: sorted(r.items()))


def test_ingest_query_rebuild_on_every_backend_pair(store_url, ledger_url, tmp_path, evidence):
    reference_home = tmp_path / "reference"
    # One runner key, trusted by both projects, signs the valid chain; the synthetic ones are synthetic.
    key = evidence.trust_runner(Settings.from_env(home=reference_home))
    records = write_jsonl(tmp_path / "records.jsonl", 60, seed=3)
    chain_json, chain_yaml = evidence.sign_files(key, tmp_path / "signed", DATA / "valid_chain.json",
                                                 DATA / "valid_chain.yaml")
    with KnowledgeBase.open(Settings.from_env(home=reference_home)) as ref:
        ref.ingest([records, chain_json], submitter="tester")
        expected = {name: _answer(ref, name) for name in ("qualified-boundaries", "evidence-by-class")}
        expected_quads = ref.store.count()

    settings = Settings(home=tmp_path / "home", db_url=ledger_url, kb_url=store_url)
    evidence.trust_runner(settings, key)
    with KnowledgeBase.open(settings) as base:
        report = base.ingest([records, chain_json], submitter="tester")
        assert len(report.added) == 61
        again = base.ingest([chain_yaml], submitter="tester")
        assert (len(again.added), len(again.duplicates)) == (0, 1)
        # The ledger times differ between the two projects, so compare answers, not dumps.
        assert {name: _answer(base, name) for name in expected} == expected
        assert base.store.count() == expected_quads
        before = base.store.dump("nquads", sort=True)
        base.rebuild()
        assert base.store.dump("nquads", sort=True) == before
        assert base.watermark() == base.ledger.last_id() == 1 + 61  # the key's trust record, the records
