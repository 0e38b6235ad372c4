"""The brief's scenarios, end to end: the whole shipped rule set (`Engine(kb).run()`) over PEX
chains written as the projection writes them (kb/ingest/projection.py: one record graph per chain, the
workloads, architectures and interventions in the shared entities graph), with the resource
hierarchy that `KnowledgeBase.open` loads from ontology/dimensions.ttl.

(a) memory bandwidth binding in 4 workloads on 2 architectures -> a hardware requirement;
(b) the same pattern with simulated (projected, vendor-claim) evidence -> none, and the chains are
    reported as unqualified; (c) one workload on 3 architectures -> none; (d) a recurring remedy
    is reported (and a software one makes the requirement unnecessary); (e) counter-evidence is
    counted. The last test ingests real records for (a), to check that the TriG here is what the
    projection writes.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass

import pyoxigraph as ox
import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import get_named_query
from luma.kb.vocab import ENTITY_GRAPH, ID, LUMA, LUNIT, ONTOLOGY_GRAPH, record_graph
from luma.rules.engine import Engine
from luma.settings import Settings

DIM = "https://w3id.org/luma/dim/"
UNIT = "http://qudt.org/vocab/unit/"
PREFIXES = f"""@prefix luma: <{LUMA}> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix dim: <{DIM}> .
"""
RUNNER = f"{ID}runner/0123456789abcdef0123456789abcdef"
RULES = {"qualified-boundary", "recurring-binding", "recurring-remedy", "hardware-requirement",
         "counter-evidence", "unqualified-evidence", "capability-candidate", "model-agreement", "binds-before",
         "kv-concurrency-limit", "unrecovered-boundary", "tier-remedy", "qualified-optimum", "stale-boundary"}


@dataclass
class Chain:
    """One PEX chain, with the facts the projection writes for it."""

    key: str
    workload: str
    task: str
    architecture: str
    binding: str = "memory_bandwidth"
    level: float = 2e11  # the crossed dimension's PASS level, in its canonical unit
    unit: str = UNIT + "BYTE-PER-SEC"
    intervention: str = "int8-weights"
    kind: str = "Software"
    evidence: str = "Measured"
    #: The runner key that signed the record (measured records are signed: issue 14).
    runner: str = RUNNER

    @property
    def iri(self) -> str:
        return f"{ID}chain/{self.key}"

    @property
    def qualified(self) -> str:
        return self.iri + "/qualified"

    def trig(self) -> str:
        g = record_graph(self.key)
        w, a = f"{ID}workload/{self.workload}", f"{ID}architecture/{self.architecture}"
        i = f"{ID}intervention/{self.intervention}"
        return f"""
<{g}> {{
  <{g}> a luma:SourceRecord ; luma:recordKind "pex-chain" ; luma:evidenceClass luma:{self.evidence} ;
      luma:attestedBy <{self.runner}> .
  <{self.iri}> a luma:BoundaryQualification ; luma:evidenceClass luma:{self.evidence} ; prov:wasDerivedFrom <{g}> ;
      luma:workload <{w}> ; luma:architecture <{a}> ;
      luma:passContext "ctx-{self.key}" ; luma:failContext "ctx-{self.key}" ;
      luma:passLevel "{self.level}"^^<http://www.w3.org/2001/XMLSchema#double> ;
      luma:failLevel "{self.level / 2}"^^<http://www.w3.org/2001/XMLSchema#double> ;
      luma:passUnit <{self.unit}> ; luma:failUnit <{self.unit}> ;
      luma:crossedDimension dim:{self.binding} ; luma:bindingResource dim:{self.binding} ;
      luma:intervention <{i}> ; luma:recovered true ; luma:repetitions 3 .
}}
<{ENTITY_GRAPH}> {{
  <{w}> a luma:Workload ; rdfs:label "{self.workload}" ; luma:task "{self.task}" .
  <{a}> a luma:Architecture ; rdfs:label "{self.architecture}" .
  <{i}> a luma:Intervention ; rdfs:label "{self.intervention}" ; luma:interventionKind luma:{self.kind} .
}}
"""


@contextmanager
def derived(home, chains: list[Chain]):
    """A knowledge base holding the chains, after one run of the whole rule set."""
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        data = (PREFIXES + "".join(c.trig() for c in chains)).encode()
        kb.store.load_nquads(ox.serialize(ox.parse(data, format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))
        report = Engine(kb).run()
        assert {r.rule for r in report.runs} == RULES
        yield kb


def select(kb, sparql: str) -> list[dict[str, str]]:
    return kb.store.select(f"PREFIX luma: <{LUMA}>\nPREFIX prov: <http://www.w3.org/ns/prov#>\n{sparql}")


def instances(kb, cls: str) -> list[str]:
    return sorted(r["x"] for r in select(kb, f"SELECT ?x WHERE {{ ?x a luma:{cls} }}"))


def requirements(kb) -> dict[str, dict[str, str]]:
    """The named query `hardware-requirements`, by resource (record key, or IRI for a parent)."""
    rows = kb.store.select(get_named_query("hardware-requirements").sparql)
    return {r["resource"]: r for r in rows}


def bandwidth_chains(**kw) -> list[Chain]:
    """Memory bandwidth binding in 4 workloads on 2 architectures, each recovered by a different
    intervention (no remedy recurs)."""
    levels = [1e11, 2e11, 4e11, 8e11]
    chains = [Chain(f"bw{n}", f"w{n}", "chat", f"arch{n % 2}", level=levels[n], intervention=f"fix-{n}") for n in range(4)]
    for c in chains:
        for k, v in kw.items():
            setattr(c, k, v)
    return chains


def test_the_hierarchy_comes_with_the_knowledge_base(luma_home):
    # The scenarios rely on KnowledgeBase.open loading ontology/dimensions.ttl.
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        rows = kb.store.select(f"SELECT ?p WHERE {{ GRAPH <{ONTOLOGY_GRAPH}> {{ <{DIM}memory_bandwidth> <{LUMA}broader> ?p }} }}")
    assert [r["p"] for r in rows] == [DIM + "transfer_bandwidth"]


@pytest.mark.slow
def test_a_memory_bandwidth_binding_in_four_workloads_on_two_architectures_is_a_requirement(luma_home):
    with derived(luma_home, bandwidth_chains()) as kb:
        assert len(instances(kb, "QualifiedBoundary")) == 4
        reqs = requirements(kb)
        # memory bandwidth alone: its parent transfer bandwidth would only repeat it (nothing else
        # binds under it), and the root of the hierarchy never recurs
        assert set(reqs) == {"memory_bandwidth"}
        bw = reqs["memory_bandwidth"]
        assert (int(bw["workloads"]), int(bw["architectures"]), bw["confidence"]) == (4, 2, "low")
        assert [float(bw[k]) for k in ("minLevel", "medianLevel", "maxLevel")] == [1e11, 3e11, 8e11]
        # derived from the recurring binding, itself derived from its binding groups and through
        # them from the four qualified boundaries
        rows = select(kb, f"SELECT ?q WHERE {{ ?hr a luma:HardwareRequirement ; luma:resource <{DIM}memory_bandwidth> ; "
                          f"prov:wasDerivedFrom ?rb . ?rb a luma:RecurringBinding ; prov:wasDerivedFrom ?g . "
                          f"?g a luma:BindingGroup ; prov:wasDerivedFrom ?q }}")
        assert sorted(r["q"] for r in rows) == sorted(c.qualified for c in bandwidth_chains())
        assert instances(kb, "RecurringRemedy") == [] and instances(kb, "UnqualifiedChain") == []
        again = Engine(kb).run()
        assert (again.new, again.removed) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("evidence", ["Simulated", "Projected", "VendorClaim"])
def test_b_the_same_pattern_without_measured_evidence_is_no_requirement(luma_home, evidence):
    chains = bandwidth_chains(evidence=evidence)
    with derived(luma_home, chains) as kb:
        for cls in ("QualifiedBoundary", "RecurringBinding", "RecurringRemedy", "HardwareRequirement"):
            assert instances(kb, cls) == [], cls
        assert requirements(kb) == {}
        rows = select(kb, "SELECT ?u ?chain ?class WHERE { ?u a luma:UnqualifiedChain ; luma:about ?chain ; "
                          "luma:evidenceClass ?class ; prov:wasDerivedFrom ?chain }")
        assert sorted(r["chain"] for r in rows) == sorted(c.iri for c in chains)
        assert {r["class"] for r in rows} == {LUMA + evidence}


@pytest.mark.slow
@pytest.mark.parametrize("architectures", [3, 1], ids=["one-workload-three-architectures", "a-single-chain"])
def test_c_one_workload_is_no_requirement(luma_home, architectures):
    chains = [Chain(f"one{n}", "w0", "chat", f"arch{n}", intervention=f"fix-{n}") for n in range(architectures)]
    with derived(luma_home, chains) as kb:
        assert len(instances(kb, "QualifiedBoundary")) == architectures
        assert instances(kb, "RecurringBinding") == [] and instances(kb, "HardwareRequirement") == []


@pytest.mark.slow
@pytest.mark.parametrize("kind, requirement", [("Software", False), ("Partner", False), ("Hardware", True)])
def test_d_a_recurring_remedy_is_reported(luma_home, kind, requirement):
    # The same intervention recovers memory bandwidth in all four workloads. A software or partner
    # remedy makes the hardware requirement unnecessary; a hardware one is the requirement itself.
    chains = bandwidth_chains(intervention="the-remedy", kind=kind)
    with derived(luma_home, chains) as kb:
        rows = select(kb, "SELECT ?rr ?r ?i ?chains ?workloads WHERE { ?rr a luma:RecurringRemedy ; luma:resource ?r ; "
                          "luma:remedyIntervention ?i ; luma:supportChains ?chains ; luma:supportWorkloads ?workloads }")
        by_resource = {r["r"]: r for r in rows}
        # the parent keeps its remedy (a requirement on it would be weighed against it); never the root
        assert set(by_resource) == {DIM + "memory_bandwidth", DIM + "transfer_bandwidth"}
        bw = by_resource[DIM + "memory_bandwidth"]
        assert (bw["i"], int(bw["chains"]), int(bw["workloads"])) == (ID + "intervention/the-remedy", 4, 4)
        support = select(kb, f"SELECT ?q WHERE {{ <{bw['rr']}> prov:wasDerivedFrom ?g . ?g a luma:BindingGroup ; prov:wasDerivedFrom ?q }}")
        assert sorted(r["q"] for r in support) == sorted(c.qualified for c in chains)
        assert len(instances(kb, "RecurringBinding")) == 1  # the binding still recurs either way
        assert ("memory_bandwidth" in requirements(kb)) is requirement


@pytest.mark.slow
def test_d_an_intervention_used_once_is_no_remedy(luma_home):
    with derived(luma_home, bandwidth_chains()[:1] + [Chain("m1", "w9", "chat", "arch0", binding="host_memory",
                                                            unit=UNIT + "BYTE", level=2**30)]) as kb:
        assert instances(kb, "RecurringRemedy") == []


@pytest.mark.slow
def test_e_counter_evidence_is_counted(luma_home):
    # Four chat workloads bind memory bandwidth. Other chat chains bind compute (twice) and host
    # memory (once): 3 counter-chains. An embedding chain binding compute is of another task class.
    others = [Chain("c1", "w5", "chat", "arch0", binding="compute", unit=LUNIT + "Core", level=8.0),
              Chain("c2", "w6", "chat", "arch0", binding="compute", unit=LUNIT + "Core", level=4.0),
              Chain("h1", "w0", "chat", "arch1", binding="host_memory", unit=UNIT + "BYTE", level=2.0**31),
              Chain("e1", "w7", "embedding", "arch0", binding="compute", unit=LUNIT + "Core")]
    with derived(luma_home, bandwidth_chains() + others) as kb:
        rows = select(kb, "SELECT ?r ?n ?ce WHERE { ?ce a luma:CounterEvidence ; luma:supportOf ?rb ; luma:counterChains ?n . "
                          "?rb luma:resource ?r }")
        counts = {r["r"]: int(r["n"]) for r in rows}
        assert counts == {DIM + "memory_bandwidth": 3}
        ce = next(r["ce"] for r in rows if r["r"] == DIM + "memory_bandwidth")
        # counted on the node, listed by the named query
        from luma.kb.query.named import get_named_query

        listed = select(kb, get_named_query("counter-chains").sparql)
        against = [r["counterChain"] for r in listed if r["resource"] == "memory_bandwidth"]
        assert sorted(against) == sorted(c.qualified for c in others[:3])
        tasks = select(kb, f"SELECT ?t WHERE {{ <{ce}> luma:taskClass ?t }}")
        assert [r["t"] for r in tasks] == ["chat"]
        # counter-evidence is reported beside the requirement; it does not remove it
        assert "memory_bandwidth" in requirements(kb)


@pytest.mark.slow
def test_a_parent_recurs_over_two_bound_resources_and_the_root_never(luma_home):
    # Host memory binds in 2 workloads, the KV cache in 2 others, on 2 architectures: neither
    # recurs alone (3 workloads needed), their parent memory capacity does (4 workloads); the
    # root `resource` gathers them and compute too, and never recurs.
    mem = {"unit": UNIT + "BYTE"}
    chains = [Chain("m0", "w0", "chat", "arch0", binding="host_memory", level=2.0**30, intervention="fix-m0", **mem),
              Chain("m1", "w1", "chat", "arch1", binding="host_memory", level=2.0**31, intervention="fix-m1", **mem),
              Chain("k0", "w2", "chat", "arch0", binding="kv_cache", level=2.0**28, intervention="fix-k0", **mem),
              Chain("k1", "w3", "chat", "arch1", binding="kv_cache", level=2.0**29, intervention="fix-k1", **mem),
              # batching recovers compute twice: a recurring remedy of compute, never of the root
              Chain("c0", "w4", "chat", "arch0", binding="compute", unit=LUNIT + "Core", level=4.0,
                    intervention="batching"),
              Chain("c1", "w5", "chat", "arch1", binding="compute", unit=LUNIT + "Core", level=8.0,
                    intervention="batching")]
    with derived(luma_home, chains) as kb:
        rows = select(kb, "SELECT ?r ?w WHERE { ?rb a luma:RecurringBinding ; luma:resource ?r ; "
                          "luma:supportWorkloads ?w }")
        assert {r["r"]: int(r["w"]) for r in rows} == {DIM + "memory_capacity": 4}
        assert set(requirements(kb)) == {DIM + "memory_capacity"}
        remedies = select(kb, "SELECT ?r WHERE { ?rr a luma:RecurringRemedy ; luma:resource ?r }")
        assert {r["r"] for r in remedies} == {DIM + "compute"}


def _record(n: int, gbps: int) -> dict:
    return {"record_type": "pex-chain", "evidence_class": "measured",
            "workload": {"name": f"chat-{n}", "model": f"model-{n}", "task": "chat"},
            "architecture": {"name": f"GPU {n % 2}", "kind": "gpu", "vendor": "ACME"},
            "contract": {"name": "chat-p99", "clauses": [{"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"}]},
            "pass_state": {"dimensions": {"compute": {"value": 8, "unit": "core"},
                                          "memory_bandwidth": {"value": gbps, "unit": "GB/s"}}},
            "fail_state": {"dimensions": {"compute": {"value": 8, "unit": "core"},
                                          "memory_bandwidth": {"value": gbps // 2, "unit": "GB/s"}}},
            "crossed_dimension": "memory_bandwidth", "binding_resource": "memory_bandwidth",
            "intervention": {"name": f"fix-{n}", "kind": "software"}, "recovered": True, "repetitions": 3}


@pytest.mark.slow
def test_a_with_ingested_records(luma_home, tmp_path):
    """Scenario (a) from real, signed PEX-chain records through ingest and projection; then the
    key that signed them is revoked, and the next rules run drops the requirement."""
    import random

    from click.testing import CliRunner

    from luma.cli.main import cli
    from luma.kb.operations import runner_keys
    from luma.kb.trust import runners
    from luma.kb.records import synthetic

    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        key = runner_keys.keygen(kb, "lab-one")
    signer = runners.signer(luma_home, key.name)
    rnd = random.Random(5)
    lines = []
    for n, gbps in enumerate([100, 200, 400, 800]):
        rec = _record(n, gbps)
        rec["trials"] = synthetic.trials(rnd, rec["contract"], rec["repetitions"], rec["recovered"])
        lines.append(json.dumps(signer.sign(rec)) + "\n")
    path = tmp_path / "chains.jsonl"
    path.write_text("".join(lines))
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        kb.ingest([path], submitter="tester")
        Engine(kb).run()
        reqs = requirements(kb)
    assert set(reqs) == {"memory_bandwidth"}
    bw = reqs["memory_bandwidth"]
    assert (int(bw["workloads"]), int(bw["architectures"]), bw["confidence"]) == (4, 2, "low")
    assert [float(bw[k]) for k in ("minLevel", "medianLevel", "maxLevel")] == [1e11, 3e11, 8e11]
    runner = CliRunner()
    assert runner.invoke(cli, ["runner", "revoke", "lab-one", "--reason", "key leaked"]).exit_code == 0
    out = runner.invoke(cli, ["rules", "run", "--format", "json"])
    assert out.exit_code == 0, out.output
    with KnowledgeBase.open(Settings.from_env(home=luma_home), read_only=True) as kb:
        assert requirements(kb) == {}
        assert instances(kb, "QualifiedBoundary") == []
        # the records stay in the ledger (append-only); they no longer qualify
        assert kb.ledger.count_by()[("pex-chain", "measured")] == 4


@pytest.mark.slow
def test_a_requirement_names_its_candidate_capabilities(luma_home):
    # memory bandwidth binds in 4 workloads on 2 architectures; one int8 fix recovers one chain
    # (no recurring remedy) -> candidates from the resource's mapping alone (ontology/capabilities.ttl)
    with derived(luma_home, bandwidth_chains()) as kb:
        rows = select(kb, """SELECT ?cap ?basis WHERE { ?c a luma:CapabilityCandidate ; luma:capability ?cap ;
                             luma:candidateBasis ?basis ; luma:candidateFor ?hr . ?hr luma:resource ?r }""")
    caps = {(r["cap"].rsplit("/", 1)[-1], r["basis"]) for r in rows}
    assert caps == {("memory-hierarchy", "resource"), ("memory-side-compute", "resource")}
