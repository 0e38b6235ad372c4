"""Intervention-parameters records: the examples, units per field, malformed records refused
naming the field (hypothesis feeds many), formats, projection into the partner graph, shapes."""

from __future__ import annotations

import copy
import importlib.resources
import json
import math
import tempfile
import tomllib
from datetime import date, datetime, timezone
from pathlib import Path

import jsonschema
import pyshacl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import OWL, RDF, RDFS, Graph, Namespace

from luma.errors import RecordError
from luma.kb.records.input_files import PARTNER_FILE
from luma.kb.trust.partners import DEFAULT_MAX_PARTNER_FILE_BYTES, read_partner_files
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.intervention_params import DATA_CLASSES, intervention_parameters_schema
from luma.kb.records.loader import validate_document
from luma.kb.store.partner_graphs import partner_graph
from luma.kb.ingest.shacl import default_checker
from luma.kb.vocab import ENTITY_GRAPH, LUMA
from luma.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = {name: ROOT / "kb" / "examples" / f"partner-{name}.toml" for name in ("kv-compression", "cxl-expander")}
ONTOLOGY = importlib.resources.files("luma.ontology")
SH = Namespace("http://www.w3.org/ns/shacl#")
#: A small valid record; the malformed cases below each break one thing of it.
BASE = {
    "record_type": "intervention-parameters", "partner": "acme", "name": "kvz", "version": "1.0",
    "integration_point": "runtime", "data_classes": ["kv-cache", "weights"],
    "effects": [{"data_class": "kv-cache", "compression_ratio": {"value": 2, "unit": "1"},
                 "bandwidth_effect": {"value": 1.5, "unit": "1"}}],
    "encode_throughput": {"value": 100, "unit": "GB/s"}, "added_latency": {"value": 10, "unit": "us"},
    "power": {"value": 5, "unit": "W"}, "silicon_area": {"value": 3, "unit": "mm^2"},
    "buffering": {"value": 1, "unit": "MiB"}, "metadata_overhead": {"value": 2, "unit": "percent"},
}


def toml_text(doc: dict) -> str:
    """A tiny TOML writer for test records (inline tables; NaN and infinities as TOML spells them)."""

    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items() if x is not None) + " }"

    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in doc.items() if v is not None)


def write(folder: Path, doc, fmt: str, name: str = "rec") -> Path:
    path = folder / f"{name}.{fmt}"
    if fmt == "toml":
        path.write_text(toml_text(doc))
    elif fmt == "yaml":
        path.write_text(yaml.safe_dump(doc))
    else:
        path.write_text(json.dumps(doc))  # NaN as JSON's NaN (Python's json reads it)
    return path


def error(doc: dict) -> RecordError:
    with pytest.raises(RecordError) as info:
        validate_document(doc, "p.json")
    return info.value


def with_(path: str, value, doc: dict | None = None) -> dict:
    """A copy of BASE with one field (dotted path, [i] for list items) set, or removed (value=...)."""
    doc = copy.deepcopy(doc or BASE)
    *parents, last = path.replace("[", ".").replace("]", "").split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    key = int(last) if last.isdigit() else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return doc


# --- valid records ------------------------------------------------------------------------


def test_the_examples_load_with_si_figures():
    kv, cxl = (read_partner_files([path])[0].model for path in EXAMPLES.values())
    assert (kv.partner, kv.evidence_class, kv.kind) == ("kvzip-labs", "vendor-claim", "partner")
    figures = {(r["kind"], r["data_class"]): r["si"] for r in kv.figures()}
    assert figures[("compression_ratio", "kv-cache")] == 2
    assert figures[("encode_throughput", None)] == pytest.approx(400e9)
    assert figures[("added_latency", None)] == pytest.approx(35e-6)
    assert figures[("buffering", None)] == 64 * 2**20
    assert figures[("metadata_overhead", None)] == pytest.approx(0.015)
    figures = {(r["kind"], r["data_class"]): r for r in cxl.figures()}
    assert figures[("silicon_area", None)]["si"] == pytest.approx(12.5e-6)
    assert figures[("silicon_area", None)]["si_unit"] == "meter ** 2"
    assert figures[("compression_ratio", "embeddings")]["si"] == pytest.approx(1.5)  # 150 percent
    assert cxl.partner == "memfabric" and cxl.coherence.software_transparent


@pytest.mark.parametrize("fmt", ["toml", "yaml", "json"])
def test_toml_yaml_and_json_give_the_same_record(tmp_path, fmt):
    loaded = read_partner_files([write(tmp_path, BASE, fmt)])
    assert len(loaded) == 1
    assert loaded[0].content_hash == validate_document(BASE, "x").content_hash


def test_a_toml_file_may_hold_several_records(tmp_path):
    other = {**BASE, "name": "kvz2"}
    path = tmp_path / "two.toml"
    path.write_text("".join(f"[[records]]\n{toml_text(d)}\n" for d in (BASE, other)))
    assert [r.model.name for r in read_partner_files([path])] == ["kvz", "kvz2"]


def test_evidence_class_defaults_to_vendor_claim_and_measured_needs_its_provenance():
    assert validate_document(BASE, "x").evidence_class == "vendor-claim"
    exc = error({**BASE, "evidence_class": "measured", "provenance": {"tool": "t"}})
    assert exc.field == "provenance" and "measurement" in exc.message
    ok = {**BASE, "evidence_class": "measured",
          "provenance": {"tool": "t", "host": "lab-1", "started": "2026-11-30T10:00:00Z"}}
    assert validate_document(ok, "x").evidence_class == "measured"


def test_zero_is_a_valid_added_latency_power_area_and_overhead():
    doc = dict(BASE, added_latency={"value": 0, "unit": "ns"}, power={"value": 0, "unit": "W"},
               silicon_area={"value": 0, "unit": "mm^2"}, memory_management_overhead={"value": 0, "unit": "1"})
    assert validate_document(doc, "x")


# --- malformed records --------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "field", "message"), [
    (with_("effects[0].compression_ratio.unit", ...), "effects[0].compression_ratio.unit", "Field required"),
    (with_("power.unit", ...), "power.unit", "Field required"),
    (with_("added_latency.unit", "GB"), "added_latency", "'GB' is not a latency"),
    (with_("encode_throughput.unit", "GB"), "encode_throughput", "is not a throughput"),
    (with_("silicon_area.unit", "mm"), "silicon_area", "is not an area"),
    (with_("effects[0].bandwidth_effect.unit", "GB/s"), "effects[0].bandwidth_effect", "is not a ratio"),
    (with_("effects[0].compression_ratio.value", -2), "effects[0].compression_ratio", "at least 1"),
    (with_("effects[0].compression_ratio.value", 0.5), "effects[0].compression_ratio", "at least 1"),
    (with_("effects[0].bandwidth_effect.value", -1.5), "effects[0].bandwidth_effect", "above 0"),
    (with_("effects[0].bandwidth_effect.value", 0), "effects[0].bandwidth_effect", "above 0"),
    (with_("metadata_overhead.value", -1), "metadata_overhead", "at least 0"),
    (with_("power.value", float("nan")), "power.value", "finite"),
    (with_("effects[0].compression_ratio.value", float("inf")), "effects[0].compression_ratio.value", "finite"),
    (with_("data_classes", ["kv-cache", "tensors"]), "data_classes[1]", "'kv-cache'"),
    (with_("effects[0].data_class", "tensors"), "effects[0].data_class", "'weights'"),
    (with_("effects[0].data_class", "embeddings"), "effects[0].data_class", "not one of data_classes"),
    (with_("data_classes", ["kv-cache", "kv-cache"]), "data_classes", "listed twice"),
    (with_("formats", ["fp12"]), "formats[0]", "'bf16'"),
    (with_("access_patterns", ["diagonal"]), "access_patterns[0]", "'sequential'"),
    (with_("integration_point", "toaster"), "integration_point", "'memory-controller'"),
    (with_("partner", "Not A Slug"), "partner", "pattern"),
    (with_("buffering.unit", "zorkbyte"), "buffering", "unknown unit"),
    (with_("effects[0]", {"data_class": "kv-cache"}), "effects[0]", "give a compression_ratio"),
    (with_("colour", "red"), "colour", "Extra inputs"),
])
def test_malformed_records_name_the_field(doc, field, message):
    exc = error(doc)
    assert exc.field == field and message in exc.message, exc.one_line()
    assert "\n" not in exc.one_line()


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_nan_in_a_file_is_refused_naming_the_field(tmp_path, fmt):
    path = write(tmp_path, with_("power.value", float("nan")), fmt)
    with pytest.raises(RecordError) as info:
        read_partner_files([path])
    assert info.value.field == "power.value" and info.value.source == str(path)


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = write(tmp_path, BASE, "toml")
    with open(path, "a") as fh:
        fh.write("# padding\n" * (DEFAULT_MAX_PARTNER_FILE_BYTES // 10 + 1))
    with pytest.raises(RecordError, match=f"over the partner record limit of {DEFAULT_MAX_PARTNER_FILE_BYTES} bytes"):
        read_partner_files([path])
    monkeypatch.setenv("LUMA_MAX_PARTNER_FILE_BYTES", "100")
    limit = PARTNER_FILE.under(Settings.from_env())
    with pytest.raises(RecordError, match="limit of 100 bytes"):
        read_partner_files([write(tmp_path, BASE, "json", "small")], limit=limit)


def test_partner_files_take_only_intervention_parameters(tmp_path):
    chain = ROOT / "kb" / "examples" / "embedding-minilm.json"
    with pytest.raises(RecordError) as info:
        read_partner_files([chain])
    assert info.value.field == "record_type" and "luma kb ingest" in info.value.message


def test_partner_option_fills_and_checks(tmp_path):
    anonymous = with_("partner", ...)
    assert read_partner_files([write(tmp_path, anonymous, "json")], partner="acme")[0].model.partner == "acme"
    with pytest.raises(RecordError) as info:
        read_partner_files([write(tmp_path, BASE, "yaml")], partner="other")
    assert info.value.field == "partner"


# --- many malformed records (hypothesis) ----------------------------------------------------

#: Quantity fields and the dimension of each (a unit of the same dimension is no defect).
_DIMS = {"effects[0].compression_ratio": "1", "effects[0].bandwidth_effect": "1", "encode_throughput": "GB/s",
         "added_latency": "ms", "power": "W", "silicon_area": "mm^2", "buffering": "GB", "metadata_overhead": "1"}
_UNITS = ["GB", "GB/s", "ms", "W", "mm^2", "1", "percent", "core", "GHz", "kg", "token/s", "TFLOP/s", "J"]
_SAME = {"1": {"1", "percent"}, "GB/s": {"GB/s"}, "ms": {"ms"}, "W": {"W"}, "mm^2": {"mm^2"}, "GB": {"GB"}}
_FINITE = {"allow_nan": False, "allow_infinity": False}


def _out_of_range(field: str):
    """Values the field refuses: below 1 for a compression ratio, 0 or less for a multiplier or a
    throughput, below 0 for the rest."""
    if field == "effects[0].compression_ratio":
        return st.one_of(st.floats(max_value=1, exclude_max=True, **_FINITE), st.integers(-(2**62), 0))
    if field in ("effects[0].bandwidth_effect", "encode_throughput"):
        return st.one_of(st.floats(max_value=0, **_FINITE), st.integers(-(2**62), 0))
    # -5e-324 is the negative float nearest 0 (a `v < 0` filter lets hypothesis rewrite it to a
    # bound that still yields 0.0).
    return st.one_of(st.floats(max_value=-5e-324, **_FINITE), st.integers(-(2**62), -1))


@st.composite
def malformed(draw):
    """(record, field path the error must name, file format): one defect per record."""
    kind = draw(st.sampled_from(["missing-unit", "wrong-dimension", "out-of-range", "nan", "unknown-data-class",
                                 "effect-data-class"]))
    fmt = draw(st.sampled_from(["toml", "yaml", "json"]))
    field = draw(st.sampled_from(sorted(_DIMS)))
    if kind == "missing-unit":
        return with_(f"{field}.unit", ...), f"{field}.unit", fmt
    if kind == "wrong-dimension":
        unit = draw(st.sampled_from([u for u in _UNITS if u not in _SAME[_DIMS[field]]]))
        return with_(f"{field}.unit", unit), field, fmt
    if kind == "out-of-range":
        return with_(f"{field}.value", draw(_out_of_range(field))), field, fmt
    if kind == "nan":
        value = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
        return with_(f"{field}.value", value), f"{field}.value", fmt
    bad = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12).filter(
        lambda s: s not in DATA_CLASSES))
    if kind == "unknown-data-class":
        i = draw(st.integers(0, 1))
        return with_(f"data_classes[{i}]", bad), f"data_classes[{i}]", fmt
    return with_("effects[0].data_class", bad), "effects[0].data_class", fmt


@given(malformed())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_many_malformed_records_are_refused_naming_the_field(case):
    doc, field, fmt = case
    with tempfile.TemporaryDirectory(prefix="luma-partner-") as folder:
        path = write(Path(folder), doc, fmt)
        with pytest.raises(RecordError) as info:
            read_partner_files([path])
    exc = info.value
    assert exc.field is not None and exc.field.startswith(field), (exc.one_line(), field)
    assert exc.source == str(path) and "\n" not in exc.one_line()


# --- schema, projection, ontology and shapes ----------------------------------------------


def _json_ready(doc):
    return json.loads(json.dumps(doc, default=lambda v: v.isoformat() if isinstance(v, (date, datetime)) else v))


def test_committed_schema_is_generated_and_accepts_the_examples():
    committed = json.loads((ONTOLOGY / "intervention-parameters.schema.json").read_text())
    assert committed == intervention_parameters_schema()
    validator = jsonschema.Draft202012Validator(committed)
    for path in EXAMPLES.values():
        assert list(validator.iter_errors(_json_ready(tomllib.loads(path.read_text())))) == []
    assert list(validator.iter_errors({**BASE, "data_classes": ["tensors"]}))


def projected(doc: dict):
    rec = validate_document(doc, "p")
    return rec, project(rec.model, LedgerMeta(rec.content_hash, "alice@host", datetime(2026, 12, 2, tzinfo=timezone.utc)))


def _docs():
    return [_json_ready(tomllib.loads(p.read_text())) for p in EXAMPLES.values()] + [BASE]


def _retraction():
    return {"record_type": "partner-retraction", "partner": "acme", "records": ["ab" * 32, "cd" * 32],
            "reason": "superseded", "provenance": {"tool": "luma partner", "started": "2026-12-01T00:00:00Z"}}


@pytest.mark.parametrize("doc", [*_docs(), _retraction()], ids=["kv", "cxl", "base", "retraction"])
def test_everything_of_a_partner_record_is_in_its_partner_graph(doc):
    rec, w = projected(doc)
    graph = partner_graph(doc["partner"], rec.content_hash)
    assert w.graph == graph and w.entity_graph == graph
    lines = w.data().decode().splitlines()
    assert lines and all(line.endswith(f"<{graph}> .") for line in lines)
    assert ENTITY_GRAPH not in w.data().decode()
    assert any(p == "http://www.w3.org/2000/01/rdf-schema#label" and o == '"alice@host"' for _, p, o in w.triples)


@pytest.mark.parametrize("doc", [*_docs(), _retraction()], ids=["kv", "cxl", "base", "retraction"])
def test_projected_partner_records_conform_under_both_checkers(doc):
    _, w = projected(doc)
    default_checker().check(w.triples, "p", w.known)
    data = Graph().parse(data="".join(f"<{s}> <{p}> {o} .\n" for s, p, o in w.triples), format="nt")
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    assert pyshacl.validate(data, shacl_graph=shapes, inference="none")[0]


def test_a_figure_without_unit_breaks_the_shape():
    _, w = projected(BASE)
    triples = [t for t in w.triples if not (t[1].endswith("qudt/unit") and "/figure/0" in t[0])]
    with pytest.raises(RecordError, match="unit"):
        default_checker().check(triples, "p")


def test_projection_terms_are_declared_and_shapes_cover_them():
    onto = Graph().parse(data=(ONTOLOGY / "luma.ttl").read_text(), format="turtle")
    declared = {str(s) for k in (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty) for s in onto.subjects(RDF.type, k)}
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    paths = {str(o) for o in shapes.objects(None, SH.path)}
    targets = {str(o) for o in shapes.objects(None, SH.targetClass)}
    for doc in [*_docs(), _retraction()]:
        triples = projected(doc)[1].triples
        predicates = {p for _, p, _ in triples} - {str(RDF.type), str(RDFS.label)}
        assert predicates - declared == set()
        assert predicates <= paths
        types = {o[1:-1] for _, p, o in triples if p == str(RDF.type)}
        assert types <= targets and {t for t in types if t.startswith(LUMA)} <= declared
