"""`luma kb explain`: the derivation tree of a derived node down to the ingested records, with the
rule run at every derived node and every supporting record named (even when the listing is capped)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import QueryError, UnknownName
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import DIM, ID, LUMA, PROV, RDF
from luma.rules.engine import Engine
from luma.rules.explain import explain, records
from luma.settings import Settings

VALID = Path(__file__).parents[1] / "kb" / "data" / "valid_chain.json"
RB_HOST_MEMORY = f"{ID}recurring-binding/{hashlib.md5((DIM + 'host_memory').encode()).hexdigest()}"

ARCHS = {
    "zen4": {"name": "AMD EPYC (Zen 4)", "kind": "cpu", "vendor": "AMD"},
    "spr": {"name": "Intel Xeon (Sapphire Rapids)", "kind": "cpu", "vendor": "Intel"},
}
WORKLOADS = {
    "embed": {"name": "embed-minilm", "model": "all-MiniLM-L6-v2", "task": "embedding"},
    "rerank": {"name": "rerank-bge", "model": "bge-reranker-base", "task": "reranking"},
    "summ": {"name": "summarise-t5", "model": "t5-small", "task": "summarisation"},
}
#: (workload, architecture) of the qualified chains: 3 workloads, 2 architectures, host memory binds.
QUALIFIED = [("embed", "zen4"), ("rerank", "spr"), ("summ", "zen4"), ("embed", "spr")]

from luma.rules.loader import load_all as _load_rules

#: The installed rules' versions (a derivation names the version that made it).
VERSION = {r.id: r.version for r in _load_rules()}


def _chain(workload: str, arch: str, **changes) -> dict:
    rec = json.loads(VALID.read_text())
    rec.update(workload=WORKLOADS[workload], architecture=ARCHS[arch], **changes)
    return rec


@pytest.fixture
def derived_kb(luma_home, runner_key, evidence, tmp_path):
    """(home, hashes of the qualified chains, hashes of all records): a KB with 4 qualified chains
    and 2 that do not qualify, the shipped rules run over it (the ledger's hashes, by source file).
    Each chain carries trials that bear it out and is signed by the project's runner key."""
    chains = [_chain(w, a) for w, a in QUALIFIED]
    chains.append(_chain("rerank", "zen4", evidence_class="simulated"))  # not measured
    chains.append(_chain("summ", "spr", repetitions=2))  # too few repetitions
    files = [evidence.write_signed(runner_key, tmp_path / f"chain-{i}.json", evidence.with_trials(rec))
             for i, rec in enumerate(chains)]
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        report = kb.ingest(files, submitter="tester@lab")
        assert len(report.added) == len(chains)
        Engine(kb).run()
        by_source = {e.source: e.content_hash for e in kb.ledger.after(0)}
    qualified = sorted(by_source[str(files[i])] for i in range(len(QUALIFIED)))
    return luma_home, qualified, sorted(by_source.values())


def _open(home):
    return KnowledgeBase.open(Settings.from_env(home=home))


def _walk(node: dict):
    yield node
    for child in node.get("supports", []):
        yield from _walk(child)


@pytest.mark.slow
def test_explaining_a_recurring_binding_names_every_supporting_record(derived_kb):
    home, qualified, everything = derived_kb
    with _open(home) as kb:
        tree = explain(kb, RB_HOST_MEMORY)
    assert LUMA + "RecurringBinding" in tree["types"]
    assert tree["derived_by"]["rule"] == "recurring-binding" and tree["derived_by"]["version"] == VERSION["recurring-binding"]
    assert tree["derived_by"]["parameters"] == ["min_architectures=2", "min_workloads=3"]
    # recurring binding -> binding group -> qualified boundary -> chain -> record
    groups = tree["supports"]
    assert tree["supports_total"] == len(groups) >= 1
    assert all(LUMA + "BindingGroup" in g["types"] and g["derived_by"]["rule"] == "qualified-boundary" for g in groups)
    boundaries = [b for g in groups for b in g["supports"]]
    assert len(boundaries) == len(QUALIFIED)
    assert records(tree) == qualified  # every qualified chain's record, and nothing else
    assert set(qualified) < set(everything)

    for boundary in boundaries:
        assert LUMA + "QualifiedBoundary" in boundary["types"]
        assert boundary["derived_by"]["rule"] == "qualified-boundary"
        # v7: it carries its co-binding and next binding resources, its contract, and its software
        # and time (issue 16)
        assert boundary["derived_by"]["version"] == VERSION["qualified-boundary"]
        assert boundary["derived_by"]["parameters"] == ["min_repetitions=3"]
        assert boundary["record"] is None
        [chain] = boundary["supports"]
        assert chain["types"] == [LUMA + "BoundaryQualification"] and chain["derived_by"] is None
        assert chain["evidence_class"] == "measured" and chain["supports"] == []
        rec = chain["record"]
        assert rec["content_hash"] in qualified and rec["record_kind"] == "pex-chain"
        assert rec["evidence_class"] == "measured" and rec["submitter"] == "tester@lab"
        assert rec["graph"] == f"{ID}record/{rec['content_hash'][:32]}" and rec["ingested_at"]
    leaves = sorted(n["record"]["content_hash"] for n in _walk(tree) if n.get("record"))
    assert leaves == qualified


@pytest.mark.slow
def test_capped_listing_still_names_every_record(derived_kb):
    home, qualified, _ = derived_kb
    with _open(home) as kb:
        tree = explain(kb, RB_HOST_MEMORY, max_supports=2)
        shallow = explain(kb, RB_HOST_MEMORY, max_depth=1)
    [group] = tree["supports"]  # one binding group (host memory, the chains' one intervention)
    assert group["supports_total"] == 4 and len(group["supports"]) == 2
    assert [s["iri"] for s in group["supports"]] == sorted(s["iri"] for s in group["supports"])
    shown = [n["record"]["content_hash"] for n in _walk(tree) if n.get("record")]
    assert len(shown) == 2 and records(tree) == qualified

    assert all(s["supports"] == [] and s["truncated"] for s in shallow["supports"])
    assert records(shallow) == qualified


def test_a_chain_and_a_record_graph_explain_to_their_record(derived_kb):
    home, qualified, _ = derived_kb
    chain = f"{ID}chain/{qualified[0][:32]}"
    with _open(home) as kb:
        tree = explain(kb, "id:chain/" + qualified[0][:32])  # prefixed names are accepted
        graph = explain(kb, kb.graph_of(qualified[0]))
    assert tree["iri"] == chain and tree["record"]["content_hash"] == qualified[0]
    assert records(tree) == [qualified[0]]
    assert graph["record"]["content_hash"] == qualified[0] and records(graph) == [qualified[0]]


def test_repeated_nodes_are_described_once_and_cycles_stop(luma_home):
    """a -> b, c; b -> d; c -> d; d -> a (a cycle) and d -> a record."""
    g = f"<{ID}graph/derived/test>"
    rec = f"{ID}record/{'0' * 32}"
    lines = [f"<urn:{s}> <{PROV}wasDerivedFrom> <urn:{o}> {g} ." for s, o in
             [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "a")]]
    lines += [f"<urn:d> <{PROV}wasDerivedFrom> <{rec}> {g} .",
              f"<urn:a> <{RDF}type> <{LUMA}Thing> {g} .",
              f"<{rec}> <{LUMA}recordKind> \"pex-chain\" <{rec}> .",
              f"<{rec}> <{LUMA}contentHash> \"{'0' * 64}\" <{rec}> ."]
    with _open(luma_home) as kb:
        kb.store.load_nquads(("\n".join(lines) + "\n").encode())
        tree = explain(kb, "urn:a")
    b, c = tree["supports"]
    assert [b["iri"], c["iri"]] == ["urn:b", "urn:c"]
    [d] = b["supports"]
    assert d["record"]["content_hash"] == "0" * 64 and d["supports"] == [{"iri": "urn:a", "see_above": True}]
    assert c["supports"] == [{"iri": "urn:d", "see_above": True}]
    assert records(tree) == ["0" * 64]


def test_unknown_or_malformed_iri_is_refused(luma_home):
    with _open(luma_home) as kb:
        with pytest.raises(UnknownName, match="is not in the knowledge base"):
            explain(kb, "urn:nothing-here")
        with pytest.raises(QueryError, match="is not an IRI"):
            explain(kb, "not an iri")


@pytest.mark.slow
def test_cli_explain_json_and_table(derived_kb):
    _home, qualified, _ = derived_kb  # LUMA_HOME points at it
    runner = CliRunner()
    out = runner.invoke(cli, ["kb", "explain", RB_HOST_MEMORY, "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["records"] == qualified and data["derived_by"]["rule"] == "recurring-binding"

    table = runner.invoke(cli, ["kb", "explain", RB_HOST_MEMORY, "--max-supports", "3"])
    assert table.exit_code == 0, table.output
    text = table.stdout
    assert f"rule recurring-binding v{VERSION['recurring-binding']} (min_architectures=2, min_workloads=3)" in text
    assert text.count(f"rule qualified-boundary v{VERSION['qualified-boundary']} (min_repetitions=3)") == 1 + 3  # the group, 3 boundaries
    assert text.count("(pex-chain, measured") == 3 and "1 more support(s) not listed" in text
    assert text.splitlines()[-1] == f"4 supporting record(s): {', '.join(qualified)}"

    bad = runner.invoke(cli, ["kb", "explain", "urn:nothing-here"])
    assert bad.exit_code == 2  # an IRI given on the command line that the KB lacks: a usage mistake
    assert bad.output.strip().splitlines() == ["Error: urn:nothing-here is not in the knowledge base"]
