"""`luma import mlperf-results` driven as a user does: the shipped sample, a clone-shaped copy,
--no-ingest --out, the formats, and the one-line refusals."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.imports import mlperf_results

SAMPLE = mlperf_results.sample_path()


def _run(*args):
    return CliRunner().invoke(cli, list(args))


def test_the_sample_is_imported_and_its_machines_are_known(luma_home):
    systems = len(list(SAMPLE.glob("*/*/systems/*.json")))
    out = _run("import", "mlperf-results", str(SAMPLE), "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert len(doc["machines"]) == systems and doc["added"] == systems + len(doc["results"])
    assert doc["round"] == "v4.1" and all(r["round"] == "v4.1" for r in doc["results"])
    shown = _run("machine", "show", "nvidia-b200-sxm-180gb")
    assert shown.exit_code == 0 and "180 GB" in shown.output
    short = _run("machine", "show", "B200")  # a short name resolves to the catalog entry
    assert short.exit_code == 0 and "nvidia-b200-sxm-180gb" in short.output
    imported = next(m for m in doc["machines"] if "mi300x" in m)
    assert _run("machine", "show", imported).exit_code == 0
    listed = _run("machine", "list", "--format", "json")
    assert set(doc["machines"]) <= {m["name"] for m in json.loads(listed.stdout)}


def test_no_ingest_writes_the_records_and_leaves_the_project_alone(luma_home, tmp_path):
    out_file = tmp_path / "mlperf.jsonl"
    out = _run("import", "mlperf-results", "--sample", "--no-ingest", "--out", str(out_file), "--format", "csv")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert rows and {r["scenario"] for r in rows} == {"Server", "Offline"}
    kinds = [json.loads(line)["record_type"] for line in out_file.read_text().splitlines()]
    assert kinds.count("machine") == len(list(SAMPLE.glob("*/*/systems/*.json")))
    assert {json.loads(line)["evidence_class"] for line in out_file.read_text().splitlines()} == {"vendor-claim"}
    assert not any(luma_home.iterdir())  # nothing made in the project
    ingested = _run("kb", "ingest", str(out_file))
    assert ingested.exit_code == 0, ingested.output


def test_refusals_are_one_line(luma_home, tmp_path):
    bad = _run("import", "mlperf-results", str(tmp_path))
    assert bad.exit_code == 1 and bad.output.count("\n") == 1
    assert bad.output.startswith("Error:") and "systems/<system>.json" in bad.output
    assert _run("import", "mlperf-results").exit_code == 2  # neither PATH nor --sample
    assert _run("import", "mlperf-results", "--sample", "--no-ingest").exit_code == 2
    assert _run("import", "mlperf-results", "--sample", "--round", "five").exit_code == 1
