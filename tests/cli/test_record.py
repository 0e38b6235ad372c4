"""`luma record template KIND`: the skeleton of every kind is accepted by `luma kb ingest` on the
first try in a fresh project (signed by the project's runner key where it is measured), and so is
a pex-chain template a user edited by hand."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from luma.cli.main import cli
from luma.cli.record import TEMPLATE_KINDS
from luma.kb.records.template_examples import example

MEASURED = [k for k in TEMPLATE_KINDS if example(k)["evidence_class"] == "measured"]


def run(*args, ok: bool = True):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def ingested(home) -> dict:
    rows = json.loads(run("kb", "query", "--format", "json",
                          "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g").stdout)["results"]["bindings"]
    return rows


@pytest.fixture
def project(luma_home):
    run("runner", "keygen", "--name", "lab")
    return luma_home


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_every_template_is_ingested_on_the_first_try(project, tmp_path, fmt):
    files = []
    for kind in TEMPLATE_KINDS:
        out = tmp_path / f"{kind}.{fmt}"
        run("record", "template", kind, "--format", fmt, "--out", out)
        files.append(out)
    run("runner", "sign", *[f for f, k in zip(files, TEMPLATE_KINDS) if k in MEASURED])
    for f in files:
        result = run("kb", "ingest", "--format", "json", f)
        assert json.loads(result.stdout)["added"] == 1, f
    assert {"pex-chain", "pex-trial"} <= set(MEASURED)


def test_a_pex_template_unsigned_is_accepted_as_vendor_claim(project, tmp_path):
    for kind in ("pex-chain", "pex-trial"):
        text = run("record", "template", kind).stdout.replace("evidence_class: measured", "evidence_class: vendor-claim")
        (tmp_path / f"{kind}.yaml").write_text(text)
        assert json.loads(run("kb", "ingest", "--format", "json", tmp_path / f"{kind}.yaml").stdout)["added"] == 1


def test_a_hand_edited_pex_chain_template_is_accepted_on_the_first_ingest(project, tmp_path):
    doc = yaml.safe_load(run("record", "template", "pex-chain").stdout)
    # What a lab changes: its own names, levels, threshold (in another unit) and figures.
    doc["workload"] = {"name": "support-bot", "model": "qwen2.5-7b-instruct", "task": "generation"}
    doc["architecture"] = {"name": "Intel Xeon Platinum 8480+", "kind": "cpu", "vendor": "Intel"}
    doc["contract"]["name"] = "support-ttft"
    doc["contract"]["clauses"][0].update(value=0.8, unit="s")
    doc["pass_state"]["dimensions"]["compute"]["value"] = 16
    doc["fail_state"]["dimensions"]["compute"]["value"] = 12
    doc["provenance"] = {"tool": "our benchmark harness 2.3", "host": "xeon-07"}
    for trial in doc["trials"]:
        for obs in trial["observations"]:
            if obs["metric"].startswith("p95_ttft") and obs["unit"] == "ms":
                obs.update(value=obs["value"] * 1.6 / 1000, unit="s")  # 640 ms -> 1.024 s
            if obs["metric"] == "p95_ttft.samples":
                obs["value"] = 400
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run("runner", "sign", path)
    result = run("kb", "ingest", "--format", "json", path)
    assert json.loads(result.stdout)["records"][0]["evidence_class"] == "measured"


def test_a_template_never_overwrites_a_file(project, tmp_path):
    out = tmp_path / "mine.yaml"
    out.write_text("my record")
    result = run("record", "template", "machine", "--out", out, ok=False)
    assert result.exit_code == 2 and out.read_text() == "my record"
