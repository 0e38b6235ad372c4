"""Synthetic data is never measured (issue 28, DESIGN §8): kb/records/synthetic.py writes the chains that
would be measured as `synthetic`, a class of its own that no rule qualifies; ingest refuses a
generated chain that claims `measured`, with one line, except in a throwaway benchmark project
marked by `mark_bench_project`, where the same chains are signed as measured and qualify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RecordError
from luma.kb.records import synthetic
from luma.kb.ingest.evidence_gate import check_before_open
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import iter_records
from luma.kb.operations.runner_keys import keygen
from luma.kb.trust.runners import signer
from luma.rules.engine import Engine
from luma.settings import Settings

N = 40


def luma(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _classes(home: Path) -> dict[tuple[str, str], int]:
    result = luma("kb", "query", "--name", "evidence-by-class", "--format", "json")
    assert result.exit_code == 0, result.output
    return {(r["evidenceClass"]["value"], r["kind"]["value"]): int(r["records"]["value"])
            for r in json.loads(result.stdout)["results"]["bindings"]}


def _qualified(kb) -> int:
    return len(kb.store.select("SELECT ?q WHERE { ?q a <https://w3id.org/luma/ns#QualifiedBoundary> }"))


@pytest.fixture
def lab_signer(luma_home):
    """A runner key the `luma_home` project trusts (kb/runners.Signer)."""
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        made = keygen(kb, "lab-a")
    return signer(luma_home, made.name)


def test_would_be_measured_chains_are_synthetic_and_the_same_chains_as_signed_ones(lab_signer):
    plain = list(synthetic.records(N))
    signed = list(synthetic.records(N, signer=lab_signer))
    assert {r["evidence_class"] for r in plain} == {"synthetic", "simulated", "projected", "vendor-claim"}
    generated = [r for r in plain if r["evidence_class"] == "synthetic"]
    assert generated and all(r["trials"] and synthetic.generated(r["provenance"]["tool"]) for r in generated)
    assert "attestation" not in json.dumps(plain)
    # The random stream does not depend on the opt-in: the same chains, only measured and signed.
    for a, b in zip(plain, signed):
        b = {k: v for k, v in b.items() if k != "attestation"}
        assert {**a, "evidence_class": None} == {**b, "evidence_class": None}
        assert (a["evidence_class"], b["evidence_class"]) in {("synthetic", "measured")} | {
            (c, c) for c in ("simulated", "projected", "vendor-claim")}


def test_a_project_with_synthetic_chains_counts_none_as_measured(luma_home, tmp_path):
    path = synthetic.write_jsonl(tmp_path / "synthetic.jsonl", N)
    n = sum(json.loads(line)["evidence_class"] == "synthetic" for line in path.read_text().splitlines())
    assert luma("kb", "ingest", path).exit_code == 0
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        Engine(kb).run()
        assert _qualified(kb) == 0
        unqualified = kb.store.select("SELECT ?u WHERE { ?u <https://w3id.org/luma/ns#evidenceClass> "
                                      "<https://w3id.org/luma/ns#Synthetic> ; a <https://w3id.org/luma/ns#UnqualifiedChain> }")
    assert len(unqualified) == n
    classes = _classes(luma_home)
    assert classes[("Synthetic", "pex-chain")] == n and not any(c == "Measured" for c, _ in classes)


def test_ingest_refuses_a_synthetic_chain_that_claims_measured(luma_home, lab_signer, tmp_path):
    path = synthetic.write_jsonl(tmp_path / "signed.jsonl", N, signer=lab_signer)
    result = CliRunner().invoke(cli, ["kb", "ingest", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    err = result.stderr
    assert err.startswith(f"Error: {path}") and err.count("\n") == 1, err
    assert "evidence_class" in err and "luma synthetic" in err and synthetic.BENCH_MARKER in err
    with pytest.raises(RecordError, match="never measured"):  # the same refusal inside the KB's ingest
        with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
            kb.ingest([path])
    with pytest.raises(RecordError, match="never measured"):
        check_before_open(Settings.from_env(home=luma_home), list(iter_records([path], luma_home)))
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        assert kb.store.select('SELECT ?g WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#recordKind> "pex-chain" } }',
                               union=False) == []


def test_only_a_marked_bench_project_counts_them_as_measured(luma_home, lab_signer, tmp_path):
    marker = synthetic.mark_bench_project(luma_home)
    assert synthetic.is_bench_project(luma_home) and synthetic.BENCH_NOTE in marker.read_text()
    path = synthetic.write_jsonl(tmp_path / "signed.jsonl", N, signer=lab_signer)
    measured = sum(json.loads(line)["evidence_class"] == "measured" for line in path.read_text().splitlines())
    assert luma("kb", "ingest", path).exit_code == 0
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        Engine(kb).run()
        assert _qualified(kb) > 0
    assert _classes(luma_home)[("Measured", "pex-chain")] == measured


def test_plain_rdf_cannot_claim_synthetic(luma_home, tmp_path):
    ttl = tmp_path / "x.ttl"
    ttl.write_text("@prefix ex: <http://example.org/> .\nex:a ex:b ex:c .\n")
    assert luma("kb", "load", ttl, "--evidence-class", "synthetic").exit_code == 2


def test_kb_bench_says_its_synthetic_chains_are_measured_in_its_own_project(monkeypatch):
    # The child (rules/pipeline_bench.py) marks its project and reports the note with every size; the table says it.
    from luma.rules import pipeline_bench as bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: [{"records": 10, "error": "stub", "note": synthetic.BENCH_NOTE}])
    result = luma("kb", "bench", "--records", "10")
    assert result.exit_code == 0, result.output
    assert result.output.count(synthetic.BENCH_NOTE) == 1
