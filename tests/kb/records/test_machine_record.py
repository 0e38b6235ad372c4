"""Machine records: validation with units, SI figures, the shipped catalog, projection and shapes."""

from __future__ import annotations

import copy
import importlib.resources
import json
import math
from datetime import datetime, timezone

import jsonschema
import pyshacl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rdflib import OWL, RDF, RDFS, Graph, Namespace

from luma.errors import RecordError, UnknownName
from luma.kb.records import units
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.loader import validate_document
from luma.kb.records.machine import MachineRecord, machine_schema
from luma.kb.records.machine_catalog import alias_key, aliases, catalog, load_machine, stored_machines
from luma.kb.ingest.shacl import default_checker
from luma.kb.vocab import LUMA
from luma.settings import Settings

ONTOLOGY = importlib.resources.files("luma.ontology")
SH = Namespace("http://www.w3.org/ns/shacl#")
BASE = {"record_type": "machine", "evidence_class": "measured", "name": "test-host",
        "architecture": {"name": "Test CPU", "kind": "cpu", "vendor": "Test"}, "provenance": {"tool": "pytest"}}
#: A record using every optional part (sources, price, storage, latency, sparse and per-core figures).
FULL = {
    **BASE, "evidence_class": "vendor-claim", "count": 8,
    "source": {"title": "Spec sheet", "url": "https://example.com/sheet.pdf", "retrieved": "2026-11-30"},
    "compute": [{"precision": "fp16", "throughput": {"value": 989.5, "unit": "TFLOP/s"}},
                {"precision": "fp16", "throughput": {"value": 1979, "unit": "TFLOP/s"}, "dense": False},
                {"precision": "int8", "throughput": {"value": 1979, "unit": "TOPS"}},
                {"precision": "fp32", "throughput": {"value": 80, "unit": "GFLOP/s"}, "cores": 1, "method": "mm"}],
    "memory": [{"tier": "hbm", "capacity": {"value": 80, "unit": "GB"}, "bandwidth": {"value": 3.35, "unit": "TB/s"}},
               {"tier": "host", "capacity": {"value": 2, "unit": "TiB"}}],
    "interconnect": [{"name": "NVLink", "bandwidth": {"value": 200, "unit": "Gbit/s"}, "links": 18,
                      "topology": "switch", "latency": {"value": 2, "unit": "us"}, "method": "sheet / 36"}],
    "storage": {"capacity": {"value": 30, "unit": "TB"}, "bandwidth": {"value": 25, "unit": "GB/s"}},
    "power": {"tdp": {"value": 700, "unit": "W"}},
    "price": {"value": 2.5, "unit": "USD/h"},
    "notes": ["a note"],
}


def validated(doc: dict) -> MachineRecord:
    return validate_document(doc, "m.json").model


def error(doc: dict) -> RecordError:
    with pytest.raises(RecordError) as info:
        validate_document(doc, "m.json")
    return info.value


def with_memory(**fields) -> dict:
    return {**BASE, "memory": [{"tier": "host", **fields}]}


# --- figures in SI ------------------------------------------------------------------------


def test_full_record_gives_si_figures():
    m = validated(FULL)
    assert m.compute_flops("fp16") == pytest.approx(989.5e12)
    assert m.compute_flops("fp16", dense=False) == pytest.approx(1979e12)
    assert m.compute_flops("int8") == pytest.approx(1979e12)  # an integer op counts as one FLOP
    assert m.compute_flops("fp32") == pytest.approx(80e9)  # only per-core figures: the best of them
    assert m.compute_flops("fp32", cores=1) == pytest.approx(80e9)
    assert m.memory_capacity("hbm") == pytest.approx(80e9)
    assert m.memory_capacity("host") == pytest.approx(2 * 2**40)
    assert m.memory_bandwidth("hbm") == pytest.approx(3.35e12)
    assert m.interconnect_bandwidth("NVLink") == pytest.approx(25e9)  # 200 Gbit/s = 25 GB/s, one link one way
    assert m.link("NVLink").device_bandwidth == pytest.approx(450e9)  # x 18 links
    assert m.power_w == 700 and m.count == 8 and m.evidence_class == "vendor-claim" and m.name == "test-host"
    assert m.figure("memory_bandwidth", "hbm") == m.memory_bandwidth("hbm")
    assert m.price.currency == "USD"


def test_bits_convert_to_bytes():
    m = validated(with_memory(bandwidth={"value": 400, "unit": "Gbit/s"}))
    assert m.memory_bandwidth("host") == pytest.approx(50e9)


@given(value=st.floats(min_value=1e-3, max_value=1e6), prefix=st.sampled_from(["", "k", "M", "G", "T"]),
       per=st.sampled_from([("bit/s", 1 / 8), ("byte/s", 1.0), ("B/s", 1.0)]))
@settings(max_examples=60, deadline=None)
def test_any_bandwidth_in_bits_or_bytes_converts_exactly(value, prefix, per):
    unit, factor = per
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[prefix]
    m = validated(with_memory(bandwidth={"value": value, "unit": prefix + unit}))
    assert m.memory_bandwidth("host") == pytest.approx(value * scale * factor, rel=1e-12)


def test_per_core_figures_are_picked_by_core_count():
    doc = {**BASE, "compute": [{"precision": "fp32", "cores": c, "throughput": {"value": v, "unit": "GFLOP/s"}}
                               for c, v in ((1, 10), (2, 30), (4, 25))]}
    m = validated(doc)
    assert m.compute_flops("fp32") == pytest.approx(30e9)  # the best core count (a shared host may dip at 4)
    assert m.compute_flops("fp32", cores=4) == pytest.approx(25e9)
    with pytest.raises(UnknownName, match="core counts: 1, 2, 4"):
        m.compute_flops("fp32", cores=3)


@pytest.mark.parametrize(("call", "message"), [
    (lambda m: m.compute_flops("fp12"), "unknown precision 'fp12'"),
    (lambda m: m.compute_flops("fp8"), "states no fp8 compute figure"),
    (lambda m: m.memory_capacity("l4"), "unknown tier 'l4'"),
    (lambda m: m.memory_bandwidth("cxl"), "states no cxl memory bandwidth"),
    (lambda m: m.interconnect_bandwidth("PCIe"), "links: NVLink"),
    (lambda m: m.figure("area"), "unknown figure kind"),
])
def test_missing_or_unknown_figures_are_clear_errors(call, message):
    with pytest.raises(UnknownName, match=message):
        call(validated(FULL))


# --- malformed input ----------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "field", "message"), [
    (with_memory(bandwidth={"value": 1, "unit": "GB"}), "memory[0].bandwidth", "'GB' is not a bandwidth"),
    (with_memory(capacity={"value": -80, "unit": "GB"}), "memory[0].capacity", "must be positive"),
    (with_memory(capacity={"value": 0, "unit": "GB"}), "memory[0].capacity", "must be positive"),
    (with_memory(capacity={"value": float("nan"), "unit": "GB"}), "memory[0].capacity.value", "finite"),
    (with_memory(capacity={"value": float("inf"), "unit": "GB"}), "memory[0].capacity.value", "finite"),
    (with_memory(capacity={"value": 1}), "memory[0].capacity.unit", "Field required"),
    (with_memory(capacity={"value": 1, "unit": "GHz"}), "memory[0].capacity", "is not a capacity"),
    (with_memory(capacity={"value": 1, "unit": "zorkbyte"}), "memory[0].capacity", "unknown unit"),
    (with_memory(), "memory[0]", "give a capacity, a bandwidth or both"),
    ({**BASE, "memory": [{"tier": "l4", "capacity": {"value": 1, "unit": "GB"}}]}, "memory[0].tier", "'hbm'"),
    ({**BASE, "compute": [{"precision": "fp12", "throughput": {"value": 1, "unit": "TFLOP/s"}}]},
     "compute[0].precision", "'fp16'"),
    ({**BASE, "compute": [{"precision": "fp16", "throughput": {"value": 1, "unit": "TFLOPs"}}]},
     "compute[0].throughput", "a rate needs '/s'"),
    ({**BASE, "compute": [{"precision": "fp16", "throughput": {"value": 1, "unit": "TFLOP/s"}}] * 2},
     "compute[1]", "a second figure for fp16 dense"),
    ({**BASE, "interconnect": [{"name": "x", "bandwidth": {"value": 1, "unit": "GB/s"},
                                "latency": {"value": 1, "unit": "GB"}}]}, "interconnect[0].latency", "not a latency"),
    ({**BASE, "power": {"tdp": {"value": 1e308, "unit": "TW"}}}, "power.tdp", "too large"),
    ({**BASE, "evidence_class": "vendor-claim", "power": {"tdp": {"value": 1, "unit": "W"}}}, "source",
     "must name its source"),
    (BASE, "compute", "states no figure"),
    ({**FULL, "name": "Not A Slug"}, "name", "pattern"),
    ({**FULL, "price": {"value": 1, "unit": "GBP/h"}}, "price.unit", "'EUR/h'"),
    ({**FULL, "source": {"title": "t", "url": "file:///etc/passwd"}}, "source.url", "pattern"),
])
def test_malformed_records_name_the_field(doc, field, message):
    exc = error(doc)
    assert exc.field == field and message in exc.message, exc.one_line()


_SECTIONS = {
    "compute": lambda q: {"compute": [{"precision": "fp16", "throughput": q}]},
    "memory-capacity": lambda q: {"memory": [{"tier": "hbm", "capacity": q}]},
    "memory-bandwidth": lambda q: {"memory": [{"tier": "hbm", "bandwidth": q}]},
    "link": lambda q: {"interconnect": [{"name": "l", "bandwidth": q}]},
    "power": lambda q: {"power": {"tdp": q}},
}
_PATHS = {"compute": "compute[0].throughput", "memory-capacity": "memory[0].capacity",
          "memory-bandwidth": "memory[0].bandwidth", "link": "interconnect[0].bandwidth", "power": "power.tdp"}
#: Units to draw wrong ones from (each section keeps those of another dimension than its own).
_WRONG_UNITS = ["GHz", "ms", "core", "token/s", "EUR", "m", "kg", "dimensionless", "GB", "GB/s", "Gbit",
                "TFLOPs", "TFLOP/s", "W", "kWh"]
_BAD_VALUES = st.one_of(st.floats(max_value=0), st.just(float("nan")), st.just(float("inf")), st.just(-float("inf")),
                        st.integers(max_value=0), st.text(max_size=5), st.none(), st.booleans())


@st.composite
def malformed(draw):
    section = draw(st.sampled_from(sorted(_SECTIONS)))
    good_unit = {"compute": "TFLOP/s", "memory-capacity": "GB", "memory-bandwidth": "Gbit/s", "link": "GB/s",
                 "power": "W"}[section]
    kind = draw(st.sampled_from(["unit", "value", "missing-unit", "missing-value", "garbage-unit"]))
    q = {"value": 1.5, "unit": good_unit}
    if kind == "unit":
        wanted = units.dimensionality_of(good_unit)
        q["unit"] = draw(st.sampled_from([u for u in _WRONG_UNITS if units.dimensionality_of(u) != wanted]))
    elif kind == "value":
        q["value"] = draw(_BAD_VALUES)
    elif kind == "missing-unit":
        del q["unit"]
    elif kind == "missing-value":
        del q["value"]
    else:
        q["unit"] = draw(st.text(alphabet="xyzqQ#@!", min_size=1, max_size=8))
    return section, {**BASE, **_SECTIONS[section](q)}


@given(malformed())
@settings(max_examples=200, deadline=None)
def test_every_malformed_quantity_is_refused_naming_its_field(case):
    section, doc = case
    exc = error(doc)
    assert exc.field and exc.field.startswith(_PATHS[section]), exc.one_line()
    assert "\n" not in exc.one_line()


# --- the catalog --------------------------------------------------------------------------


def test_catalog_ships_vendor_claims_that_name_their_source():
    shipped = catalog()
    assert len(shipped) >= 6
    for name, path in shipped.items():
        m = load_machine(name)
        assert m.name == name == path.stem
        assert m.evidence_class == "vendor-claim" and m.source.url.startswith("https://")
        assert m.memory and m.notes
        assert m.power is None or m.power_w > 0  # a figure no source gave is left out, not guessed
    h100 = load_machine("nvidia-h100-sxm5-80gb")
    assert h100.compute_flops("bf16") == pytest.approx(989.5e12)
    assert h100.memory_capacity("hbm") == 81_559 * 2**20  # as nvidia-smi reports it, not the sheet's 80 GB
    assert h100.memory_bandwidth("hbm") == pytest.approx(3.35e12)


# Closed-form checks: each figure is the source's number read the way the record's method says.
_FIGURES = [
    ("nvidia-gb200-186gb", lambda m: m.memory_bandwidth("hbm"), 8e12),
    ("nvidia-gb200-186gb", lambda m: m.compute_flops("fp8"), 10_000e12 / 2),
    ("nvidia-gb200-186gb", lambda m: m.memory_capacity("hbm"), 186e9),
    ("nvidia-gb200-186gb", lambda m: m.link("NVLink").device_bandwidth, 18 * 50e9),
    ("nvidia-gh200-96gb", lambda m: m.memory_capacity("hbm"), 96e9),
    ("nvidia-gh200-96gb", lambda m: m.memory_capacity("host"), 480e9),
    ("nvidia-gh200-144gb", lambda m: m.memory_capacity("hbm"), 144e9),
    # GH200 datasheet (one column for the 96 GB and 144 GB parts): dense figures as stated beside the sparse ones.
    *[(n, read, v) for n in ("nvidia-gh200-96gb", "nvidia-gh200-144gb") for read, v in [
        (lambda m: m.compute_flops("fp64"), 67e12),
        (lambda m: m.compute_flops("fp32"), 67e12),
        (lambda m: m.compute_flops("tf32"), 494e12),
        (lambda m: m.compute_flops("tf32", dense=False), 989e12),
        (lambda m: m.compute_flops("bf16"), 990e12),
        (lambda m: m.compute_flops("bf16", dense=False), 1979e12),
        (lambda m: m.compute_flops("fp16"), 990e12),
        (lambda m: m.compute_flops("fp16", dense=False), 1979e12),
        (lambda m: m.compute_flops("fp8"), 1979e12),
        (lambda m: m.compute_flops("fp8", dense=False), 3958e12),
        (lambda m: m.compute_flops("int8"), 1979e12),
        (lambda m: m.compute_flops("int8", dense=False), 3958e12),
    ]],
    ("nvidia-gh200-144gb", lambda m: m.memory_bandwidth("hbm"), 4.9e12),
    ("nvidia-h100-pcie-80gb", lambda m: m.compute_flops("fp16"), 1513e12 / 2),
    ("nvidia-h100-pcie-80gb", lambda m: m.memory_bandwidth("hbm"), 2e12),
    ("nvidia-h100-pcie-80gb", lambda m: m.power_w, 350),
    ("nvidia-h100-nvl-94gb", lambda m: m.memory_bandwidth("hbm"), 3.9e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.link("NVLink").device_bandwidth, 600e9 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp64"), 60e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp32"), 60e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("tf32"), 835e12 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("tf32", dense=False), 835e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("bf16"), 1671e12 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("bf16", dense=False), 1671e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp16"), 1671e12 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp16", dense=False), 1671e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp8"), 3341e12 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("fp8", dense=False), 3341e12),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("int8"), 3341e12 / 2),
    ("nvidia-h100-nvl-94gb", lambda m: m.compute_flops("int8", dense=False), 3341e12),
    ("nvidia-l40s-48gb", lambda m: m.compute_flops("fp8"), 1466e12 / 2),
    ("nvidia-l40s-48gb", lambda m: m.memory_capacity("gddr"), 48_305_799_168),
    ("nvidia-l40s-48gb", lambda m: m.memory_bandwidth("gddr"), 864e9),
    ("nvidia-l4-24gb", lambda m: m.compute_flops("fp8", dense=False), 485e12),
    ("nvidia-l4-24gb", lambda m: m.power_w, 72),
    ("nvidia-a10g-24gb", lambda m: m.memory_bandwidth("gddr"), 600e9),
    ("nvidia-a10g-24gb", lambda m: m.compute_flops("fp32"), 35e12),
    ("nvidia-a10g-24gb", lambda m: m.compute_flops("bf16"), 70e12),
    ("nvidia-a10g-24gb", lambda m: m.compute_flops("bf16", dense=False), 140e12),
    ("nvidia-a10g-24gb", lambda m: m.compute_flops("fp16"), 70e12),
    ("nvidia-a10g-24gb", lambda m: m.compute_flops("fp16", dense=False), 140e12),
    ("nvidia-a10g-24gb", lambda m: m.power_w, 300),
    ("nvidia-a100-sxm4-40gb", lambda m: m.compute_flops("bf16"), 312e12),
    ("nvidia-a100-sxm4-40gb", lambda m: m.memory_capacity("hbm"), 42_405_855_232),
    ("nvidia-a100-sxm4-40gb", lambda m: m.memory_bandwidth("hbm"), 1555e9),
    ("amd-instinct-mi325x", lambda m: m.compute_flops("fp8"), 2614.9e12),
    ("amd-instinct-mi325x", lambda m: m.memory_bandwidth("hbm"), 6e12),
    ("intel-gaudi2", lambda m: m.compute_flops("bf16"), 432e12),
    ("intel-gaudi2", lambda m: m.link("RoCE 100GbE").device_bandwidth, 4.8e12 / 8 / 2),
    ("intel-gaudi3", lambda m: m.compute_flops("fp8"), 1835e12),
    ("intel-gaudi3", lambda m: m.memory_bandwidth("hbm"), 3.67e12),
    ("intel-gaudi3", lambda m: m.link("RoCE 200GbE").device_bandwidth, 1200e9 / 2),
    ("amd-epyc-7763", lambda m: m.memory_bandwidth("host"), 8 * 3200e6 * 8),
    ("nvidia-grace", lambda m: m.memory_bandwidth("host"), 1e12 / 2),
]


@pytest.mark.parametrize(("name", "read", "expected"), _FIGURES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(_FIGURES)])
def test_catalog_figures_read_off_their_sources(name, read, expected):
    assert read(load_machine(name)) == pytest.approx(expected)


@pytest.mark.parametrize("name", ["nvidia-a10g-24gb", "nvidia-a100-sxm4-40gb", "nvidia-a100-sxm4-80gb"])
def test_ampere_cards_have_no_fp8_figure(name):
    with pytest.raises(UnknownName):
        load_machine(name).compute_flops("fp8")


@pytest.mark.parametrize(("name", "precision"), [("nvidia-a10g-24gb", "tf32"), ("nvidia-a10g-24gb", "int8")])
def test_figures_no_source_stated_stay_out(name, precision):
    with pytest.raises(UnknownName):
        load_machine(name).compute_flops(precision)


@pytest.mark.parametrize("name", ["nvidia-gh200-96gb", "nvidia-gh200-144gb"])
def test_gh200_has_no_gpu_power_figure(name):
    # The datasheet states only the module's 450-1000 W (CPU + GPU + memory), not the GPU's share.
    assert load_machine(name).power is None


def test_every_alias_names_a_catalog_machine_and_hides_none():
    shipped, table = catalog(), aliases()
    assert table and set(table.values()) <= set(shipped)
    assert not set(table) & set(shipped)  # a short name never shadows a record's own name
    assert all(alias_key(a) == a for a in table)  # stored as looked up, so no two spellings clash


@pytest.mark.parametrize(("short", "name"), [
    ("B200", "nvidia-b200-sxm-180gb"), ("h100", "nvidia-h100-sxm5-80gb"), ("H100 SXM", "nvidia-h100-sxm5-80gb"),
    ("H200", "nvidia-h200-sxm-141gb"), ("A100", "nvidia-a100-sxm4-80gb"), ("A100-40G", "nvidia-a100-sxm4-40gb"),
    ("MI300X", "amd-instinct-mi300x"), ("MI325X", "amd-instinct-mi325x"), ("L40S", "nvidia-l40s-48gb"),
    ("L4", "nvidia-l4-24gb"), ("A10G", "nvidia-a10g-24gb"), ("GH200", "nvidia-gh200-96gb"),
    ("GB200", "nvidia-gb200-186gb"), ("Gaudi2", "intel-gaudi2"), ("Gaudi 3", "intel-gaudi3"),
    ("H100 PCIe", "nvidia-h100-pcie-80gb"), ("H100 NVL", "nvidia-h100-nvl-94gb"), ("NVIDIA-L40S-48GB", "nvidia-l40s-48gb"),
])
def test_short_names_resolve_case_insensitively(short, name):
    assert load_machine(short).name == name


def test_unknown_machine_lists_the_known_names():
    with pytest.raises(UnknownName) as info:
        load_machine("h100x")
    assert "did you mean nvidia-h100" in info.value.message
    for name in catalog():
        assert name in info.value.message


def test_committed_schema_accepts_the_catalog_and_matches_the_model():
    committed = json.loads((ONTOLOGY / "machine.schema.json").read_text())
    assert committed == machine_schema()
    validator = jsonschema.Draft202012Validator(committed)
    for path in catalog().values():
        assert list(validator.iter_errors(json.loads(path.read_text()))) == []
    assert list(validator.iter_errors({**FULL, "colour": "red"}))


# --- projection, ontology and shapes --------------------------------------------------------


def projected(doc: dict) -> list[tuple[str, str, str]]:
    rec = validate_document(doc, "m.json")
    return project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 2, tzinfo=timezone.utc))).triples


def test_every_figure_node_carries_the_evidence_class():
    triples = projected(FULL)
    typed = {s for s, p, o in triples if p == str(RDF.type) and o == f"<{LUMA}MachineFigure>"}
    assert len(typed) == len(validated(FULL).figures()) == 13  # + the link count
    with_class = {s for s, p, o in triples if p == LUMA + "evidenceClass" and o == f"<{LUMA}VendorClaim>"}
    assert typed <= with_class


def test_projection_terms_are_declared_and_shapes_cover_them():
    onto = Graph().parse(data=(ONTOLOGY / "luma.ttl").read_text(), format="turtle")
    declared = {str(s) for k in (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty) for s in onto.subjects(RDF.type, k)}
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    paths = {str(o) for o in shapes.objects(None, SH.path)}
    targets = {str(o) for o in shapes.objects(None, SH.targetClass)}
    triples = projected(FULL)
    predicates = {p for _, p, _ in triples} - {str(RDF.type), str(RDFS.label)}
    assert predicates - declared == set()
    assert predicates <= paths
    types = {o[1:-1] for _, p, o in triples if p == str(RDF.type)}
    assert types <= targets and {t for t in types if t.startswith(LUMA)} <= declared


@pytest.mark.parametrize("doc", [FULL, *[json.loads(p.read_text()) for _, p in sorted(catalog().items())]],
                         ids=["full", *sorted(catalog())])
def test_projected_machines_conform_under_both_checkers(doc):
    triples = projected(doc)
    default_checker().check(triples, "m.json")
    data = Graph().parse(data="".join(f"<{s}> <{p}> {o} .\n" for s, p, o in triples), format="nt")
    shapes = Graph().parse(data=(ONTOLOGY / "shapes.ttl").read_text(), format="turtle")
    assert pyshacl.validate(data, shacl_graph=shapes, inference="none")[0]


def test_a_figure_without_evidence_class_breaks_the_shape():
    triples = [t for t in projected(FULL) if not (t[1] == LUMA + "evidenceClass" and "/figure/0" in t[0])]
    with pytest.raises(RecordError, match="evidence_class"):
        default_checker().check(triples, "m.json")


# --- the ledger -> KB path --------------------------------------------------------------------


def test_ingest_and_find_the_latest_machine_of_a_name(luma_home, tmp_path):
    from luma.kb.knowledge_base import KnowledgeBase

    assert stored_machines(Settings.from_env(home=luma_home)) == [] and not any(luma_home.iterdir())  # reading creates nothing
    first, second = copy.deepcopy(FULL), copy.deepcopy(FULL)
    second["power"]["tdp"]["value"] = 600
    for i, doc in enumerate((first, second)):
        (tmp_path / f"m{i}.json").write_text(json.dumps(doc))
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        report = kb.ingest([tmp_path / "m0.json", tmp_path / "m1.json"])
        assert len(report.added) == 2
        rows = kb.store.select(f"SELECT ?m WHERE {{ ?m a <{LUMA}MachineParameters> }}")
        assert len(rows) == 2
    assert [rec.power_w for _, rec in stored_machines(Settings.from_env(home=luma_home))] == [700, 600]
    assert load_machine("test-host", Settings.from_env(home=luma_home)).power_w == 600
    assert math.isclose(load_machine(tmp_path / "m0.json").power_w, 700)
