"""The ontology (ontology/luma.ttl) declares every term the projection writes, and nothing fetches."""

from __future__ import annotations

import importlib.resources
import json
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox
import pytest
from rdflib import OWL, RDF, RDFS, Graph, Namespace, URIRef

from luma.kb.ingest import projection_model, projection_nodes
from luma.kb.records import units
from luma.kb.records.dimensions import all_dimensions, record_dimensions
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.ingest.projection_outcomes import RESTORATION_VERDICTS
from luma.kb.records.loader import validate_document
from luma.kb.vocab import EVIDENCE_CLASSES, ID, LUMA, LUNIT

ONTOLOGY = importlib.resources.files("luma.ontology")
TTL_FILES = ["luma.ttl", "shapes.ttl", "dimensions.ttl", "capabilities.ttl"]
L = Namespace(LUMA)
PROV = Namespace("http://www.w3.org/ns/prov#")
SKOS = Namespace("http://www.w3.org/2004/02/skos/core#")
QUDT = Namespace("http://qudt.org/schema/qudt/")

EXAMPLE = json.loads((Path(__file__).parent / "data" / "valid_chain.json").read_text())

#: Every optional part of a record: trials with observations and a failure cause, provenance,
#: a categorical dimension.
FULL = json.loads((Path(__file__).parent / "data" / "full_chain.json").read_text())


def projected(doc: dict) -> list[tuple[str, str, str]]:
    rec = validate_document(doc, "test")
    return project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 2, tzinfo=timezone.utc))).triples


@lru_cache(maxsize=None)
def graph(name: str) -> Graph:
    return Graph().parse(data=(ONTOLOGY / name).read_text(), format="turtle")


def declared(g: Graph) -> set[str]:
    kinds = {OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty, OWL.AnnotationProperty, RDF.Property, RDFS.Class}
    return {str(s) for k in kinds for s in g.subjects(RDF.type, k)}


def individuals(g: Graph, cls: URIRef) -> set[str]:
    return {str(s) for s in g.subjects(RDF.type, cls)}


@pytest.mark.parametrize("name", TTL_FILES)
def test_ontology_files_parse_with_rdflib_and_pyoxigraph(name):
    data = (ONTOLOGY / name).read_bytes()
    assert len(Graph().parse(data=data, format="turtle")) > 0
    assert len(list(ox.parse(data, ox.RdfFormat.TURTLE))) > 0


@pytest.mark.parametrize("name", TTL_FILES)
def test_no_file_imports_anything(name):
    # The KB must never fetch: no owl:imports anywhere in the ontology folder.
    assert not list(graph(name).triples((None, OWL.imports, None)))


@pytest.mark.parametrize("doc", [EXAMPLE, FULL], ids=["example", "full"])
def test_every_term_the_projection_writes_is_declared(doc):
    triples = projected(doc)
    ours = declared(graph("luma.ttl"))
    builtins = {str(RDF.type), str(RDFS.label)}
    predicates = {p for _, p, _ in triples} - builtins
    classes = {o[1:-1] for _, p, o in triples if p == str(RDF.type)}
    assert predicates - ours == set()
    assert classes - ours == set()


def test_full_record_exercises_every_optional_predicate():
    # Guards the test above: the full record must reach every predicate of the projection.
    predicates = {p.rsplit("#", 1)[-1] for _, p, _ in projected(FULL)}
    for name in ("trial", "observation", "failureCause", "category", "tool", "gitRevision", "host", "startedAtTime",
                 "wasGeneratedBy", "softwareConfig", "interventionSoftwareConfig", "configKey", "artifactHash",
                 "library", "setting", "coBinding", "coBindingResource", "restoration", "restoredDimension",
                 "restorationVerdict", "reason", "restoredLevel", "frontierShift", "shiftDimension", "levelBefore",
                 "levelAfter", "shiftUnit", "absoluteChange", "relativeChange", "belowRange", "nextBindingResource",
                 "nextCoBindingResource", "nextBindingNote", "nextRestoration", "deploymentDecision",
                 "minimumState"):
        assert name in predicates


def test_every_luma_term_used_in_the_ontology_files_is_declared():
    ours = declared(graph("luma.ttl")) | individuals(graph("luma.ttl"), OWL.NamedIndividual)
    used = set()
    for name in TTL_FILES:
        for s, p, o in graph(name):
            used |= {str(t) for t in (p, o) if isinstance(t, URIRef) and str(t).startswith(LUMA)}
            if (s, RDF.type, None) in graph(name) and name != "dimensions.ttl" and str(s).startswith(LUMA):
                used.add(str(s))
    assert used - ours == set()


def test_luma_properties_have_domain_range_label_and_comment():
    g = graph("luma.ttl")
    props = {s for k in (OWL.ObjectProperty, OWL.DatatypeProperty) for s in g.subjects(RDF.type, k) if str(s).startswith(LUMA)}
    assert len(props) > 35
    for prop in props:
        for needed in (RDFS.domain, RDFS.range, RDFS.label, RDFS.comment):
            assert (prop, needed, None) in g, f"{prop} lacks {needed}"


def test_luma_classes_have_label_and_comment():
    g = graph("luma.ttl")
    classes = [s for s in g.subjects(RDF.type, OWL.Class) if str(s).startswith(LUMA)]
    expected = {
        "ServiceContract", "ContractClause", "Workload", "Model", "Architecture", "ArchitectureKind",
        "ResourceDimension", "MachineState", "Level", "SoftwareConfig", "Trial", "Observation", "Verdict",
        "BoundaryQualification", "Intervention", "InterventionKind", "InterventionParameterRecord",
        "EvidenceClass", "SourceRecord", "RecurringBinding", "RecurringRemedy", "ArchitectureEvidence", "UnqualifiedChain", "CounterEvidence",
        "BindingGroup", "BindsBefore", "KvConcurrencyLimit", "KvConcurrencyPoint", "UnrecoveredBoundary", "TierRemedy",
        "OptimizeResult", "TriedConfiguration", "SearchTrial", "QualifiedOptimum", "StaleBoundary",
        "HardwareRequirement", "FrontierShift", "KernelResult", "Environment", "SprintTrial", "QualifiedBoundary",
        "MachineParameters", "MachineFigure", "InterventionFigure", "PartnerRetraction", "Runner", "RunnerRevocation",
        "CapabilityClass", "CapabilityMapping", "CapabilityCandidate",
        "ModelRun", "ModelPrediction", "ExperimentMatrix", "ModelAgreement",
        "Restoration", "DeploymentDecision",
        "PilotDecision", "PilotState", "PilotFigure",
    }
    assert {str(c).removeprefix(LUMA) for c in classes} == expected
    for cls in classes:
        assert (cls, RDFS.label, None) in g and (cls, RDFS.comment, None) in g, cls


def test_provenance_and_derived_classes():
    g = graph("luma.ttl")
    for cls in ("BoundaryQualification", "SourceRecord"):
        assert (L[cls], RDFS.subClassOf, PROV.Entity) in g
    for cls in ("RecurringBinding", "RecurringRemedy", "ArchitectureEvidence", "HardwareRequirement",
                "BindsBefore", "KvConcurrencyLimit", "KvConcurrencyPoint", "UnrecoveredBoundary", "TierRemedy"):
        comment = str(g.value(L[cls], RDFS.comment))
        assert "produced by rules, never asserted by hand" in comment.lower()
    # The frontier shift is a chain outcome the runner writes (issue 16), checked at ingest.
    assert "written by the runner" in str(g.value(L.FrontierShift, RDFS.comment))


def test_reused_vocabularies_are_declared_not_redefined():
    g = graph("luma.ttl")
    for term in (PROV.wasAttributedTo, PROV.generatedAtTime, PROV.wasGeneratedBy, PROV.startedAtTime, QUDT.numericValue, QUDT.unit):
        assert (term, RDF.type, None) in g
        assert (term, RDFS.domain, None) not in g and (term, RDFS.range, None) not in g
    assert (L.broader, RDF.type, OWL.ObjectProperty) in g
    assert (L.broader, RDFS.subPropertyOf, SKOS.broader) in g


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("EvidenceClass", set(EVIDENCE_CLASSES.values())),
        ("ArchitectureKind", {LUMA + v for v in projection_nodes.ARCH_KINDS.values()}),
        ("InterventionKind", {LUMA + v for v in projection_nodes.INTERVENTION_KINDS.values()}),
        # Trial verdicts, luma:NotTested (a restoration's) and UNKNOWN, which only the model predicts.
        ("Verdict", {LUMA + v for v in {**RESTORATION_VERDICTS, **projection_model.PREDICTED}.values()}),
    ],
)
def test_enumerations_match_the_projection(cls, expected):
    assert individuals(graph("luma.ttl"), L[cls]) == expected


def test_every_canonical_unit_is_a_labelled_qudt_unit():
    g = graph("luma.ttl")
    unit_individuals = individuals(g, QUDT.Unit)
    for iri in units.CANONICAL_UNITS.values():
        assert iri in unit_individuals, iri
        assert (URIRef(iri), RDFS.label, None) in g
    # Every LUMA unit declared is one the normaliser can produce.
    assert {u for u in unit_individuals if u.startswith(LUNIT)} <= set(units.CANONICAL_UNITS.values())


def test_only_dimensions_ttl_declares_resource_dimensions():
    # kb/records/dimensions.py reads every *.ttl file here and takes each such individual as a dimension.
    for name in ("luma.ttl", "shapes.ttl"):
        assert not individuals(graph(name), L.ResourceDimension), name
    assert set(all_dimensions()) == individuals(graph("dimensions.ttl"), L.ResourceDimension)
    assert "hbm_capacity" in record_dimensions()


def test_a_contracts_concurrency_is_projected_and_old_contracts_keep_their_iri():
    def contract_facts(doc):
        triples = projected(doc)
        iri = next(o for s, p, o in triples if p == LUMA + "contract")
        return iri, [(p, o) for s, p, o in triples if s == iri.strip("<>")]

    old_iri, old = contract_facts(EXAMPLE)
    assert LUMA + "concurrency" not in {p for p, _ in old}
    # The IRI of a contract without a concurrency is the one it had before the field existed.
    assert old_iri == "<" + ID + "contract/" + projection_nodes.text_hash(
        json.dumps(EXAMPLE["contract"], separators=(",", ":"))) + ">"
    iri, facts = contract_facts({**EXAMPLE, "contract": {**EXAMPLE["contract"], "concurrency": 16}})
    assert iri != old_iri and (LUMA + "concurrency", '"16"^^<http://www.w3.org/2001/XMLSchema#integer>') in facts
