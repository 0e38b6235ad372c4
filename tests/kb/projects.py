"""The helpers that build and drive the on-disk projects the ingest and query tests share (the
fixtures that hold those projects are in tests/kb/conftest.py)."""


import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from luma.cli.main import cli
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import mark_bench_project, write_jsonl
from luma.settings import Settings


DATA = Path(__file__).parent / "data"
VALID_JSON = DATA / "valid_chain.json"
VALID_YAML = DATA / "valid_chain.yaml"
_LOCATION_VARS = ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL")
TURTLE_WITH_BNODE = (
    b"@prefix ex: <http://example.org/> .\n"
    b'ex:rack1 ex:holds [ ex:model "H200" ; ex:count 8 ] ;\n    ex:label "rack one"@en .\n'
)


# -- helpers -------------------------------------------------------------------------------------


def open_kb() -> KnowledgeBase:
    return KnowledgeBase.open(Settings.from_env())


def ledger_rows(kb: KnowledgeBase) -> int:
    with kb.ledger.engine.connect() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM ledger_record")).scalar_one()


def snapshot() -> tuple[int, int, bytes]:
    """(ledger rows, quads in named graphs, sorted N-Quads export) of the project at LUMA_HOME."""
    with open_kb() as kb:
        return ledger_rows(kb), kb.store.count(), kb.store.dump("nquads", sort=True)


def luma(*args: str):
    """Run `luma ARGS` in-process; an exception that is not a clean exit fails the test."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def assert_one_line_error(result, *fragments: str, code: int = 1) -> None:
    """One `Error:` line containing `fragments`, exit `code` (1 a failure, 2 a usage mistake)."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    err = result.stderr
    assert err.startswith("Error: ") and err.endswith("\n") and err.count("\n") == 1, repr(err)
    for frag in fragments:
        assert frag in err, (frag, err)


def valid_record() -> dict:
    return json.loads(VALID_JSON.read_text())


def use_home(mp: pytest.MonkeyPatch, home: Path) -> Path:
    mp.setenv("LUMA_HOME", str(home))
    for var in _LOCATION_VARS:
        mp.delenv(var, raising=False)
    return home


#: What every project `_build_project` makes holds besides its chains: its runner key's trust record.
TRUST_RECORDS = 1


def _build_project(home: Path, evidence, synthetic: int, rdf: bool = False):
    """A project at `home` with its own runner key, the valid chain and `synthetic` synthetic
    chains signed by it, and optionally a Turtle document; returns the key. With synthetic chains
    it is a marked benchmark project (kb/records/synthetic.py), so that the would-be measured ones are
    measured and the rules have boundaries to derive from."""
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        if synthetic:
            mark_bench_project(home)
        key = evidence.trust_runner(Settings.from_env())
        [chain] = evidence.sign_files(key, home.parent / f"{home.name}-signed", VALID_JSON)
        with open_kb() as kb:
            kb.ingest([chain])
            if synthetic:
                kb.ingest([write_jsonl(home.parent / f"{home.name}-synthetic.jsonl", synthetic, signer=key)])
            if rdf:
                ttl = home.parent / f"{home.name}-rack.ttl"
                ttl.write_bytes(TURTLE_WITH_BNODE)
                kb.load_rdf(ttl, "turtle", "vendor-claim")
    return key


#: The chains of the query project; its records are these and its runner key's trust record.
QUERY_CHAINS = 201
QUERY_RECORDS = QUERY_CHAINS + TRUST_RECORDS


# -- identity and duplicates ---------------------------------------------------------------------


def sparql_json(result) -> dict:
    """The SPARQL 1.1 results JSON of a successful `luma kb query`, checked for its shape."""
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert isinstance(answer["head"]["vars"], list)
    for row in answer["results"]["bindings"]:
        assert set(row) <= set(answer["head"]["vars"])
        assert all(term["type"] in ("uri", "literal", "bnode") and "value" in term for term in row.values())
    return answer
