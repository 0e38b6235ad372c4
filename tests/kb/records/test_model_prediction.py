"""model-prediction and experiment-matrix records (issue 16 item 5): valid records validate,
project onto the same contract and state entities as PEX records, conform to the shapes with
every term declared; malformed ones are refused naming the field, and a file holding one leaves
the ledger and the KB as they were. Neither kind needs a runner's signature; neither may claim
`measured` or `vendor-claim`."""

from __future__ import annotations

import copy
import importlib.resources
import json
from datetime import datetime, timezone
from pathlib import Path

import pyshacl
import pytest
from rdflib import Graph

from luma.errors import RecordError
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.loader import validate_document
from luma.kb.records.schema import SCHEMAS
from luma.kb.ingest.shacl import default_checker
from luma.kb.vocab import ID, LUMA

from tests.kb.projects import luma, snapshot

DATA = Path(__file__).parents[1] / "data"
ONTOLOGY = importlib.resources.files("luma.ontology")
PREDICTION = json.loads((DATA / "model_prediction.json").read_text())
MATRIX = json.loads((DATA / "experiment_matrix.json").read_text())
TRIAL_STATE = {"dimensions": {"compute": {"value": 1, "unit": "core"}, "host_memory": {"value": 4096, "unit": "KiB"}}}


def full_prediction() -> dict:
    """Every optional part: workload, intervention, calibration, space, settings, figures."""
    doc = copy.deepcopy(PREDICTION)
    doc["workload"] = {"name": "matvec", "model": "dense-4096x256", "task": "dense layer"}
    doc["model"].update(calibration="a" * 64, calibrated=True, space="matvec-host")
    doc["intervention"] = "acme/kvz@1.0"
    doc["predictions"][0]["configuration"] = {"variant": "fp32", "intervention": "applied", "concurrency": "4"}
    doc["predictions"][0]["baseline"] = False
    return doc


def projected(doc: dict) -> list[tuple[str, str, str]]:
    rec = validate_document(doc, "test")
    return project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 3, tzinfo=timezone.utc))).triples


def test_the_examples_validate_and_keep_their_evidence_class():
    assert validate_document(PREDICTION, "p").evidence_class == "simulated"
    assert validate_document(MATRIX, "m").evidence_class == "projected"


@pytest.mark.parametrize("doc", [PREDICTION, full_prediction(), MATRIX], ids=["prediction", "full", "matrix"])
def test_projection_conforms_to_the_shapes_under_both_checkers(doc):
    triples = projected(doc)
    default_checker().check(triples, "test")  # raises on a violation
    data = Graph().parse(data="".join(f"<{s}> <{p}> {o} .\n" for s, p, o in triples), format="nt")
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    assert pyshacl.validate(data, shacl_graph=shapes, inference="none")[0]


@pytest.mark.parametrize("doc", [full_prediction(), MATRIX], ids=["prediction", "matrix"])
def test_every_term_is_declared_and_shaped(doc):
    from rdflib import OWL, RDF, RDFS, URIRef

    g = Graph().parse(data=(ONTOLOGY / "luma.ttl").read_text(), format="turtle")
    declared = {str(s) for k in (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty) for s in g.subjects(RDF.type, k)}
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    sh = "http://www.w3.org/ns/shacl#"
    paths = {str(o) for o in shapes.objects(None, URIRef(sh + "path"))}
    triples = projected(doc)
    predicates = {p for _, p, _ in triples} - {str(RDF.type), str(RDFS.label)}
    luma_terms = {p for p in predicates if p.startswith(LUMA)}
    assert luma_terms - declared == set()
    assert {o[1:-1] for _, p, o in triples if p == str(RDF.type) and o[1:-1].startswith(LUMA)} - declared == set()
    assert predicates - paths - {str(RDFS.label)} == set()


def test_a_prediction_names_the_state_entity_a_trial_at_the_same_levels_names():
    # 4 MiB in the prediction, 4096 KiB in a trial: one level, one state, one contract entity.
    from luma.kb.ingest.projection_nodes import contract_node, state_node
    from luma.kb.ingest import nquads as nq
    from luma.kb.records.dimensions import record_dimensions
    from luma.kb.records.pex_chain import Contract, MachineState

    triples = projected(PREDICTION)
    w = nq.QuadWriter("urn:g", "urn:e", nq.Batch())
    state, _ = state_node(w, MachineState.model_validate(TRIAL_STATE, context={"dimensions": record_dimensions()}),
                          record_dimensions())
    contract = contract_node(w, Contract.model_validate(PREDICTION["contract"]))
    assert any(s.startswith(ID + "model-run/") and p == LUMA + "predictedState" and o == f"<{state}>"
               for s, p, o in triples)
    assert any(p == LUMA + "contract" and o == f"<{contract}>" for _, p, o in triples)


def test_the_committed_json_schemas_are_the_generated_ones():
    for kind in ("model-prediction", "experiment-matrix"):
        committed = json.loads((ONTOLOGY / f"{kind}.schema.json").read_text())
        assert committed == json.loads(json.dumps(SCHEMAS[kind]())), kind


def _broken(path: str, value):
    doc = copy.deepcopy(PREDICTION)
    *head, last = path.split(".")
    node = doc
    for key in head:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is _DROP:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return doc


_DROP = object()


@pytest.mark.parametrize(("path", "value", "field"), [
    ("evidence_class", "measured", "evidence_class"),
    ("evidence_class", "vendor-claim", "evidence_class"),
    ("predictions", [], "predictions"),
    ("predictions.0.binding_resource", _DROP, "predictions[0].binding_resource"),
    ("predictions.0.verdict", "MAYBE", "predictions[0].verdict"),
    ("predictions.0.state.dimensions.warp_drive", {"value": 1, "unit": "core"}, "predictions[0].state.dimensions"),
    ("predictions.0.state.dimensions.host_memory", {"value": 4, "unit": "ms"}, "predictions[0].state.dimensions"),
    ("predictions.0.clauses.0.unit", "parsecs", "predictions[0].clauses[0].unit"),
    ("predictions.0.figures.3.unit", "s", "predictions[0].figures[3].unit"),
    ("model.code", "not-a-hash", "model.code"),
    ("predictions.0.configuration", {"Bad Key": "x"}, "predictions[0].configuration"),
    ("contract.clauses", [], "contract.clauses"),
])
def test_malformed_predictions_are_refused_naming_the_field(path, value, field):
    with pytest.raises(RecordError) as exc:
        validate_document(_broken(path, value), "bad.json")
    assert exc.value.field is not None and exc.value.field.startswith(field), (exc.value.field, exc.value.message)


def test_a_pass_names_no_binding_resource():
    doc = _broken("predictions.0.verdict", "PASS")
    with pytest.raises(RecordError, match="only a predicted FAIL"):
        validate_document(doc, "bad.json")


def test_a_matrix_without_states_or_hash_is_refused():
    for key, value, field in (("sha256", "xyz", "sha256"), ("repetitions", 0, "repetitions"),
                              ("configurations", [], "configurations"), ("evidence_class", "measured", "evidence_class")):
        doc = {**copy.deepcopy(MATRIX), key: value}
        with pytest.raises(RecordError) as exc:
            validate_document(doc, "m.json")
        assert exc.value.field.startswith(field)


def test_unsigned_predictions_are_ingested_and_a_bad_one_leaves_everything_unchanged(luma_home, tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.jsonl"
    good.write_text(json.dumps(PREDICTION))
    assert luma("kb", "ingest", good).exit_code == 0  # no runner key, no signature: simulated needs none
    before = snapshot()
    broken = _broken("predictions.0.verdict", "MAYBE")
    bad.write_text(json.dumps(MATRIX) + "\n" + json.dumps(broken) + "\n")
    result = luma("kb", "ingest", bad)
    assert result.exit_code == 1 and "line 2" in result.stderr and "predictions[0].verdict" in result.stderr
    assert snapshot() == before
    rows = json.loads(luma("kb", "query", "--name", "evidence-by-class", "--format", "json").stdout)
    kinds = {(b["evidenceClass"]["value"], b["kind"]["value"]) for b in rows["results"]["bindings"]}
    assert kinds == {("Simulated", "model-prediction")}


def test_a_state_with_an_intervention_is_not_the_baseline():
    doc = _broken("predictions.0.configuration", {"intervention": "applied"})
    with pytest.raises(RecordError) as exc:
        validate_document(doc, "bad.json")
    assert exc.value.field == "predictions[0].baseline"
