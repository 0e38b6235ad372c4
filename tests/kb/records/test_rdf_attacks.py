"""Plain RDF cannot bend a conclusion (issue 28): documents that try to change what LUMA concludes —
a revocation of the project's own key, facts on each derived class, the resource hierarchy, the
capability mapping, attestation, evidence class, the rules' own marks — loaded with `luma kb load`
as vendor claims. Each is refused in one line naming the triple, leaving ledger and KB exactly as
they were; the few that load (they describe only their own nodes, with terms no one seals) change
nothing: after `luma rules run`, every named query, `kb explain` of every requirement and the
Design-In report are byte-identical to what they were before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from luma.kb.query.named import named_queries
from luma.rules.engine import Engine
from tests.kb.projects import _build_project, assert_one_line_error, luma, open_kb, snapshot, use_home

L = "https://w3id.org/luma/ns#"
ID = "https://w3id.org/luma/id/"
PRE = ("@prefix luma: <https://w3id.org/luma/ns#> .\n@prefix dim: <https://w3id.org/luma/dim/> .\n"
       "@prefix cap: <https://w3id.org/luma/capability/> .\n@prefix ex: <https://example.org/> .\n"
       "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n@prefix prov: <http://www.w3.org/ns/prov#> .\n")
WHEN = '"2026-01-01T00:00:00Z"^^xsd:dateTime'

#: (name, Turtle body; {runner}, {requirement}, {binding}, {remedy}, {boundary}, {chain}, {record}
#: are the project's own nodes) -- every one refused.
REFUSED = [
    ("revoke-own-key", "<{runner}> luma:revokedAt %s ." % WHEN),
    ("revoke-own-key-by-own-node", "ex:r luma:revokes <{runner}> ; luma:recordKind \"runner-revocation\" ."),
    ("revoked-at-on-own-node", "ex:r luma:revokedAt %s ." % WHEN),
    ("trusted-since", "ex:r luma:trustedSince %s ; luma:runnerName \"x\" ." % WHEN),
    ("key-fingerprint-on-runner", "<{runner}> luma:keyFingerprint \"00\" ."),
    ("hierarchy-root-broader", "dim:resource luma:broader dim:evil ."),
    ("hierarchy-own-node-broader", "ex:evil luma:broader dim:resource ."),
    ("own-resource-dimension", "ex:evil a luma:ResourceDimension ; luma:recordKey \"evil\" ."),
    ("dimension-record-key", "dim:host_memory luma:recordKey \"compute\" ."),
    ("recurring-binding-facts", "<{binding}> luma:resource dim:accelerator_type ; luma:supportWorkloads 999 ."),
    ("new-recurring-binding", "ex:rb a luma:RecurringBinding ; luma:resource dim:accelerator_type ; "
                              "luma:supportWorkloads 999 ; luma:supportArchitectures 9 ; luma:supportChains 99 ."),
    ("recurring-remedy-facts", "<{remedy}> luma:remedyResource dim:host_memory ; luma:supportChains 99999 ."),
    ("own-remedy-support", "ex:rr luma:remedyResource dim:host_memory ; luma:supportChains 99999 ."),
    ("requirement-facts", "<{requirement}> luma:resource dim:storage ; luma:confidence \"certain\" ."),
    ("new-requirement", "ex:hr a luma:HardwareRequirement ; luma:resource dim:storage ."),
    ("bnode-requirement", "[] a luma:HardwareRequirement ; luma:resource dim:storage ."),
    ("confidence-on-own-node", "ex:hr luma:confidence \"certain\" ."),
    ("boundary-facts", "<{boundary}> luma:passLevel 1 ; luma:workload ex:w ."),
    ("new-boundary", "ex:q a luma:QualifiedBoundary ; luma:qualifies <{chain}> ."),
    ("stale-a-boundary", "ex:s a luma:StaleBoundary ; luma:staleBoundary <{boundary}> ."),
    ("chain-evidence-class", "<{chain}> luma:evidenceClass luma:Measured ; luma:recovered true ."),
    ("own-node-measured", "ex:c luma:evidenceClass luma:Measured ."),
    ("record-attested", "<{record}> luma:attestedBy <{runner}> ."),
    ("own-node-attested", "ex:c luma:attestedBy <{runner}> ."),
    ("record-kind", "ex:g luma:recordKind \"pex-chain\" ."),
    ("capability-mapping", "ex:m a luma:CapabilityMapping ; luma:fromResource dim:storage ; "
                           "luma:toCapability cap:silicon ."),
    ("capability-map-predicates", "ex:m luma:fromResource dim:host_memory ; luma:toCapability cap:evil ."),
    ("capability-class", "cap:silicon luma:realisedBy cap:evil ."),
    ("derived-only-unmarked", "luma:HardwareRequirement luma:derivedOnly false ."),
    ("seal-marks", "luma:Rules luma:states ex:p ."),
    ("ontology-term-label", "luma:Measured <http://www.w3.org/2000/01/rdf-schema#label> \"vendor\" ."),
    ("derivation-node", "ex:act luma:rule \"hardware-requirement\" ; luma:ruleVersion 99 ."),
    ("relative-escape", "<../../derived/hardware-requirement> luma:note \"x\" ."),
    ("unit-node", "<https://w3id.org/luma/unit/x> luma:note \"x\" ."),
    ("counter-chains", "ex:ce luma:counterChains 0 ; luma:counterChain <{chain}> ."),
    ("candidate", "ex:cc luma:capability cap:silicon ; luma:candidateFor <{requirement}> ."),
]

#: Documents that load: only their own nodes, with terms no one seals. They change nothing.
LOADED = [
    ("spec-sheet", "ex:h100 ex:hbm 80 ; ex:about dim:hbm_capacity, <{requirement}> ."),
    ("points-at-luma-nodes", "ex:note ex:says \"this requirement is wrong\" ; ex:about <{requirement}>, <{runner}> ."),
    ("intervention-kind-on-own", "ex:int8 luma:interventionKind luma:Hardware ; luma:note \"own node\" ."),
    ("provenance-on-own", "ex:claim prov:wasDerivedFrom <{requirement}> ; luma:note \"derived from LUMA's own\" ."),
    ("other-case-scheme", "<HTTPS://w3id.org/luma/id/runner/x> ex:p 1 ."),
    ("plain-http", "<http://w3id.org/luma/dim/resource> ex:broader <http://w3id.org/luma/dim/evil> ."),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory, evidence):
    """A benchmark project (60 signed synthetic chains counted as measured) with the rules run, its
    own nodes, and what every reader shows."""
    home = tmp_path_factory.mktemp("attacks") / "home"
    key = _build_project(home, evidence, 60)
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        with open_kb() as kb:
            Engine(kb).run()
            nodes = {
                "runner": f"{ID}runner/{key.fingerprint}",
                "requirement": _first(kb, "HardwareRequirement", "hardware-requirement"),
                "binding": _first(kb, "RecurringBinding", "recurring-binding"),
                "remedy": _first(kb, "RecurringRemedy", "recurring-remedy"),
                "boundary": _first(kb, "QualifiedBoundary", "qualified-boundary"),
            }
            nodes["chain"] = kb.store.select(f"SELECT ?c WHERE {{ GRAPH <{ID}graph/derived/qualified-boundary> "
                                             f"{{ <{nodes['boundary']}> <{L}qualifies> ?c }} }}", union=False)[0]["c"]
            nodes["record"] = kb.store.select(f'SELECT ?g WHERE {{ GRAPH ?g {{ ?g <{L}recordKind> "pex-chain" }} }} '
                                              "LIMIT 1", union=False)[0]["g"]
        yield home, nodes, _outputs(home)


def _first(kb, cls: str, rule: str) -> str:
    rows = kb.store.select(f"SELECT ?n WHERE {{ GRAPH <{ID}graph/derived/{rule}> {{ ?n a <{L}{cls}> }} }} "
                           "ORDER BY ?n LIMIT 1", union=False)
    assert rows, f"the project derives no {cls}"
    return rows[0]["n"]


def _outputs(home: Path) -> dict[str, str]:
    """Every named query (JSON), `kb explain` of each requirement and the Design-In report (Markdown)."""
    out = {name: luma("kb", "query", "--name", name, "--format", "json").stdout for name in sorted(named_queries())}
    for row in json.loads(out["hardware-requirements"])["results"]["bindings"]:
        iri = row["requirement"]["value"]
        out[f"explain {iri}"] = luma("kb", "explain", iri, "--format", "json").stdout
    report = home.parent / f"{home.name}-design-in"
    result = luma("report", "design-in", "--out", str(report))
    assert result.exit_code == 0, result.output
    out["design-in"] = (report / "report.md").read_text()
    return out


def test_the_project_has_conclusions_to_bend(project):
    _home, _nodes, before = project
    assert json.loads(before["hardware-requirements"])["results"]["bindings"]
    assert len(REFUSED) + len(LOADED) >= 30


@pytest.mark.parametrize("name, body", REFUSED, ids=[n for n, _ in REFUSED])
def test_a_document_stating_a_sealed_fact_is_refused_and_changes_nothing(name, body, project, tmp_path):
    home, nodes, _before = project
    doc = tmp_path / f"{name}.ttl"
    doc.write_text(PRE + body.format(**nodes) + "\n")
    with pytest.MonkeyPatch.context() as mp:
        use_home(mp, home)
        was = snapshot()
        assert_one_line_error(luma("kb", "load", doc, "--evidence-class", "vendor-claim"), str(doc),
                              "the triple", "is refused", "nothing was loaded")
        assert snapshot() == was


def test_documents_that_load_describe_only_their_own_nodes_and_change_no_conclusion(project, tmp_path):
    """Compared with a copy of the project given as many neutral documents (so the honest counts of
    vendor-claim documents are equal on both sides), not one output differs."""
    home, nodes, _before = project
    twin = tmp_path / "twin"
    shutil.copytree(home, twin, symlinks=True)
    outputs = {}
    for where, docs in ((home, [body.format(**nodes) for _, body in LOADED]),
                        (twin, [f"ex:neutral{i} ex:p {i} ." for i in range(len(LOADED))])):
        with pytest.MonkeyPatch.context() as mp:
            use_home(mp, where)
            for i, body in enumerate(docs):
                doc = tmp_path / f"{where.name}-{i}.ttl"
                doc.write_text(PRE + body + "\n")
                result = luma("kb", "load", doc, "--evidence-class", "vendor-claim")
                assert result.exit_code == 0, (body, result.output)
            assert luma("rules", "run").exit_code == 0
            outputs[where] = _outputs(where)
    attacked, neutral = outputs[home], outputs[twin]
    assert attacked.keys() == neutral.keys()
    assert {k for k in attacked if attacked[k] != neutral[k]} == set()
