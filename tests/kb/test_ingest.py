"""Ingest end to end: identity, all-or-nothing, exact rebuild, errors that name the field, and
the `luma kb` commands (query, stats, export, load) over a real on-disk project.

DESIGN §2 (ledger = commit point, KB rebuilt from it) and §8 (untrusted input: validated,
rejected whole, never able to fetch remote URLs or update through the query command).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from luma.errors import ConfigError, RdfSyntaxError, RecordError
from luma.kb.records.synthetic import write_jsonl
from luma.kb.vocab import ID, LUMA
from luma.rules.engine import Engine

from tests.kb.projects import (
    _build_project,
    assert_one_line_error,
    ledger_rows,
    luma,
    open_kb,
    snapshot,
    sparql_json,
    TRUST_RECORDS,
    TURTLE_WITH_BNODE,
    VALID_JSON,
    valid_record,
    VALID_YAML,
)



def test_json_and_yaml_of_one_record_are_one_ledger_row(signed):
    as_json, as_yaml = signed(VALID_JSON), signed(VALID_YAML)  # signed copies: the chain is measured
    with open_kb() as kb:
        report = kb.ingest([as_json, as_yaml])
        assert len(report.added) == 1 and len(report.duplicates) == 1
        assert report.added[0].content_hash == report.duplicates[0].content_hash
        assert report.duplicates[0].source == str(as_yaml)
        assert ledger_rows(kb) == TRUST_RECORDS + 1
    with open_kb() as kb:  # and in a later call, the YAML twin is a duplicate of the stored row
        again = kb.ingest([as_yaml])
        assert again.added == [] and [d.content_hash for d in again.duplicates] == [report.added[0].content_hash]
        assert ledger_rows(kb) == TRUST_RECORDS + 1


def test_ingesting_the_same_file_twice_changes_nothing(signed, tmp_path):
    batch = write_jsonl(tmp_path / "batch.jsonl", 30)
    valid = signed(VALID_JSON)
    first = luma("kb", "ingest", "--format", "json", batch, valid)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["added"] == 31
    before = snapshot()
    second = luma("kb", "ingest", "--format", "json", batch, valid)
    assert second.exit_code == 0, second.output
    out = json.loads(second.stdout)
    assert out["added"] == 0 and out["duplicates"] == 31 and out["quads_added"] == 0
    assert {r["status"] for r in out["records"]} == {"duplicate"}
    assert str(valid) in {r["source"] for r in out["records"]}
    assert snapshot() == before
    with open_kb() as kb:
        dup = kb.ingest([valid])
        assert dup.added == [] and [d.source for d in dup.duplicates] == [str(valid)]
        assert kb.store.count() == before[1] and ledger_rows(kb) == before[0] == TRUST_RECORDS + 31


# -- rebuild -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rebuild_reproduces_the_kb_exactly(luma_home, evidence):
    _build_project(luma_home, evidence, 200, rdf=True)
    records = TRUST_RECORDS + 202  # the valid chain, 200 synthetic chains, the Turtle document
    with open_kb() as kb:
        before = kb.store.dump("nquads", sort=True)
        assert ledger_rows(kb) == records
        blank = kb.store.select("SELECT ?n WHERE { <http://example.org/rack1> <http://example.org/holds> ?n }")
        assert len(blank) == 1 and blank[0]["n"].startswith(ID + "record/")  # skolemised, not a blank node
        assert kb.rebuild() > 0
        assert kb.store.dump("nquads", sort=True) == before
    result = luma("kb", "rebuild")
    assert result.exit_code == 0, result.output
    with open_kb() as kb:
        assert kb.store.dump("nquads", sort=True) == before
    shutil.rmtree(luma_home / "kb")  # the KB lost entirely: the next open replays the ledger
    with open_kb() as kb:
        assert kb.store.dump("nquads", sort=True) == before
        assert kb.watermark() == kb.ledger.last_id() == records


# -- bad input: one line naming file and field, nothing written ------------------------------------


_DELETE = object()
_MEM = "pass_state.dimensions.host_memory"
_FAIL_MEM = "fail_state.dimensions.host_memory"
_TEXT = json.dumps(valid_record(), indent=1)


def _with(path: str, value) -> str:
    """The valid chain as JSON text with the field at `path` (dotted) set, or deleted."""
    rec = valid_record()
    *head, last = path.split(".")
    node = rec
    for part in head:
        node = node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return json.dumps(rec, indent=1)


def _case(content: str, field: str | None, *fragments: str, name: str = "bad.json"):
    return name, content, field, fragments


BAD_INPUTS = {  # id: (file name, content, the field named (None: none), fragments of the message)
    "json-syntax": _case('{"record_type": "pex-chain",\n  "evidence_class": , }', None, "invalid JSON: line 2, column"),
    "yaml-syntax": _case("record_type: pex-chain\nworkload: [a, b\nx: 1\n", None, "invalid YAML: line 3", name="bad.yaml"),
    "jsonl-bad-line": _case(_TEXT.replace("\n", "") + "\n\n{oops}\n", None, "line 3", "invalid JSON", name="bad.jsonl"),
    "missing-key": _case(_with("workload.model", _DELETE), "workload.model", "Field required"),
    "missing-record-type": _case(_with("record_type", _DELETE), "record_type", "record_type is missing"),
    "wrong-type-int": _case(_with("repetitions", "3"), "repetitions", "valid integer"),
    "wrong-type-bool": _case(_with("recovered", "yes"), "recovered", "valid boolean"),
    "wrong-type-text-level": _case(_with(_MEM + ".value", "lots"), _MEM + ".value", "must be a number"),
    "extra-key": _case(_with("colour", "red"), "colour", "Extra inputs"),
    "extra-nested-key": _case(_with("workload.gpu", "H100"), "workload.gpu", "Extra inputs"),
    "not-an-object": _case(json.dumps([valid_record(), 3]), None, "record 2", "must be an object"),
    "unknown-dimension": _case(_with("pass_state.dimensions.warp_drive", {"value": 1, "unit": "core"}),
                               "pass_state.dimensions.warp_drive", "unknown dimension 'warp_drive'", "host_memory"),
    "unknown-crossed-dimension": _case(_with("crossed_dimension", "warp_drive"), "crossed_dimension", "unknown dimension"),
    "unit-does-not-fit": _case(_with(_MEM + ".unit", "GHz"), _MEM + ".unit", "'GHz' does not fit host_memory"),
    "unknown-unit": _case(_with(_MEM + ".unit", "gigaflarps"), _MEM + ".unit", "unknown unit"),
    "categorical-with-unit": _case(_with("pass_state.dimensions.accelerator_type", {"value": "H100", "unit": "GiB"}),
                                   "pass_state.dimensions.accelerator_type", "categorical"),
    "negative-capacity": _case(_with(_FAIL_MEM + ".value", -1), _FAIL_MEM + ".value", "must not be negative"),
    "nan-literal": _case(_TEXT.replace('"value": 1.5', '"value": NaN'), _MEM + ".value", "finite"),
    "infinity-literal": _case(_TEXT.replace('"value": 1.5', '"value": Infinity'), _MEM + ".value", "finite"),
    "minus-infinity-in-clause": _case(_TEXT.replace('"value": 200', '"value": -Infinity'), "contract.clauses[0].value", "finite"),
    "overflowing-float": _case(_TEXT.replace('"value": 1.5', '"value": 1e999'), _MEM + ".value", "finite"),
    "overflow-on-conversion": _case(_with(_MEM, {"value": 1e308, "unit": "TB"}), _MEM + ".value", "too large"),
    "huge-integer": _case(_TEXT.replace('"value": 1.5', '"value": 1' + "0" * 400), _MEM + ".value", "less than or equal"),
    "huge-repetitions": _case(_TEXT.replace('"repetitions": 3', '"repetitions": 1' + "0" * 400), "repetitions",
                              "less than or equal"),
    "unknown-record-type": _case(_with("record_type", "pex-chainz"), "record_type", "unknown record_type 'pex-chainz'"),
    "crossed-same-level": _case(_with(_FAIL_MEM, {"value": 1.5, "unit": "GiB"}), "crossed_dimension", "same level"),
    "crossed-same-level-other-unit": _case(_with(_FAIL_MEM, {"value": 1536, "unit": "MiB"}), "crossed_dimension", "same level"),
    "crossed-missing-in-fail": _case(_with(_FAIL_MEM, _DELETE), "fail_state.dimensions", "no level"),
    "empty-json": _case("", None, "empty", name="empty.json"),
    "empty-yaml": _case("\n", None, "empty", name="empty.yaml"),
    "empty-jsonl": _case("\n\n", None, "empty", name="empty.jsonl"),
    "comments-only-yaml": _case("# nothing here\n", None, "no record", name="empty.yaml"),
    "unsupported-extension": _case(_TEXT, None, "unsupported file type", name="record.txt"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_refused_whole(case, seeded, tmp_path):
    name, content, field, fragments = BAD_INPUTS[case]
    path = tmp_path / name
    path.write_text(content)
    with open_kb() as kb, pytest.raises(RecordError) as caught:
        kb.ingest([path])
    err, message = caught.value, str(caught.value)
    assert "\n" not in message and message == err.one_line() and message.startswith(str(path))
    assert err.source.startswith(str(path)) and err.field == field
    assert field is None or f": {field}: " in message
    assert all(frag in message for frag in fragments), message
    assert_one_line_error(luma("kb", "ingest", path), str(path), *fragments)
    assert snapshot() == seeded


def test_unreadable_file_is_refused(seeded, tmp_path):
    latin = tmp_path / "latin.json"
    latin.write_bytes(_TEXT.replace('"AMD"', '"AMD\xe9"').encode("latin-1"))
    missing = tmp_path / "missing.json"
    with open_kb() as kb:
        with pytest.raises(RecordError, match=r"latin\.json: cannot read file as UTF-8"):
            kb.ingest([latin])
        with pytest.raises(RecordError, match=r"missing\.json: cannot read file"):
            kb.ingest([missing])
    assert_one_line_error(luma("kb", "ingest", missing), str(missing))
    assert snapshot() == seeded


def test_file_over_the_size_limit_is_refused(seeded, monkeypatch):
    size = VALID_YAML.stat().st_size
    assert VALID_JSON.stat().st_size < size
    monkeypatch.setenv("LUMA_MAX_RECORD_FILE_BYTES", str(size - 1))
    with open_kb() as kb, pytest.raises(RecordError) as caught:
        kb.ingest([VALID_JSON, VALID_YAML])  # the JSON twin is smaller and passes the check
    assert caught.value.source == str(VALID_YAML) and "over the limit" in str(caught.value)
    assert_one_line_error(luma("kb", "ingest", VALID_YAML), str(VALID_YAML), f"over the limit of {size - 1} bytes")
    monkeypatch.setenv("LUMA_MAX_RECORD_FILE_BYTES", "lots")
    with pytest.raises(ConfigError, match="LUMA_MAX_RECORD_FILE_BYTES"):
        open_kb()  # read once, with the rest of the settings
    assert_one_line_error(luma("kb", "ingest", VALID_JSON), "LUMA_MAX_RECORD_FILE_BYTES")
    monkeypatch.delenv("LUMA_MAX_RECORD_FILE_BYTES")
    assert snapshot() == seeded


def test_broken_turtle_is_refused_whole(seeded, tmp_path):
    bad = tmp_path / "broken.ttl"
    # The first triple is fine; rdflib would keep it, the KB must not.
    bad.write_bytes(TURTLE_WITH_BNODE + b"ex:rack2 ex:holds ex:thing\nex:rack3 ex:label .\n")
    with open_kb() as kb, pytest.raises(RdfSyntaxError) as caught:
        kb.load_rdf(bad, "turtle", "simulated")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{bad}: invalid turtle") and "line" in message
    assert_one_line_error(luma("kb", "load", bad, "--evidence-class", "simulated"), str(bad), "invalid turtle")
    assert snapshot() == seeded


def test_remote_jsonld_context_is_not_fetched(seeded, tmp_path):
    doc = tmp_path / "remote.jsonld"
    doc.write_text(json.dumps({"@context": "http://127.0.0.1:9/context.jsonld", "@id": "http://example.org/a", "name": "x"}))
    with open_kb() as kb, pytest.raises(RdfSyntaxError, match=r"remote\.jsonld"):
        kb.load_rdf(doc, "jsonld", "simulated")
    assert snapshot() == seeded


def test_plain_rdf_is_never_measured_and_never_empty(seeded, tmp_path):
    """`{"hello": 1}` loaded as measured "loaded 8 quads" and left a permanent measured record."""
    hello = tmp_path / "h.json"
    hello.write_text('{"hello": 1}')
    result = luma("kb", "load", hello, "--evidence-class", "measured")
    assert result.exit_code == 2 and "'measured' is not one of" in result.stderr
    with open_kb() as kb, pytest.raises(RecordError, match="cannot be 'measured' evidence"):
        kb.load_rdf(hello, "jsonld", "measured")
    assert_one_line_error(luma("kb", "load", hello, "--evidence-class", "vendor-claim"), str(hello),
                          "holds no RDF triple (JSON-LD needs an @context")
    empty = tmp_path / "empty.ttl"
    empty.write_text("@prefix ex: <http://example.org/> .\n# nothing but a prefix\n")
    assert_one_line_error(luma("kb", "load", empty, "--evidence-class", "simulated"), str(empty), "holds no RDF triple")
    assert snapshot() == seeded


def test_one_bad_file_among_good_ones_writes_nothing(seeded, seeded_key, evidence, tmp_path):
    good = [write_jsonl(tmp_path / f"good-{i}.jsonl", 5, seed=100 + i) for i in range(3)]
    # A new measured chain, as YAML: four repetitions, with the trials and signature to show for it.
    fresh = evidence.write_signed(seeded_key, tmp_path / "fresh.yaml",
                                  evidence.with_trials({**valid_record(), "repetitions": 4}))
    bad_lines = (tmp_path / "good-0.jsonl").read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"  # five valid lines, then a unit that does not fit
    fifth = json.loads(bad_lines[4])
    next(iter(fifth["pass_state"]["dimensions"].values()))["unit"] = "GHz"  # no dimension is in GHz
    mixed.write_text("\n".join(bad_lines[:4] + [json.dumps(fifth)]) + "\n")
    bad = tmp_path / "last.json"
    bad.write_text(_with("fail_state.dimensions.compute.value", -2))
    for batch, culprit in (([*good, fresh, bad], bad), ([good[1], mixed], mixed)):
        with open_kb() as kb, pytest.raises(RecordError) as caught:
            kb.ingest(batch)
        assert str(caught.value).startswith(str(culprit))
        assert snapshot() == seeded
    assert "line 5" in str(caught.value)
    assert_one_line_error(luma("kb", "ingest", *good, fresh, bad), str(bad), "must not be negative")
    assert snapshot() == seeded


# -- CLI errors ------------------------------------------------------------------------------------


def test_usage_errors_exit_2(seeded, tmp_path):
    assert luma("kb", "ingest").exit_code == 2
    assert luma("kb", "ingest", tmp_path).exit_code == 2  # a directory
    assert luma("kb", "ingest", VALID_JSON, "--format", "xml").exit_code == 2
    assert luma("kb", "query").exit_code == 2
    assert luma("kb", "query", "ASK {}", "--name", "qualified-boundaries").exit_code == 2
    assert luma("kb", "query", "ASK {}", "--timeout", "0").exit_code == 2
    assert luma("kb", "load", VALID_JSON).exit_code == 2  # no --evidence-class
    odd = tmp_path / "facts.rdfx"
    odd.write_bytes(TURTLE_WITH_BNODE)
    result = luma("kb", "load", odd, "--evidence-class", "simulated")
    assert result.exit_code == 2 and "--rdf-format" in result.stderr
    assert luma("kb", "export", "--format", "rdfxml").exit_code == 2
    assert luma("kb", "frobnicate").exit_code == 2
    assert snapshot() == seeded

RDF_DOCS = {
    "facts.ttl": TURTLE_WITH_BNODE,
    "facts.nt": b'<http://example.org/a> <http://example.org/p> "nt" .\n_:b1 <http://example.org/q> <http://example.org/a> .\n',
    "facts.nq": b'<http://example.org/a> <http://example.org/p> "nq" <http://example.org/g1> .\n'
                b'<http://example.org/a> <http://example.org/p> "nq2" .\n',
    "facts.trig": b'@prefix ex: <http://example.org/> .\nex:g2 { ex:a ex:p "trig" ; ex:q [ ex:r 1 ] }\n',
    "facts.jsonld": json.dumps({"@context": {"ex": "http://example.org/"}, "@id": "ex:a", "ex:p": "jsonld",
                                "ex:q": {"ex:r": 2}}).encode(),
}


@pytest.mark.parametrize("name", list(RDF_DOCS))
def test_load_each_rdf_syntax_once(name, seeded, tmp_path):
    path = tmp_path / name
    path.write_bytes(RDF_DOCS[name])
    first = luma("kb", "load", path, "--evidence-class", "vendor-claim")
    assert first.exit_code == 0, first.output
    assert "loaded" in first.stdout and ID + "record/" in first.stdout
    after = snapshot()
    assert after[0] == seeded[0] + 1 and after[1] > seeded[1]
    again = luma("kb", "load", path, "--evidence-class", "vendor-claim")
    assert again.exit_code == 0 and "already loaded" in again.stdout
    assert snapshot() == after
    with open_kb() as kb:
        subject = "http://example.org/rack1" if name == "facts.ttl" else "http://example.org/a"
        assert kb.store.select(f"SELECT ?p WHERE {{ <{subject}> ?p ?o }}")
        assert not kb.store.select(  # blank nodes are skolemised into the record's graph
            f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(STRSTARTS(STR(?g), "{ID}record/")) '
            "FILTER(isBlank(?s) || isBlank(?o)) } LIMIT 1", union=False)


# -- the qualification query -----------------------------------------------------------------------


def _chain(name: str, **changes) -> dict:
    """The valid chain under another workload name, with top-level keys replaced."""
    rec = {**valid_record(), **changes}
    rec["workload"] = {**rec["workload"], "name": name}
    return rec


def _levels(compute: float, mem: float, unit: str = "GiB", **more) -> dict:
    return {"dimensions": {"compute": {"value": compute, "unit": "core"}, "host_memory": {"value": mem, "unit": unit}, **more}}


@pytest.mark.slow
def test_qualified_boundaries_selects_exactly_the_qualified_chains(runner_key, evidence, tmp_path):
    on_compute = {"crossed_dimension": "compute", "binding_resource": "compute"}
    changes = {  # name: (qualified?, changes to the valid chain, which crosses host_memory 1.5 -> 1 GiB)
        "qualified": (True, {}),
        "qualified-many-repetitions": (True, {"repetitions": 6}),
        # host_memory is not crossed here, and 1 GiB == 1024 MiB: the states differ only in compute
        "qualified-other-units": (True, {**on_compute, "pass_state": _levels(4, 1), "fail_state": _levels(2, 1024, "MiB")}),
        "other-units-not-equal": (False, {**on_compute, "pass_state": _levels(4, 1), "fail_state": _levels(2, 1000, "MiB")}),
        "simulated": (False, {"evidence_class": "simulated"}),
        "vendor-claim": (False, {"evidence_class": "vendor-claim"}),
        "not-recovered": (False, {"recovered": False}),
        "two-repetitions": (False, {"repetitions": 2}),
        "second-dimension-changed": (False, {"fail_state": _levels(1, 1)}),
        "extra-dimension-in-fail": (False, {"fail_state": _levels(2, 1, power={"value": 300, "unit": "W"})}),
    }
    # Each variant is evidence of what it says: trials that bear out its repetitions and
    # recovery, signed by the project's runner key. Only the query's own criteria tell them apart.
    variants = {name: (ok, evidence.with_trials(_chain(name, **change))) for name, (ok, change) in changes.items()}
    files = [evidence.write_signed(runner_key, tmp_path / f"{name}.json", rec) for name, (_, rec) in variants.items()]
    with open_kb() as kb:
        report = kb.ingest(files)
        Engine(kb).run()
    assert len(report.added) == len(variants)
    chain_of = {Path(r.source).stem: ID + "chain/" + r.content_hash[:32] for r in report.added}
    expected = {chain_of[name] for name, (ok, _) in variants.items() if ok}
    rows = sparql_json(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))["results"]["bindings"]
    assert sorted(r["chain"]["value"] for r in rows) == sorted(expected)  # each exactly once
    by_chain = {r["chain"]["value"]: r for r in rows}
    for name, (ok, _) in variants.items():
        if ok:  # the workload is named by its label or by its (slugged) IRI
            assert name in by_chain[chain_of[name]]["workload"]["value"]
    units = by_chain[chain_of["qualified-other-units"]]
    assert units["crossed"]["value"].endswith("compute")  # the record key or the dimension IRI
    assert float(units["passLevel"]["value"]) == 4.0 and float(units["failLevel"]["value"]) == 2.0
    assert float(by_chain[chain_of["qualified"]]["passLevel"]["value"]) == 1.5 * 2**30
    assert by_chain[chain_of["qualified-many-repetitions"]]["repetitions"]["value"] == "6"



@pytest.mark.parametrize("cls", ["HardwareRequirement", "QualifiedBoundary", "RecurringBinding", "StaleBoundary"])
def test_plain_rdf_cannot_assert_a_class_only_rules_derive(cls, seeded, tmp_path):
    """A vendor-claim document typing a node luma:HardwareRequirement was loaded, and the
    hardware-requirements query and the Design-In report (which read the union of graphs) showed
    it as a requirement from measured evidence. Such a document is refused whole, naming the
    triple; the same document without the derived type still loads."""
    doc = tmp_path / "forged.ttl"
    body = ("<https://example.org/forged> luma:note \"a vendor's figure\" ;\n"
            "  <https://example.org/about> <https://w3id.org/luma/dim/compute> .\n")
    doc.write_text(f"@prefix luma: <{LUMA}> .\n<https://example.org/forged> a luma:{cls} .\n" + body)
    with open_kb() as kb, pytest.raises(RecordError, match="a class only rules derive"):
        kb.load_rdf(doc, "turtle", "vendor-claim")
    assert_one_line_error(luma("kb", "load", doc, "--evidence-class", "vendor-claim"), str(doc),
                          f"it types a node <{LUMA}{cls}>, a class only rules derive")
    assert snapshot() == seeded
    doc.write_text(f"@prefix luma: <{LUMA}> .\n" + body)
    assert luma("kb", "load", doc, "--evidence-class", "vendor-claim").exit_code == 0

@pytest.mark.slow
def test_plain_rdf_cannot_forge_a_measured_boundary(signed, tmp_path):
    """DESIGN §8: a plain RDF document loaded as vendor-claim must not turn into measured evidence."""
    forged = tmp_path / "forged.ttl"
    forged.write_text(
        f"@prefix luma: <{LUMA}> .\n"
        f"<{ID}chain/forged> luma:evidenceClass luma:Measured ; luma:recovered true ; luma:repetitions 9 ;\n"
        '  luma:passContext "same" ; luma:failContext "same" ;\n'
        "  luma:crossedDimension <https://w3id.org/luma/dim/host_memory> ;\n"
        "  luma:bindingResource <https://w3id.org/luma/dim/host_memory> ;\n"
        "  luma:workload <urn:x:w> ; luma:architecture <urn:x:a> ; luma:intervention <urn:x:i> .\n"
    )
    with open_kb() as kb:
        genuine = kb.ingest([signed(VALID_JSON)]).added[0].content_hash
        with contextlib.suppress(RecordError):  # refusing such a document outright is fine too
            kb.load_rdf(forged, "turtle", "vendor-claim")
        Engine(kb).run()
    rows = sparql_json(luma("kb", "query", "--name", "qualified-boundaries", "--format", "json"))["results"]["bindings"]
    assert {r["chain"]["value"] for r in rows} == {ID + "chain/" + genuine[:32]}
