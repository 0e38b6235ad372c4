"""The Design-In report and the resource hierarchy, and what counts as evidence (issue 15,
item 19): the hierarchy's root `resource` is never a recurring binding, remedy or requirement; a
parent resource appears only as a generalisation over two or more bound resources and is marked
as a parent; a partner's retraction is a statement about records, not vendor-claim evidence."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import get_named_query
from luma.kb.operations.partners import add, remove
from luma.kb.trust.partners import read_partner_files
from luma.rules.engine import Engine
from luma.settings import Settings
from tests.rules.test_scenarios import PREFIXES, UNIT, Chain

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
KV = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
CXL = ROOT / "kb" / "examples" / "partner-cxl-expander.toml"


def _chains() -> list[Chain]:
    # host memory and the KV cache bind in two workloads each on two architectures, one software
    # fix recovering all four: memory capacity recurs over both (4 workloads), int8 recovers it.
    mem = {"unit": UNIT + "BYTE", "intervention": "int8-weights"}
    return [Chain("m0", "w0", "chat", "arch0", binding="host_memory", level=2.0**30, **mem),
            Chain("m1", "w1", "chat", "arch1", binding="host_memory", level=2.0**31, **mem),
            Chain("k0", "w2", "chat", "arch0", binding="kv_cache", level=2.0**28, **mem),
            Chain("k1", "w3", "chat", "arch1", binding="kv_cache", level=2.0**29, **mem)]


@pytest.fixture
def report(luma_home):
    from luma.reports import design_in

    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        data = (PREFIXES + "".join(c.trig() for c in _chains())).encode()
        kb.store.load_nquads(ox.serialize(ox.parse(data, format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))
        add(kb, read_partner_files([KV, CXL], home=luma_home))
        remove(kb, "kvzip-labs", reason="superseded")
        Engine(kb).run()
        evidence = kb.store.select(get_named_query("evidence-by-class").sparql)
        yield design_in.build(kb), evidence


def _table(rep, tid):
    return next(t for t in rep.tables() if t.id == tid)


@pytest.mark.slow
def test_the_root_is_never_a_row_and_parents_are_marked(report):
    rep, _ = report
    bindings = _table(rep, "table-bindings-not-required").rows
    assert [r[0] for r in bindings] == ["memory_capacity (parent)"]  # remedied: not a requirement
    remedies = [r[0] for r in _table(rep, "table-remedies").rows]
    assert "memory_capacity (parent)" in remedies and "host_memory" in remedies and "kv_cache" in remedies
    text = " ".join(str(c) for t in rep.tables() for row in t.rows for c in row)
    assert "resource" not in {str(row[0]).split()[0] for t in rep.tables() for row in t.rows if row}
    assert "transfer_bandwidth" not in text


@pytest.mark.slow
def test_a_partner_retraction_is_not_vendor_claim_evidence(report):
    rep, evidence = report
    table = _table(rep, "table-evidence")
    assert "partner-retraction" not in table.columns
    # the other partner's record is still there, as vendor-claim evidence: one record, not two
    col = table.columns.index("intervention-parameters")
    assert next(r for r in table.rows if r[0] == "vendor-claim")[col] == "1"
    assert next(r for r in table.rows if r[0] == "vendor-claim")[-1] == "1"
    assert {r["kind"] for r in evidence} >= {"intervention-parameters"}
    assert "partner-retraction" not in {r["kind"] for r in evidence}
