"""Ingest names every problem of a record in one run (issue 30 item 5): the validation errors of
every field, and for a measured record the missing signature beside each trial's missing
observations and the chain's counts, one problem each; the ledger stays as it was."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RecordError
from luma.kb.ingest.consistency import check_measured
from luma.kb.records.loader import validate_document
from luma.kb.records.template_examples import example


def without(doc: dict, *metrics: str) -> dict:
    for trial in doc.get("trials", [doc]):
        trial["observations"] = [o for o in trial["observations"] if o["metric"] not in metrics]
    return doc


def test_a_chain_without_samples_or_bounds_names_each_trial_and_both_bounds():
    rec = validate_document(without(example("pex-chain"), "p95_ttft.samples", "p95_ttft.ci_low"), "chain.yaml")
    with pytest.raises(RecordError) as info:
        check_measured(rec)
    err = info.value
    fields = [(p.field, p.message.split(":")[0]) for p in err.problems]
    for i in range(5):
        assert (f"trials[{i}].observations", "no observation 'p95_ttft.samples' or 'completed_requests'") in fields
        assert (f"trials[{i}].observations", "no observation 'p95_ttft.ci_low' to judge the clause p95_ttft <= 500 "
                                             "ms (its confidence bounds)") in fields
    assert len(err.problems) == 10
    # The first problem stays the error's own field and message, as before it carried the rest.
    assert (err.field, err.message) == (err.problems[0].field, err.problems[0].message)
    assert err.one_line().startswith("chain.yaml: 10 problems: trials[0].observations: no observation")
    assert "\n" not in err.one_line() and len(err.lines()) == 11


def test_every_invalid_field_is_named_not_only_the_first():
    doc = example("pex-trial")
    doc["verdict"] = "MAYBE"
    doc["sequence"] = -1
    del doc["variant"]
    with pytest.raises(RecordError) as info:
        validate_document(doc, "trial.json")
    assert sorted(p.field for p in info.value.problems) == ["sequence", "variant", "verdict"]


def test_one_problem_is_the_error_it_always_was():
    doc = without(example("pex-trial"), "quality")
    with pytest.raises(RecordError) as info:
        check_measured(validate_document(doc, "trial.json"))
    assert info.value.problems == () or len(info.value.problems) == 1
    assert info.value.one_line() == ("trial.json: observations: no observation 'quality' to judge the clause "
                                     "quality >= 0.95")


def test_the_cli_lists_the_signature_beside_the_content_problems_and_writes_nothing(luma_home, tmp_path):
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    doc = without(example("pex-chain"), "p95_ttft.samples")
    doc["repetitions"] = 3
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(doc))
    result = runner.invoke(cli, ["kb", "ingest", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"Error: {path}: 8 problems:"
    assert lines[1] == ("  attestation: a measured record must be signed by a runner key this project trusts "
                        "(`luma runner sign`)")
    assert sum("no observation 'p95_ttft.samples'" in line for line in lines) == 5
    assert "  trials: 2 PASS trial(s) in the pass state, fewer than repetitions (3)" in lines
    assert any(line.startswith("  recovered: recovered is true but 2 recovered-state") for line in lines)
    with sqlite3.connect(luma_home / "ledger.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM ledger_record").fetchone()[0] == 0
