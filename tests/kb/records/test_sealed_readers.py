"""Conclusions are sealed (issue 28, item 1; DESIGN §8): every reader of derived facts, ontology
facts and runner trust -- each named query, the Design-In and boundary reports, `luma kb explain`
-- reads them only from the graph that states them. Triples forged straight into a graph of
their own (bypassing `luma kb load`, which refuses them) change none of their answers.

The KB: five measured, signed chains of five workloads on two architectures in which host memory
binds; int8-weights recovers two (a recurring remedy, too few to drop the requirement), a RAM
upgrade three. The rules derive a hardware requirement on host memory, its recurring binding,
remedies, counter-evidence and capability candidates.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import DIM, ID, LUMA, ONTOLOGY_GRAPH, PROV, RDFS
from luma.rules.engine import Engine
from luma.rules.state import DERIVED
from luma.settings import Settings
from tests.kb.projects import luma, use_home

pytest.importorskip("matplotlib")

CONTRACT = {"name": "embed-serve", "clauses": [
    {"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"},
    {"metric": "throughput", "op": ">=", "value": 40, "unit": "request/s"}]}
#: A graph that is neither a rule's, the ontology's nor a record's: where a forger writes.
FORGED = ID + "record/forged"
CAP = "https://w3id.org/luma/capability/"
XSD = "http://www.w3.org/2001/XMLSchema#"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


HR = f"{ID}hardware-requirement/{_md5(DIM + 'host_memory')}"
RB = f"{ID}recurring-binding/{_md5(DIM + 'host_memory')}"


def _chain(n: int, remedy: bool, evidence) -> dict:
    doc = {"record_type": "pex-chain", "evidence_class": "measured",
           "workload": {"name": f"embed-{n}", "model": f"model-{n}", "task": "embedding"},
           "architecture": {"name": f"cpu-{n % 2}", "kind": "cpu", "vendor": "AMD"},
           "contract": CONTRACT,
           "pass_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                         "host_memory": {"value": 2, "unit": "GiB"}}},
           "fail_state": {"dimensions": {"compute": {"value": 2, "unit": "core"},
                                         "host_memory": {"value": 1, "unit": "GiB"}}},
           "crossed_dimension": "host_memory", "binding_resource": "host_memory",
           "intervention": {"name": "int8-weights", "kind": "software"} if remedy else
           {"name": "ram-upgrade", "kind": "hardware"},
           "recovered": True, "repetitions": 3}
    return evidence.with_trials(doc)


@pytest.fixture(scope="module")
def template(tmp_path_factory, evidence) -> Path:
    """The project, built once; each test works on a copy."""
    home = tmp_path_factory.mktemp("sealed") / "home"
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        key = evidence.trust_runner(Settings.from_env())
        folder = home.parent / "records"
        folder.mkdir()
        files = [evidence.write_signed(key, folder / f"chain-{n}.json", _chain(n, n < 2, evidence)) for n in range(5)]
        with KnowledgeBase.open(Settings.from_env()) as kb:
            kb.ingest(files, submitter="test")
            Engine(kb).run()
    return home


@pytest.fixture
def home(template, tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    shutil.copytree(template, home)
    return use_home(monkeypatch, home)


def _open(home: Path, read_only: bool = True) -> KnowledgeBase:
    return KnowledgeBase.open(Settings.from_env(home=home), read_only=read_only)


def outputs(home: Path) -> dict[str, str]:
    """What every reader answers: each named query (`luma kb query --name X --format json`), the
    Design-In and boundary reports' Markdown, and `luma kb explain` of the derived nodes."""
    from luma.kb.query.named import named_queries
    from luma.reports import boundary, design_in
    from luma.reports.render import render_markdown
    from luma.rules.explain import explain

    out = {}
    for name in named_queries():
        result = luma("kb", "query", "--name", name, "--format", "json")
        out[f"query {name}"] = f"{result.exit_code}\n{result.output}"
    with _open(home) as kb:
        out["design-in"] = render_markdown(design_in.build(kb))
        out["boundary"] = render_markdown(boundary.build(kb))
        for iri in (HR, RB, *_derived(kb, "recurring-remedy", "RecurringRemedy")[:1],
                    *_derived(kb, "qualified-boundary", "QualifiedBoundary")[:1]):
            out[f"explain {iri}"] = json.dumps(explain(kb, iri), sort_keys=True)
    return out


def _derived(kb, rule: str, cls: str) -> list[str]:
    return sorted(r["n"] for r in kb.store.select(
        f"SELECT ?n WHERE {{ GRAPH <{DERIVED}{rule}> {{ ?n a <{LUMA}{cls}> }} }}"))


def _forgeries(kb) -> list[str]:
    """Triples a forger would add, one line each, about the KB's own nodes (and new ones typed
    with derived classes), in Turtle-ish N-Triples."""
    [rr_int8] = [r["rr"] for r in kb.store.select(
        f"SELECT ?rr WHERE {{ GRAPH <{DERIVED}recurring-remedy> {{ ?rr <{LUMA}remedyIntervention> ?i ; "
        f"<{LUMA}remedyResource> <{DIM}host_memory> }} "
        f'GRAPH <{ID}graph/entities> {{ ?i <{RDFS}label> "int8-weights" }} }}')]
    q = _derived(kb, "qualified-boundary", "QualifiedBoundary")[0]
    chain = q.removesuffix("/qualified")
    [runner] = [r["r"] for r in kb.store.select(
        f'SELECT ?r WHERE {{ GRAPH ?g {{ ?g <{LUMA}recordKind> "runner-trust" . ?r <{LUMA}runnerName> ?n }} }}')]
    [intervention] = [r["i"] for r in kb.store.select(
        f'SELECT ?i WHERE {{ GRAPH <{ID}graph/entities> {{ ?i <{RDFS}label> "ram-upgrade" }} }}')]
    [contract] = [r["c"] for r in kb.store.select(
        f'SELECT ?c WHERE {{ GRAPH <{ID}graph/entities> {{ ?c <{RDFS}label> "embed-serve" }} }}')]
    L, F = LUMA, ID + "forged/"
    date = f'"2026-01-01T00:00:00Z"^^<{XSD}dateTime>'
    return [
        # facts on existing derived nodes
        f'<{HR}> <{L}resource> <{DIM}storage> .', f'<{HR}> <{L}confidence> "certain" .',
        f'<{HR}> <{L}supportWorkloads> 99 .', f'<{HR}> <{L}boundaryMin> 1.0 .',
        f'<{HR}> <{PROV}wasDerivedFrom> <{F}rb> .',
        f'<{RB}> <{L}supportChains> 999 .', f'<{RB}> <{L}resource> <{DIM}storage> .',
        f'<{RB}> <{PROV}wasDerivedFrom> <{FORGED}> .',
        f'<{rr_int8}> <{L}supportChains> 999 .', f'<{rr_int8}> <{L}remedyResource> <{DIM}storage> .',
        f'<{q}> <{L}bindingResource> <{DIM}storage> .', f'<{q}> <{L}workload> <{F}workload> .',
        f'<{q}> <{L}attestedBy> <{F}runner> .', f'<{q}> <{L}intervention> <{intervention}> .',
        f'<{q}> <{PROV}wasGeneratedBy> <{F}run> .',
        f'<{F}run> a <{PROV}Activity> .', f'<{F}run> <{L}rule> "qualified-boundary" .',
        f'<{F}run> <{L}ruleVersion> 1 .', f'<{F}run> <{L}parameter> "min_repetitions=1" .',
        # new nodes typed with derived classes
        f'<{F}hr> a <{L}HardwareRequirement> .', f'<{F}hr> <{L}resource> <{DIM}storage> .',
        f'<{F}hr> <{L}confidence> "high" .', f'<{F}hr> <{PROV}wasDerivedFrom> <{RB}> .',
        f'<{F}rb> a <{L}RecurringBinding> .', f'<{F}rb> <{L}resource> <{DIM}storage> .',
        f'<{F}rb> <{L}supportWorkloads> 9 .', f'<{F}rb> <{L}supportArchitectures> 9 .',
        f'<{F}rb> <{L}supportChains> 9 .',
        f'<{F}rr> a <{L}RecurringRemedy> .', f'<{F}rr> <{L}remedyResource> <{DIM}host_memory> .',
        f'<{F}rr> <{L}remedyIntervention> <{intervention}> .', f'<{F}rr> <{L}supportChains> 99 .',
        f'<{F}rr> <{L}supportWorkloads> 9 .', f'<{F}rr> <{L}supportArchitectures> 9 .',
        f'<{F}q> a <{L}QualifiedBoundary> .', f'<{F}q> <{L}qualifies> <{chain}> .',
        f'<{F}q> <{L}workload> <{F}workload> .', f'<{F}q> <{L}architecture> <{F}arch> .',
        f'<{F}q> <{L}bindingResource> <{DIM}host_memory> .', f'<{F}q> <{L}crossedDimension> <{DIM}host_memory> .',
        f'<{F}q> <{L}intervention> <{intervention}> .', f'<{F}q> <{L}repetitions> 9 .',
        f'<{F}q> <{L}attestedBy> <{runner}> .',
        f'<{F}cc> a <{L}CapabilityCandidate> .', f'<{F}cc> <{L}candidateFor> <{HR}> .',
        f'<{F}cc> <{L}capability> <{CAP}silicon> .', f'<{F}cc> <{L}candidateBasis> "resource" .',
        f'<{F}ce> a <{L}CounterEvidence> .', f'<{F}ce> <{L}supportOf> <{RB}> .',
        f'<{F}ce> <{L}counterChains> 42 .', f'<{F}ce> <{L}taskClass> "forged" .',
        f'<{F}u> a <{L}UnqualifiedChain> .', f'<{F}u> <{L}about> <{chain}> .',
        f'<{F}u> <{L}evidenceClass> <{L}VendorClaim> .',
        f'<{F}a> a <{L}ModelAgreement> .', f'<{F}a> <{L}aboutPrediction> <{F}p> .',
        f'<{F}a> <{L}agrees> true .', f'<{F}a> <{L}measuredVerdict> <{L}Pass> .',
        f'<{F}p> <{L}contract> <{contract}> .', f'<{F}p> <{L}predictedVerdict> <{L}Pass> .',
        f'<{F}p> <{L}evidenceClass> <{L}Simulated> .', f'<{F}p> <{L}predictionKey> "k" .',
        f'<{F}s> a <{L}StaleBoundary> .', f'<{F}s> <{L}staleBoundary> <{q}> .',
        # a chain's own facts, from outside its record graph
        f'<{chain}> <{L}recovered> false .', f'<{chain}> <{L}repetitions> 1 .',
        f'<{chain}> <{L}bindingResource> <{DIM}storage> .', f'<{chain}> <{L}evidenceClass> <{L}VendorClaim> .',
        # runner trust and revocation
        f'<{runner}> <{L}revokedAt> {date} .', f'<{runner}> <{L}runnerName> "mallory" .',
        f'<{runner}> <{L}keyFingerprint> "forged" .',
        # the ontology: hierarchy, record keys, capability mapping and labels
        f'<{DIM}resource> <{L}broader> <{DIM}evil> .', f'<{DIM}evil> a <{L}ResourceDimension> .',
        f'<{DIM}evil> <{L}recordKey> "evil" .', f'<{DIM}host_memory> <{L}recordKey> "forged_memory" .',
        f'<{DIM}host_memory> <{L}broader> <{DIM}storage> .',
        f'<{F}map> a <{L}CapabilityMapping> .', f'<{F}map> <{L}fromResource> <{DIM}host_memory> .',
        f'<{F}map> <{L}toCapability> <{CAP}accelerator> .',
        f'<{CAP}memory-hierarchy> <{RDFS}label> "forged capability" .',
        f'<{CAP}memory-hierarchy> <{L}realisedBy> <{CAP}accelerator> .',
    ]


def _forge(home: Path) -> list[str]:
    with _open(home, read_only=False) as kb:
        lines = _forgeries(kb)
        kb.store.update(f"INSERT DATA {{ GRAPH <{FORGED}> {{ {' '.join(lines)} }} }}")
    return lines


@pytest.mark.slow
def test_forged_triples_outside_their_graphs_change_no_reader(home):
    before = outputs(home)
    assert '"host_memory"' in before["query hardware-requirements"]  # there is something to attack
    assert "int8-weights" in before["query capabilities"]
    _forge(home)
    after = outputs(home)
    changed = [name for name in before if after[name] != before[name]]
    assert not changed, f"forged triples reached: {', '.join(changed)}"


@pytest.mark.slow
def test_the_forged_triples_would_reach_a_reader_of_the_union(home):
    """The forgeries are live: a query of the union of all graphs sees them."""
    _forge(home)
    with _open(home) as kb:
        rows = kb.store.select(f"SELECT ?c WHERE {{ <{HR}> <{LUMA}confidence> ?c }}")
        revoked = kb.store.select(f"SELECT ?r WHERE {{ ?r <{LUMA}revokedAt> ?t }}")
        broader = kb.store.select(f"SELECT ?x WHERE {{ <{DIM}resource> <{LUMA}broader> ?x }}")
        ontology = kb.store.select(
            f"SELECT ?x WHERE {{ GRAPH <{ONTOLOGY_GRAPH}> {{ <{DIM}resource> <{LUMA}broader> ?x }} }}")
    assert {r["c"] for r in rows} >= {"certain"} and revoked and broader and not ontology
