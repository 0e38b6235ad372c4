"""The ingest's own IRI check (kb/ingest/nquads.py IriCheck): what it passes, Oxigraph's strict
N-Quads parser reads as the very same IRI, so the load may skip the parser's own check; a record
that projects to an invalid IRI is refused before anything loads."""

from __future__ import annotations

import json

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import RecordError
from luma.kb.ingest import nquads as nq
from luma.kb.ingest import write
from luma.kb.records.synthetic import write_jsonl
from luma.kb.vocab import XSD

from tests.kb.projects import assert_one_line_error, luma, snapshot

G = "https://w3id.org/luma/id/record/0123"
P = "https://w3id.org/luma/ns#p"


def strict(line: str) -> list[ox.Quad] | None:
    """The quads Oxigraph's validating N-Quads parser reads from `line`, None where it refuses it."""
    try:
        return list(ox.parse(line.encode(), format=ox.RdfFormat.N_QUADS))
    except (SyntaxError, ValueError):
        return None


@pytest.mark.parametrize("bad", [
    "https://w3id.org/luma/id/a b",  # a space
    "relative/path",  # no scheme
    "https://w3id.org/%zz",  # a broken percent escape
    'https://w3id.org/a"b',  # a quote
    "https://w3id.org/a\nb",  # a line break
    "https://w3id.org/a{b}",
    "https://w3id.org/a\\u0041",  # an escape the parser would decode: refused, never rewritten
    "",
])
def test_an_invalid_iri_is_found_wherever_it_stands(bad):
    ok = "https://w3id.org/luma/id/x"
    for graph, triple in [
        (bad, (ok, P, nq.string("v"))),
        (G, (bad, P, nq.string("v"))),
        (G, (ok, bad, nq.string("v"))),
        (G, (ok, P, nq.iri(bad))),
        (G, (ok, P, f'"1"^^<{bad}>')),
    ]:
        assert nq.IriCheck().first_invalid(graph, [triple]) == bad


def test_the_terms_the_projection_writes_pass():
    check = nq.IriCheck()
    triples = [
        ("https://w3id.org/luma/id/level/host_memory/8.0-8-MiB", P, nq.double(8.0)),
        ("https://w3id.org/luma/id/x", P, nq.integer(3)),
        ("https://w3id.org/luma/id/x", P, nq.boolean(True)),
        ("https://w3id.org/luma/id/x", P, nq.string('a "quoted" \\ line\nbreak <not an iri>')),
        ("https://w3id.org/luma/id/x", P, '"x"@en-GB'),
        ("urn:uuid:1234", P, nq.iri("https://w3id.org/luma/ns#Thing")),
    ]
    assert check.first_invalid(G, triples) is None
    lines = "".join(f"<{s}> <{p}> {o} <{G}> .\n" for s, p, o in triples)
    assert strict(lines) is not None  # and the strict parser agrees
    assert f"{XSD}double" in lines


def test_an_iri_is_checked_once_per_chunk_and_forgotten_after():
    check = nq.IriCheck()
    assert check.first_invalid(G, [("https://w3id.org/a", P, nq.iri("https://w3id.org/b"))]) is None
    assert len(check._ok) == 4
    check.clear()
    assert not check._ok


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30),
       st.sampled_from(["https://w3id.org/luma/id/", "urn:x:", "http://[::1]/", "https://h:80/", ""]))
def test_what_the_check_passes_the_strict_parser_reads_as_the_same_iri(tail, head):
    value = head + tail
    if nq.IriCheck().first_invalid(G, [(value, P, nq.iri(value))]) is not None:
        return
    quads = strict(f"<{value}> <{P}> {nq.iri(value)} <{G}> .\n")
    assert quads is not None and len(quads) == 1, value
    assert quads[0].subject.value == value and quads[0].object.value == value


def test_a_record_that_projects_to_an_invalid_iri_is_refused_and_nothing_changes(luma_home, tmp_path, monkeypatch):
    batch = write_jsonl(tmp_path / "batch.jsonl", 3)
    before = snapshot()
    real = write.project

    def broken(model, meta, dims, batch):
        w = real(model, meta, dims, batch)
        w.add(w.graph, P, nq.iri("https://w3id.org/luma/id/a b"))  # what a slug bug would write
        return w

    monkeypatch.setattr(write, "project", broken)
    result = luma("kb", "ingest", batch)
    assert_one_line_error(result, "invalid IRI 'https://w3id.org/luma/id/a b'", "nothing was loaded")
    assert snapshot() == before


def test_an_ingest_loads_the_same_quads_as_the_validating_parser_reads(luma_home, tmp_path):
    batch = write_jsonl(tmp_path / "batch.jsonl", 20)
    result = luma("kb", "ingest", "--format", "json", batch)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 20
    dump = snapshot()[2]
    store = ox.Store()
    store.bulk_load(dump, ox.RdfFormat.N_QUADS)  # strict: every IRI the lenient load took is valid
    assert len(store) == dump.count(b"\n")


@pytest.mark.parametrize("bad", ["", "no-scheme"])
def test_the_write_path_refuses_an_empty_or_relative_iri(bad):
    w = nq.QuadWriter(G, "https://w3id.org/luma/id/entities")
    w.add(bad, P, nq.string("v"))
    with pytest.raises(RecordError, match="invalid IRI"):
        write._check_iris(nq.IriCheck(), w, "x.jsonl: line 1")
