"""A ledger written before runner keys (issue 14): its measured records carry no attestation.

They stay (the ledger is append-only), the KB marks them unattested, and they never qualify;
ingest refuses the same record now. The rows are written as the release before this one wrote
them: the record's canonical JSON as payload, evidence class `measured`, no trials.
"""

from __future__ import annotations

import json
import pytest
from pathlib import Path

from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger import Ledger, NewRecord
from luma.kb.records.loader import validate_document
from luma.kb.records.pex_chain import SCHEMA_VERSION
from luma.rules.engine import Engine
from luma.settings import Settings

CHAIN = {
    "record_type": "pex-chain", "evidence_class": "measured",
    "workload": {"name": "embed-minilm", "model": "all-MiniLM-L6-v2", "task": "embedding"},
    "architecture": {"name": "AMD EPYC (Zen 4)", "kind": "cpu", "vendor": "AMD"},
    "contract": {"name": "embed-p99", "clauses": [{"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"}]},
    "pass_state": {"dimensions": {"compute": {"value": 2, "unit": "core"}, "host_memory": {"value": 1.5, "unit": "GiB"}}},
    "fail_state": {"dimensions": {"compute": {"value": 2, "unit": "core"}, "host_memory": {"value": 1, "unit": "GiB"}}},
    "crossed_dimension": "host_memory", "binding_resource": "host_memory",
    "intervention": {"name": "int8-weights", "kind": "software"}, "recovered": True, "repetitions": 3,
}


@pytest.mark.slow
def test_unattested_measured_records_of_an_old_ledger_stay_and_never_qualify(luma_home, tmp_path):
    settings = Settings.from_env(home=luma_home)
    rec = validate_document(CHAIN, "legacy.json", luma_home)
    ledger = Ledger(settings.db_url)
    ledger.init()
    ledger.append([NewRecord(rec.kind, rec.content_hash, "measured", "old-release", "legacy.json", SCHEMA_VERSION,
                             rec.canonical)])
    ledger.dispose()
    with KnowledgeBase.open(settings) as kb:  # the KB catches up with the ledger, as after an upgrade
        Engine(kb).run()
        marked = kb.store.select("SELECT ?g WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#unattested> true } }",
                                 union=False)
        assert [r["g"] for r in marked] == [kb.graph_of(rec.content_hash)]
        assert kb.store.select("SELECT ?q WHERE { ?q a <https://w3id.org/luma/ns#QualifiedBoundary> }") == []
        assert kb.ledger.count_by() == {("pex-chain", "measured"): 1}
    out = CliRunner().invoke(cli, ["kb", "query", "--name", "qualified-boundaries", "--format", "json"])
    assert json.loads(out.stdout)["results"]["bindings"] == []
    # The same record today: refused at ingest, naming the attestation it lacks.
    path = Path(tmp_path) / "again.json"
    path.write_text(json.dumps({**CHAIN, "repetitions": 4}))
    again = CliRunner().invoke(cli, ["kb", "ingest", str(path)])
    assert again.exit_code == 1 and "attestation" in again.output
