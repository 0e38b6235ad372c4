"""`luma kb query --format table` for people (issue 15, item 18): levels in human units
(`1.5 GiB`, not `1610612736 unit:BYTE`), short IRIs, and a table that fits an 80–120 column
terminal (one block per row when a table would not); json and csv stay canonical."""

from __future__ import annotations

import copy
import csv
import io
import json
import pytest
from pathlib import Path

from click.testing import CliRunner

from luma.cli.main import cli
from luma.cli.sparql_table import cells, fit, print_table

ROOT = Path(__file__).resolve().parents[2]
XSD = "http://www.w3.org/2001/XMLSchema#"
ID = "https://w3id.org/luma/id/"


def _uri(v):
    return {"type": "uri", "value": v}


def _lit(v, t=None):
    return {"type": "literal", "value": str(v), **({"datatype": XSD + t} if t else {})}


def _answer(rows: int = 3) -> dict:
    """A qualified-boundaries answer as the store gives it, with the long names synthetic data has."""
    head = ["chain", "workload", "architecture", "crossed", "binding", "intervention", "passLevel", "failLevel",
            "unit", "repetitions", "runner"]
    bindings = []
    for i in range(rows):
        bindings.append({
            "chain": _uri(f"{ID}chain/{i:02d}e34cb7bcb7737130af3bd108eee0ad"),
            "workload": _uri(f"{ID}workload/workload-{i:03d}-4424e8cc"),
            "architecture": _uri(f"{ID}architecture/Intel-Xeon-8480-Sapphire-Rapids-a4207cd0-72ee658c"),
            "crossed": _uri("https://w3id.org/luma/dim/host_memory"),
            "binding": _uri("https://w3id.org/luma/dim/host_memory"),
            "intervention": _uri(f"{ID}intervention/int8-dynamic-activations-b67fcb95"),
            "passLevel": _lit(1610612736.0 * (i + 1), "double"), "failLevel": _lit(1073741824.0, "double"),
            "unit": _uri("http://qudt.org/vocab/unit/BYTE"), "repetitions": _lit(3, "integer"),
            "runner": _uri(f"{ID}runner/700478ce1ca3083686df8e621d67177b")})
    return {"head": {"vars": head}, "results": {"bindings": bindings}}


def _printed(capsys, answer, width) -> list[str]:
    print_table(answer, width=width)
    return capsys.readouterr().out.splitlines()


def test_levels_read_in_human_units_and_the_unit_column_is_folded_in():
    columns, rows = cells(_answer(2))
    assert "unit" not in columns
    pass_level = columns.index("passLevel")
    assert [r[pass_level].text for r in rows] == ["1.5 GiB", "3 GiB"]
    assert rows[0][columns.index("crossed")].text == "host_memory"
    assert rows[0][columns.index("chain")].text == "00e34cb7…"  # the column already says "chain"
    assert rows[0][columns.index("runner")].text == "700478ce…"
    assert rows[0][columns.index("workload")].text == "workload-000"
    assert rows[0][columns.index("repetitions")].text == "3"


def test_the_table_fits_120_columns_and_80_columns(capsys):
    for width in (80, 100, 120, 160):
        lines = _printed(capsys, _answer(), width)
        assert max(len(line.rstrip()) for line in lines) <= width, width
        text = "\n".join(lines)
        assert "1.5 GiB" in text and "3 rows" in text
        if width >= 120:  # a real table: one line per row, the header on top
            assert "1610612736" not in text and "unit:BYTE" not in text
            assert sum("1.5 GiB" in line for line in lines) == 1
        else:  # one block per row, the canonical value beside the human one
            assert "-[ row 1 ]" in text and "1.5 GiB (1610612736.0 unit:BYTE)" in text


def test_a_unit_column_that_is_not_all_absorbed_stays():
    answer = _answer(2)
    answer["results"]["bindings"][1].pop("passLevel")
    answer["results"]["bindings"][1].pop("failLevel")
    columns, rows = cells(answer)
    assert "unit" in columns
    assert rows[0][columns.index("passLevel")].text == "1.5 GiB"


def test_a_frontier_shift_reads_in_human_units():
    head = ["dimension", "before", "after", "unit", "absoluteChange", "relativeChange"]
    row = {"dimension": _lit("host_memory"), "before": _lit(117440512, "decimal"), "after": _lit(100663296, "decimal"),
           "unit": _uri("http://qudt.org/vocab/unit/BYTE"), "absoluteChange": _lit(-16777216, "decimal"),
           "relativeChange": _lit(-0.142857, "decimal")}
    for unit in (row["unit"], _lit("BYTE")):  # the IRI, or its name as frontier-shifts gives it
        shown, rows = cells({"head": {"vars": head}, "results": {"bindings": [{**row, "unit": unit}]}})
        assert shown == ["dimension", "before", "after", "absoluteChange", "relativeChange"]
        assert [c.text for c in rows[0]] == ["host_memory", "112 MiB", "96 MiB", "-16 MiB", "-0.1429"]


def test_fitting_wraps_headers_before_it_folds_values():
    # natural widths from long headers, values narrow: the headers give way first
    assert fit([9, 9, 15], [5, 5, 15], [5, 5, 12], 38) == [9, 9, 15]  # 2 columns between cells
    assert fit([9, 9, 15], [5, 5, 15], [5, 5, 12], 34) == [5, 9, 15]
    assert fit([9, 9, 15], [5, 5, 15], [5, 5, 12], 27) == [5, 5, 12]  # then the widest text folds
    assert fit([9, 9, 15], [5, 5, 15], [5, 5, 12], 26) is None


@pytest.mark.slow
def test_the_cli_table_is_human_and_csv_json_stay_canonical(luma_home, runner_key, evidence, tmp_path):
    doc = json.loads((ROOT / "kb" / "examples" / "embedding-minilm.json").read_text())
    doc = evidence.with_trials({**copy.deepcopy(doc), "evidence_class": "measured", "repetitions": 3})
    path = evidence.write_signed(runner_key, tmp_path / "chain.json", doc)
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "ingest", str(path)]).exit_code == 0
    assert runner.invoke(cli, ["rules", "run"]).exit_code == 0  # the named query reads what the rules derive
    for width in ("80", "120"):
        result = runner.invoke(cli, ["kb", "query", "--name", "qualified-boundaries"], env={"COLUMNS": width})
        assert result.exit_code == 0, result.output
        assert max(len(line.rstrip()) for line in result.output.splitlines()) <= int(width)
        assert "1.5 GiB" in result.output and "1 GiB" in result.output
    table = runner.invoke(cli, ["kb", "query", "--name", "qualified-boundaries"], env={"COLUMNS": "200"}).output
    assert "1610612736" not in table and "one block per row" not in table  # a table: human units only
    out = runner.invoke(cli, ["kb", "query", "--name", "qualified-boundaries", "--format", "csv"]).output
    row = next(csv.DictReader(io.StringIO(out)))
    assert float(row["passLevel"]) == 1610612736 and row["unit"] == "http://qudt.org/vocab/unit/BYTE"
    out = json.loads(runner.invoke(cli, ["kb", "query", "--name", "qualified-boundaries", "--format", "json"]).stdout)
    assert float(out["results"]["bindings"][0]["passLevel"]["value"]) == 1610612736
