"""The optimize-result record (issue 16 item 3): `luma sprint optimize`'s result as measured
evidence. A measured result is ingested only when its trials bear it out (every trial re-judged,
the best recomputed, the contract's concurrency kept); every refusal leaves the ledger and the KB
as they were. The projection is declared by the ontology and covered by the shapes."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from luma.errors import RecordError
from luma.kb.ingest import consistency
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.loader import validate_document
from luma.kb.records.schema import schema_text

from tests.kb.ingest.test_measured_gate import luma, ok, refused, state
from tests.kb.test_ontology import declared, graph
from tests.kb.ingest.test_shacl import _graph, fast_conforms, pyshacl_conforms

DATA = Path(__file__).parents[1] / "data"
RESULT = json.loads((DATA / "optimize_result.json").read_text())
ONTOLOGY = Path(__file__).resolve().parents[3] / "ontology"
LUMA = "https://w3id.org/luma/ns#"


def _triples(doc: dict):
    rec = validate_document(doc, "test")
    return project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 3, tzinfo=timezone.utc))).triples


def _edit(change) -> dict:
    doc = copy.deepcopy(RESULT)
    change(doc)
    return doc


def test_the_committed_schema_is_the_models():
    assert (ONTOLOGY / "optimize-result.schema.json").read_text() == schema_text("optimize-result")


def test_the_example_is_consistent_and_its_best_is_the_lower_of_two_passes():
    consistency.check_measured(validate_document(RESULT, "ok"))  # no error


def test_projection_is_declared_covered_by_shapes_and_conforms():
    from rdflib import RDF, Namespace

    triples = _triples(RESULT)
    ours = declared(graph("luma.ttl"))
    predicates = {p for _, p, _ in triples} - {str(RDF.type), "http://www.w3.org/2000/01/rdf-schema#label"}
    assert predicates - ours == set()
    assert {o[1:-1] for _, p, o in triples if p == str(RDF.type)} - ours == set()
    sh = Namespace("http://www.w3.org/ns/shacl#")
    shapes = _graph("shapes.ttl")
    assert {o[1:-1] for _, p, o in triples if p == str(RDF.type)} <= {str(c) for c in shapes.objects(None, sh.targetClass)}
    assert {p for _, p, _ in triples} - {str(RDF.type)} <= {str(p) for p in shapes.objects(None, sh.path)}
    assert pyshacl_conforms(triples) and fast_conforms(triples)
    best = [o for s, p, o in triples if p == LUMA + "softwareConfig" and s.split("/")[-2] == "optimum"]
    assert len(best) == 1 and any(p == LUMA + "throughput" and o.startswith('"2800') for _, p, o in triples)


def _no_best(d):
    d["best"] = None
    d["throughput"] = None


def _other_best(d):
    d["best"] = d["configurations"][1]["software"]


def _more_concurrency(d):
    d["configurations"][1]["concurrency"] = 8


def _higher_throughput(d):
    d["throughput"]["value"] = 3000.0


def _pass_that_fails(d):
    d["configurations"][0]["trials"][1]["observations"][1]["value"] = 0.5  # quality 0.5 under a 0.999 clause


def _one_trial(d):
    d["configurations"][0]["trials"].pop()


@pytest.mark.parametrize(("change", "field"), [
    (_no_best, "best"),                              # a configuration was accepted: there is a best
    (_other_best, "best"),                           # one FAILed trial: not accepted, never the best
    (_more_concurrency, "configurations[1].concurrency"),  # a search may not change the accepted service
    (_higher_throughput, "throughput.value"),        # the best counts with the lower of its trials
    (_pass_that_fails, "configurations[0].trials[1]"),  # each trial re-judged from its observations
    (_one_trial, "best"),                            # one PASS is not accepted: two are needed
])
def test_a_measured_result_its_trials_do_not_bear_out_is_refused(change, field):
    with pytest.raises(RecordError) as err:
        consistency.check_measured(validate_document(_edit(change), "bad"))
    assert (err.value.field or "").startswith(field), err.value


def test_a_throughput_in_a_unit_that_is_no_rate_is_invalid():
    with pytest.raises(RecordError, match="throughput"):
        validate_document(_edit(lambda d: d["throughput"].update(unit="MiB")), "bad")


def test_ingest_through_the_cli_and_bad_input_changes_nothing(luma_home, signed, tmp_path):
    good = signed(RESULT, "optimum.json")
    ok(luma("kb", "ingest", good))
    before = state(luma_home)
    bad = signed(_edit(_other_best), "bad.json")
    refused(luma("kb", "ingest", bad), "bad.json", "best")
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps(RESULT | {"sprint": "another"}))
    refused(luma("kb", "ingest", unsigned), "attestation")
    assert state(luma_home) == before
    rows = json.loads(ok(luma("kb", "query", "--format", "json",
                              f"PREFIX luma: <{LUMA}> SELECT ?v ?t WHERE {{ ?o a luma:OptimizeResult ; "
                              "luma:softwareConfig ?c ; luma:throughput ?t . ?c luma:softwareVariant ?v }")).stdout)
    row = rows["results"]["bindings"]
    assert [(r["v"]["value"], float(r["t"]["value"])) for r in row] == [("fp32", 2800.0)]
