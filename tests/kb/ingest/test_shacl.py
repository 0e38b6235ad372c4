"""ontology/shapes.ttl and kb/ingest/shacl.py: the fast checker gives pySHACL's verdict on record graphs."""

from __future__ import annotations

import importlib.resources
import json
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox
import pyshacl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import RDF, Graph, Namespace, URIRef

from luma.errors import ConfigError, RecordError
from luma.kb.ingest import projection_nodes
from luma.kb.records import units
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.ingest.projection_outcomes import RESTORATION_VERDICTS
from luma.kb.records.loader import validate_document
from luma.kb.ingest.shacl import ShapeChecker, default_checker
from luma.kb.vocab import EVIDENCE_CLASSES, LUMA, PROV, QUDT, RDFS, XSD

ONTOLOGY = importlib.resources.files("luma.ontology")
SH = Namespace("http://www.w3.org/ns/shacl#")
TYPE = str(RDF.type)
DOUBLE, INTEGER, BOOLEAN, DATETIME = (f"^^<{XSD}{t}>" for t in ("double", "integer", "boolean", "dateTime"))

EXAMPLE = json.loads((Path(__file__).parents[1] / "data" / "valid_chain.json").read_text())

#: Every optional part: trials (observations, failure cause), provenance, a categorical level.
FULL = json.loads((Path(__file__).parents[1] / "data" / "full_chain.json").read_text())

#: A kernel-result record (luma.kb.records.kernel_result).
KERNEL = json.loads((Path(__file__).parents[1] / "data" / "kernel_result.json").read_text())

Triples = list[tuple[str, str, str]]


@lru_cache(maxsize=None)
def _projected(name: str) -> tuple[tuple[str, str, str], ...]:
    rec = validate_document({"example": EXAMPLE, "full": FULL, "kernel": KERNEL}[name], name)
    w = project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 2, tzinfo=timezone.utc)))
    return tuple(w.triples)


def projected(name: str) -> Triples:
    return list(_projected(name))


# --- the two checkers ---------------------------------------------------------------------


@lru_cache(maxsize=None)
def _graph(*names: str) -> Graph:
    g = Graph()
    for name in names:
        g.parse(data=(ONTOLOGY / name).read_text(), format="turtle")
    return g


def pyshacl_conforms(triples: Triples, ontology: bool = False) -> bool:
    data = Graph().parse(data="".join(f"<{s}> <{p}> {o} .\n" for s, p, o in triples), format="nt")
    ont = _graph("luma.ttl", "dimensions.ttl") if ontology else None
    conforms, _, _ = pyshacl.validate(data, shacl_graph=_graph("shapes.ttl"), ont_graph=ont, inference="none")
    return conforms


def fast_conforms(triples: Triples) -> bool:
    checker = default_checker()
    try:
        checker.check(triples, "test")
    except RecordError as exc:
        # The generated fast path and the reference evaluator must agree.
        assert exc.field in {field for field, _ in checker.violations(triples)}
        return False
    assert checker.violations(triples) == []
    return True


# --- the shapes file ----------------------------------------------------------------------


def test_shapes_parse_with_rdflib_and_pyoxigraph():
    data = (ONTOLOGY / "shapes.ttl").read_bytes()
    assert len(Graph().parse(data=data, format="turtle")) > 100
    assert len(list(ox.parse(data, ox.RdfFormat.TURTLE))) > 100


def test_every_property_shape_names_its_field():
    g = _graph("shapes.ttl")
    shapes = list(g.objects(None, SH.property))
    assert len(shapes) > 40
    for shape in shapes:
        assert (shape, SH.name, None) in g, shape


@pytest.mark.parametrize("name", ["example", "full", "kernel"])
def test_shapes_cover_every_type_and_predicate_of_a_record(name):
    g = _graph("shapes.ttl")
    targets = {str(c) for c in g.objects(None, SH.targetClass)}
    paths = {str(p) for p in g.objects(None, SH.path)}
    triples = projected(name)
    assert {o[1:-1] for _, p, o in triples if p == TYPE} <= targets
    assert {p for _, p, _ in triples} - {TYPE} <= paths


#: Node shapes of the model's records, whose evidence class is only simulated or projected.
MODEL_SHAPES = {"ModelRunShape", "ModelPredictionShape", "ExperimentMatrixShape"}


def _in_lists(path: str, model: bool = False) -> list[set[str]]:
    g = _graph("shapes.ttl")
    out = []
    for shape in g.subjects(SH.path, URIRef(path)):
        owner = next(g.subjects(SH.property, shape), None)
        if (str(owner).rsplit("#", 1)[-1] in MODEL_SHAPES) != model:
            continue
        head = g.value(shape, SH["in"])
        if head is not None:
            out.append({str(m) for m in g.items(head)})
    return out


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (QUDT + "unit", set(units.CANONICAL_UNITS.values())),
        (LUMA + "evidenceClass", set(EVIDENCE_CLASSES.values())),
        (LUMA + "architectureKind", {LUMA + v for v in projection_nodes.ARCH_KINDS.values()}),
        (LUMA + "interventionKind", {LUMA + v for v in projection_nodes.INTERVENTION_KINDS.values()}),
        (LUMA + "verdict", {LUMA + v for v in projection_nodes.VERDICTS.values()}),
        (LUMA + "restorationVerdict", {LUMA + v for v in RESTORATION_VERDICTS.values()}),
    ],
)
def test_enumerations_in_shapes_match_the_projection(path, expected):
    lists = _in_lists(path)
    assert lists and all(found == expected for found in lists)


def test_model_records_shapes_admit_only_the_model_classes():
    from typing import get_args

    from luma.kb.records.model_prediction import ModelEvidence

    lists = _in_lists(LUMA + "evidenceClass", model=True)
    assert len(lists) == len(MODEL_SHAPES)
    assert all(found == {EVIDENCE_CLASSES[c] for c in get_args(ModelEvidence)} for found in lists)


def test_classes_named_by_shapes_have_no_subclasses():
    # ShapeChecker matches types exactly; pySHACL would also accept subclass instances.
    shapes, ontology = _graph("shapes.ttl"), _graph("luma.ttl")
    named = set(shapes.objects(None, SH.targetClass)) | set(shapes.objects(None, SH["class"]))
    for cls in named:
        assert not list(ontology.subjects(URIRef(str(RDFS) + "subClassOf"), cls)), cls


# --- conforming records -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["example", "full", "kernel"])
@pytest.mark.parametrize("ontology", [False, True], ids=["alone", "with-ontology"])
def test_projected_records_conform_under_both_checkers(name, ontology):
    triples = projected(name)
    assert pyshacl_conforms(triples, ontology)
    assert fast_conforms(triples)


def test_duplicate_triples_are_one_value():
    triples = projected("example")
    copies = [(s, p, "".join(list(o))) for s, p, o in triples]  # equal strings, other objects
    assert fast_conforms(triples + triples + copies)


# --- broken records -----------------------------------------------------------------------


def _subject(triples: Triples, p: str, n: int = 0) -> str:
    return [s for s, pp, _ in triples if pp == p][n]


def _object(triples: Triples, p: str, n: int = 0) -> str:
    return [o for _, pp, o in triples if pp == p][n]


def drop(p: str, n: int | None = None):
    def edit(t: Triples) -> Triples:
        hits = [i for i, (_, pp, _) in enumerate(t) if pp == p]
        gone = set(hits) if n is None else {hits[n]}
        return [x for i, x in enumerate(t) if i not in gone]

    return edit


def set_object(p: str, value: str, n: int = 0):
    def edit(t: Triples) -> Triples:
        i = [i for i, (_, pp, _) in enumerate(t) if pp == p][n]
        return t[:i] + [(t[i][0], p, value)] + t[i + 1 :]

    return edit


def add_value(p: str, value: str, n: int = 0):
    return lambda t: t + [(_subject(t, p, n), p, value)]


def untype(cls: str):
    return lambda t: [x for x in t if not (x[1] == TYPE and x[2] == f"<{cls}>")]


def level_value(value: str):
    """Replace the first numeric level value (levels are the objects of luma:level)."""

    def edit(t: Triples) -> Triples:
        levels = {o[1:-1] for _, p, o in t if p == LUMA + "level"}
        i = next(i for i, (s, p, _) in enumerate(t) if s in levels and p == QUDT + "numericValue")
        return t[:i] + [(t[i][0], t[i][1], value)] + t[i + 1 :]

    return edit


def drop_from_first(link: str, p: str):
    """Remove `p` from the first node that is an object of `link` (a clause, level, observation)."""

    def edit(t: Triples) -> Triples:
        node = _object(t, link)[1:-1]
        return [x for x in t if not (x[0] == node and x[1] == p)]

    return edit


def second_dimension(t: Triples) -> Triples:
    level = _object(t, LUMA + "level")[1:-1]
    return t + [(level, LUMA + "dimension", "<https://w3id.org/luma/dim/power>")]


def wrong_class(t: Triples) -> Triples:
    model = _object(t, LUMA + "model")
    return set_object(LUMA + "workload", model)(t)


L = LUMA
BROKEN = {
    # record node
    "missing record kind": ("example", drop(L + "recordKind")),
    "unknown record kind": ("example", set_object(L + "recordKind", '"pex"')),
    "two record kinds": ("example", add_value(L + "recordKind", '"other"')),
    "bad content hash": ("example", set_object(L + "contentHash", '"XYZ"')),
    "unknown evidence class": ("example", set_object(L + "evidenceClass", f"<{L}Rumour>")),
    "evidence class as text": ("example", set_object(L + "evidenceClass", '"measured"', 1)),
    "ill-formed ingestion time": ("example", set_object(PROV + "generatedAtTime", f'"2026-13-02T00:00:00"{DATETIME}')),
    "ingestion time as text": ("example", set_object(PROV + "generatedAtTime", '"2026-12-02T00:00:00+00:00"')),
    "submitter as text": ("example", set_object(PROV + "wasAttributedTo", '"alice"')),
    # chain
    "missing repetitions": ("example", drop(L + "repetitions")),
    "repetitions as text": ("example", set_object(L + "repetitions", '"3"')),
    "zero repetitions": ("example", set_object(L + "repetitions", f'"0"{INTEGER}')),
    "recovered ill-typed": ("example", set_object(L + "recovered", f'"yes"{BOOLEAN}')),
    "workload of the wrong class": ("example", wrong_class),
    "untyped workload": ("example", untype(L + "Workload")),
    "two workloads": ("example", add_value(L + "workload", f"<{L}x>")),
    "workload a blank node": ("example", set_object(L + "workload", "_:b0")),
    "crossed dimension as text": ("example", set_object(L + "crossedDimension", '"host_memory"')),
    "no binding resource": ("example", drop(L + "bindingResource")),
    "untyped fail state": ("example", lambda t: untype(L + "MachineState")(t)),
    # what is served, on what
    # labels: [0] is the submitter agent's, [1] the workload's
    "blank workload name": ("example", set_object(str(RDFS) + "label", '"   "', 1)),
    "language-tagged task": ("example", set_object(L + "task", '"embedding"@en')),
    "model without label": ("example", lambda t: [x for x in t if not (x[0] == _object(t, L + "model")[1:-1] and x[1] == str(RDFS) + "label")]),
    "unknown architecture kind": ("example", set_object(L + "architectureKind", f"<{L}Quantum>")),
    "vendor missing": ("example", drop(L + "vendor")),
    "intervention kind as text": ("example", set_object(L + "interventionKind", '"software"')),
    # contract
    "contract without clauses": ("example", drop(L + "clause")),
    "clause is a literal": ("example", set_object(L + "clause", '"clause"')),
    "unknown operator": ("example", set_object(L + "operator", '"=="')),
    "metric with a space": ("example", set_object(L + "metric", '"99th latency"')),
    "clause value not a double": ("example", set_object(QUDT + "numericValue", f'"200"{INTEGER}')),
    "clause value ill-formed": ("example", set_object(QUDT + "numericValue", f'"abc"{DOUBLE}')),
    "unit outside the canonical set": ("example", set_object(QUDT + "unit", "<http://qudt.org/vocab/unit/GigaBYTE>")),
    # states and levels
    "state without levels": ("example", drop(L + "level")),
    "negative level": ("example", level_value(f'"-1.0"{DOUBLE}')),
    "NaN level": ("example", level_value(f'"NaN"{DOUBLE}')),
    "two dimensions on one level": ("example", second_dimension),
    "level without dimension": ("example", drop_from_first(L + "level", L + "dimension")),
    "level is a blank node": ("example", set_object(L + "level", "_:level")),
    "two categories": ("full", add_value(L + "category", '"A100"')),
    "blank category": ("full", set_object(L + "category", '""')),
    # trials, observations, provenance
    "trial without verdict": ("full", drop(L + "verdict", 1)),
    "unknown verdict": ("full", set_object(L + "verdict", f"<{L}Maybe>")),
    "repetition index zero": ("full", set_object(L + "repetitionIndex", f'"0"{INTEGER}')),
    "unknown trial state": ("full", set_object(L + "trialState", '"done"')),
    "untyped trial": ("full", untype(L + "Trial")),
    "observation without unit": ("full", drop_from_first(L + "observation", QUDT + "unit")),
    "observation without value": ("full", drop_from_first(L + "observation", QUDT + "numericValue")),
    "clause without operator": ("example", drop_from_first(L + "clause", L + "operator")),
    "activity without tool": ("full", drop(L + "tool")),
    "two hosts": ("full", add_value(L + "host", '"node-8"')),
    "start time as text": ("full", set_object(PROV + "startedAtTime", '"yesterday"')),
    "untyped activity": ("full", untype(PROV + "Activity")),
}


@pytest.mark.filterwarnings("ignore:Parsing weird boolean")
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_records_are_rejected_by_both_checkers(case):
    base, edit = BROKEN[case]
    triples = edit(projected(base))
    assert triples != projected(base)
    assert fast_conforms(triples) is False
    assert pyshacl_conforms(triples, ontology=True) is False


def test_xsd_lexical_rules_are_stricter_than_rdflib():
    # rdflib reads xsd:double with Python's float() and so accepts "inf"; XSD (and Oxigraph)
    # do not. ShapeChecker follows XSD -- the one place where it is stricter than pySHACL.
    triples = level_value(f'"inf"{DOUBLE}')(projected("example"))
    assert fast_conforms(triples) is False
    assert pyshacl_conforms(triples) is True


def test_error_names_source_field_focus_and_constraint():
    triples = level_value(f'"-1.0"{DOUBLE}')(projected("example"))
    with pytest.raises(RecordError) as info:
        default_checker().check(triples, "runs/a.json: record 3")
    err = info.value
    assert err.source == "runs/a.json: record 3"
    assert err.field == "dimensions.value"
    assert "/level/" in err.message and "sh:minInclusive" in err.message and '"-1.0"' in err.message
    assert str(err).startswith("runs/a.json: record 3: dimensions.value: shape lsh:LevelShape: ")


def test_missing_value_error():
    with pytest.raises(RecordError) as info:
        default_checker().check(drop(L + "repetitions")(projected("example")), "x")
    assert info.value.field == "repetitions"
    assert "luma:repetitions" in info.value.message and "sh:minCount" in info.value.message


# --- random edits: both checkers give the same verdict --------------------------------------

EXTRA_OBJECTS = [
    f'"-1.0"{DOUBLE}', f'"NaN"{DOUBLE}', f'"abc"{DOUBLE}', f'"0.0"{DOUBLE}', f'"1.5"{INTEGER}', f'"0"{INTEGER}',
    f'"7"{INTEGER}', f'"yes"{BOOLEAN}', f'"false"{BOOLEAN}', f'"2025-01-01T00:00:00"{DATETIME}', '"  "', '""',
    '"x"@en', '"pex"', '"=="', '"fail"', '"a\\"b"', "_:b1", "<https://example.org/x>",
    *(f"<{LUMA}{c}>" for c in ("Workload", "Model", "Trial", "MachineState", "ServiceContract", "Intervention", "Maybe")),
    f"<{PROV}Activity>",
]


@st.composite
def edited_records(draw) -> Triples:
    triples = projected(draw(st.sampled_from(["example", "full", "kernel"])))
    subjects = sorted({s for s, _, _ in triples})
    predicates = sorted({p for _, p, _ in triples})
    objects = sorted({o for _, _, o in triples}) + EXTRA_OBJECTS
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "duplicate", "object", "predicate", "subject", "add"]))
        if op == "add" or not triples:
            triples.append((draw(st.sampled_from(subjects)), draw(st.sampled_from(predicates)), draw(st.sampled_from(objects))))
            continue
        i = draw(st.integers(0, len(triples) - 1))
        s, p, o = triples[i]
        if op == "delete":
            del triples[i]
        elif op == "duplicate":
            triples.append((s, p, "".join(list(o))))
        elif op == "object":
            triples[i] = (s, p, draw(st.sampled_from(objects)))
        elif op == "predicate":
            triples[i] = (s, draw(st.sampled_from(predicates)), o)
        else:
            triples[i] = (draw(st.sampled_from(subjects)), p, o)
    return triples


@settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_records())
def test_random_edits_get_the_same_verdict_from_both_checkers(triples):
    assert fast_conforms(triples) == pyshacl_conforms(triples)


# --- loading shapes -----------------------------------------------------------------------


def test_default_checker_is_compiled_once():
    assert default_checker() is default_checker()
    # 18 for PEX chains and their parts (software configurations and 3 for chain outcomes
    # included), 2 kernel results, 1 trials, 2 machines, 3 partner records,
    # 3 runner keys (runner, revocation, revoked runner), 6 model outputs (run, prediction, its
    # clauses and figures, matrix, matrix states), 3 optimize results (result, configuration, trial),
    # 3 pilot decisions (decision, state, figure)
    assert len(default_checker().shapes) == 41


def test_extra_shapes_add_constraints(tmp_path):
    extra = tmp_path / "extra.ttl"
    extra.write_text(
        "@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix luma: <https://w3id.org/luma/ns#> .\n"
        "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Workload ;\n"
        '  sh:property [ sh:path luma:task ; sh:name "workload.task" ; sh:in ( "chat" ) ] .\n'
    )
    checker = ShapeChecker.load(extra_files=[extra])
    checker.check(projected("full"), "x")
    with pytest.raises(RecordError) as info:
        checker.check(projected("example"), "x")
    assert info.value.field == "workload.task"


_PREFIXES = (
    "@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix luma: <https://w3id.org/luma/ns#> .\n"
    "@prefix xsd: <http://www.w3.org/2001/XMLSchema#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
)
UNSUPPORTED = {
    "sh:or": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:or ( [ sh:path luma:a ] ) .",
    "sh:node": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:node <urn:x:T> ] .",
    "sh:targetNode": "<urn:x:S> a sh:NodeShape ; sh:targetNode luma:x ; sh:property [ sh:path luma:a ; sh:minCount 1 ] .",
    "sh:targetSubjectsOf": "<urn:x:S> a sh:NodeShape ; sh:targetSubjectsOf luma:a ; sh:property [ sh:path luma:a ; sh:minCount 1 ] .",
    "sh:closed": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:closed true .",
    "node-level constraint": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:nodeKind sh:IRI .",
    "sh:severity": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:minCount 1 ; sh:severity sh:Warning ] .",
    "sh:flags": '<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:pattern "x" ; sh:flags "i" ] .',
    "sh:maxLength": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:maxLength 3 ] .",
    "sh:hasValue": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:hasValue 3 ] .",
    "sequence path": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path ( luma:a luma:b ) ; sh:minCount 1 ] .",
    "inverse path": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path [ sh:inversePath luma:a ] ; sh:minCount 1 ] .",
    "unchecked datatype": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:datatype xsd:float ] .",
    "typed literal in sh:in": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:in ( 1 2 ) ] .",
    "repeated parameter": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:property [ sh:path luma:a ; sh:class luma:A, luma:B ] .",
    "shape without target": "<urn:x:S> a sh:NodeShape ; sh:property [ sh:path luma:a ; sh:minCount 1 ] .",
    "implicit class target": "<urn:x:S> a sh:NodeShape, rdfs:Class ; sh:property [ sh:path luma:a ; sh:minCount 1 ] .",
    "free property shape": "<urn:x:P> a sh:PropertyShape ; sh:path luma:a ; sh:minCount 1 .",
    "deactivated": "<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:deactivated true ; sh:property [ sh:path luma:a ; sh:minCount 1 ] .",
    "sparql": '<urn:x:S> a sh:NodeShape ; sh:targetClass luma:Trial ; sh:sparql [ sh:select "SELECT $this {}" ] .',
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_shacl_makes_load_fail(tmp_path, case):
    extra = tmp_path / "extra.ttl"
    extra.write_text(_PREFIXES + UNSUPPORTED[case] + "\n")
    with pytest.raises(ConfigError) as info:
        ShapeChecker.load(extra_files=[extra])
    assert info.value.source == str(extra)


def test_shapes_that_do_not_parse_make_load_fail(tmp_path):
    extra = tmp_path / "extra.ttl"
    extra.write_text("this is not turtle")
    with pytest.raises(ConfigError):
        ShapeChecker.load(extra_files=[extra])
