"""`--format csv` is safe to open in a spreadsheet (issue 28, item 8): a text cell starting with
`=`, `+`, `-`, `@`, tab or CR gets a leading `'` (OWASP's advice against CSV injection), numbers
stay numbers (by type: a Python number, an XSD numeric literal), and `--raw` — offered wherever
csv is — writes the cells as they are (`luma kb query --format csv --raw`: W3C SPARQL CSV, byte
for byte)."""

from __future__ import annotations

import csv
import io
import shutil
from decimal import Decimal
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.cli.output import format_option, print_rows
from luma.cli.spreadsheet_csv import escape_text

ROOT = Path(__file__).resolve().parents[2]
TEXT = {"eq": "=1+1", "plus": "+cmd", "minus": "-x", "at": "@SUM(A1)", "tab": "\t=1+1", "cr": "\r=1+1",
        "plain": "embed-minilm", "quoted": 'a, "b"'}
NUMBERS = {"float": -3.5, "int": -2, "decimal": Decimal("-1.25"), "flag": True, "none": None}


@click.command()
@format_option()
def _rows(fmt):
    print_rows([{**TEXT, **NUMBERS}], [*TEXT, *NUMBERS], fmt)


def _read(data: bytes) -> dict:
    return next(csv.DictReader(io.StringIO(data.decode(), newline="")))


def test_text_cells_that_would_start_a_formula_are_escaped_numbers_are_not():
    result = CliRunner().invoke(_rows, ["--format", "csv"])
    assert result.exit_code == 0, result.output
    row = _read(result.stdout_bytes)
    assert {k: row[k] for k in TEXT} == {k: "'" + v if k not in ("plain", "quoted") else v for k, v in TEXT.items()}
    assert (row["float"], row["int"], row["decimal"], row["flag"], row["none"]) == ("-3.5", "-2", "-1.25", "True", "")


def test_raw_writes_every_cell_as_it_is():
    result = CliRunner().invoke(_rows, ["--format", "csv", "--raw"])
    assert result.exit_code == 0, result.output
    row = _read(result.stdout_bytes)
    assert {k: row[k] for k in TEXT} == TEXT and row["float"] == "-3.5"


@pytest.mark.parametrize("value, shown", [("=1+1", "'=1+1"), ("-x", "'-x"), ("x=1", "x=1"), ("", ""),
                                          (" =1", " =1"), ("'=1", "'=1")])
def test_escape_text(value, shown):
    assert escape_text(value) == shown


def test_a_non_finite_number_is_text():
    from luma.cli.spreadsheet_csv import cell

    assert cell(float("-inf")) == "'-inf" and cell(float("nan")) == "nan" and cell(-0.5) == -0.5


def _commands(group: click.Group, path=()):
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_raw_is_offered_exactly_where_csv_is():
    offered = 0
    for path, cmd in _commands(cli):
        fmt = next((p for p in cmd.params if p.name == "fmt" and isinstance(p.type, click.Choice)), None)
        has_raw = any(p.name == "raw" for p in cmd.params)
        if fmt is not None and "table" in fmt.type.choices:
            assert has_raw == ("csv" in fmt.type.choices), " ".join(path)
            offered += has_raw
    assert offered >= 10


# -- through real commands --------------------------------------------------------------------

_XSD = "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> "
_QUERY = _XSD + """SELECT ?name ?value WHERE { VALUES (?name ?value) {
    ("=1+1" "-3.5"^^xsd:decimal) ("+cmd" -2) ("-x" "@SUM(A1)") ("\\t=1+1" 1.5e3) ("plain, text" UNDEF)
    (<https://example.org/w> "=HYPERLINK(1)"^^xsd:integer) ("-INF" "-INF"^^xsd:double) } }"""


@pytest.fixture
def project(luma_home):
    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    return luma_home


def test_kb_query_csv_escapes_text_and_keeps_numeric_literals(project):
    result = CliRunner().invoke(cli, ["kb", "query", _QUERY, "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.decode() == ("name,value\r\n'=1+1,-3.5\r\n'+cmd,-2\r\n'-x,'@SUM(A1)\r\n'\t=1+1,1500\r\n"
                             '"plain, text",\r\nhttps://example.org/w,\'=HYPERLINK(1)\r\n\'-INF,\'-INF\r\n')


def test_kb_query_csv_raw_is_the_w3c_format_byte_for_byte(project):
    import pyoxigraph as ox

    result = CliRunner().invoke(cli, ["kb", "query", _QUERY, "--format", "csv", "--raw"])
    assert result.exit_code == 0, result.output
    w3c = ox.Store().query(_QUERY).serialize(format=ox.QueryResultsFormat.CSV)
    assert result.stdout_bytes == w3c
    # An answer with nothing to escape is the same either way.
    plain = _XSD + 'SELECT ?a ?b WHERE { VALUES (?a ?b) { ("x" 1) (<https://example.org/y> "-1"^^xsd:integer) } }'
    people, raw = (CliRunner().invoke(cli, ["kb", "query", plain, "--format", "csv", *extra]).stdout_bytes
                   for extra in ((), ("--raw",)))
    assert people == raw == b"a,b\r\nx,1\r\nhttps://example.org/y,-1\r\n"


def test_kb_query_csv_of_an_ask(project):
    for extra in ((), ("--raw",)):
        assert CliRunner().invoke(cli, ["kb", "query", "ASK {}", "--format", "csv", *extra]).stdout_bytes == b"true\n"


def test_a_record_files_name_is_escaped_in_kb_ingest_csv(project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "kb" / "examples" / "embedding-minilm.json", tmp_path / "=HYPERLINK(1).json")
    out = CliRunner().invoke(cli, ["kb", "ingest", "=HYPERLINK(1).json", "--format", "csv"])
    assert out.exit_code == 0, out.output
    assert _read(out.stdout_bytes)["source"] == "'=HYPERLINK(1).json"
    again = CliRunner().invoke(cli, ["kb", "ingest", "=HYPERLINK(1).json", "--format", "csv", "--raw"])
    assert _read(again.stdout_bytes)["source"] == "=HYPERLINK(1).json"


def test_the_help_says_which_csv_is_which():
    text = CliRunner().invoke(cli, ["kb", "query", "--help"]).output
    assert "W3C SPARQL 1.1 Query Results JSON" in text and "csv --raw" in text and "W3C SPARQL 1.1 CSV" in text
    assert "--raw" in CliRunner().invoke(cli, ["machine", "list", "--help"]).output
