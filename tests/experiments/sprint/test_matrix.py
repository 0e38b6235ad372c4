"""Frozen experiment matrices (experiments/sprint/matrix.py): a sprint plan frozen and read back is the
same plan; a matrix this host cannot run, or one edited after it was frozen, is refused naming
the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from luma.errors import ConfigError
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import matrix as matrix_mod
from luma.experiments.sprint import pex as sprint_mod
from luma.settings import Settings

DATA = Path(__file__).resolve().parents[2] / "kb" / "data"


@pytest.fixture
def project(tmp_path):
    return Settings.from_env(home=tmp_path)


def _plan(**kw):
    c = contract_mod.load("matvec-memory")
    return sprint_mod.plan(c, kw.get("dimension"), kw.get("levels"), kw.get("intervention"), kw.get("repetitions"))


@pytest.mark.parametrize("kw", [{}, {"levels": ["2 MiB", "6 MiB", "8 MiB"], "repetitions": 2},
                                {"levels": ["4096 KiB", "8 MiB"], "intervention": "int8-weights", "repetitions": 5}])
def test_a_frozen_plan_reads_back_as_the_same_plan(project, kw):
    plan = _plan(**kw)
    predicted = ["FAIL"] * (len(plan.levels) - 1) + ["PASS"]
    m = matrix_mod.freeze(plan, predicted)
    assert m["sha256"] == matrix_mod.digest(m)
    back = matrix_mod.to_plan(json.loads(json.dumps(m)), project)
    assert (back.contract.name, back.dimension, back.repetitions, back.intervention, back.variant) == \
        (plan.contract.name, plan.dimension, plan.repetitions, plan.intervention, plan.variant)
    assert [back.state(i) for i in range(len(back.levels))] == [plan.state(i) for i in range(len(plan.levels))]
    assert back.start == len(plan.levels) - 1  # the matrix's predicted minimum PASS starts the bisection


def test_a_matrix_file_round_trips_and_an_edited_one_is_refused(project, tmp_path):
    m = matrix_mod.freeze(_plan(), None)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(m))
    assert matrix_mod.read(path, project) == m
    m["repetitions"] = 1  # edited after freezing
    path.write_text(json.dumps(m))
    with pytest.raises(ConfigError) as exc:
        matrix_mod.read(path, project)
    assert exc.value.field == "sha256"


def test_the_evaluation_file_of_a_partner_is_read_for_its_matrix(project, tmp_path):
    frozen = matrix_mod.freeze(_plan(), None)
    path = tmp_path / "evaluation.json"
    path.write_text(json.dumps({"verdict": "gain", "matrix": frozen}))
    assert matrix_mod.read(path, project) == frozen


def _refit(m: dict) -> dict:
    m = copy.deepcopy(m)
    m["sha256"] = matrix_mod.digest(m)
    return m


def _edit(change) -> dict:
    m = copy.deepcopy(matrix_mod.freeze(_plan(), None))
    change(m)
    return _refit(m)


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda m: m["contract"].update(name="llm-chat"), "contract.name", "not a contract a sprint runs"),
    (lambda m: m["contract"]["clauses"][1].update(value=40), "contract.clauses", "other clauses"),
    (lambda m: m.update(dimension="accelerator_count"), "dimension", "not a dimension this host enforces"),
    (lambda m: m["configurations"][0]["states"][0]["state"].update(concurrency="64"),
     "configurations[0].states[0].state.concurrency", "not the contract's load"),
    (lambda m: m["configurations"][0]["states"][0]["state"].update(accelerator_type="nvidia-h100-sxm5-80gb"),
     "configurations[0].states[0].state.accelerator_type", "not a dimension this host enforces"),
    (lambda m: m["configurations"][0]["states"][1]["state"].update(compute="2 core"),
     "configurations[0].states[1].state", "differs from the first"),
    (lambda m: m["configurations"][1].update(intervention="kvzip-labs/kvzip@1.2.0"),
     "configurations[1].intervention", "not an intervention this host"),
    (lambda m: m["configurations"][0].update(intervention="int8-weights"), "configurations", "no baseline"),
    (lambda m: m.update(repetitions=0), "repetitions", "1 to 20"),
    (lambda m: m["configurations"][0].update(states=m["configurations"][0]["states"][:1]),
     "configurations[0].states", "at least two levels"),
])
def test_a_matrix_that_does_not_fit_this_host_is_refused_naming_the_field(project, change, field, words):
    with pytest.raises(ConfigError) as exc:
        matrix_mod.to_plan(_edit(change), project, "m.json")
    assert exc.value.field == field and words in exc.value.message, (exc.value.field, exc.value.message)


def test_the_partner_matrix_record_keeps_the_partner_figures_out():
    from luma.experiments.model.record import matrix_record
    from luma.kb.records.loader import validate_document

    evaluation_matrix = {"kind": "pex-experiment-matrix", "frozen": True, "evidence_class": "projected",
                         "contract": {"name": "llm-chat", "clauses": [{"metric": "p95_ttft", "op": "<=", "value": 1,
                                                                        "unit": "s"}], "load": {"concurrency": 32}},
                         "model": "llama-2-70b", "dimension": "accelerator_count", "repetitions": 3,
                         "configurations": [
                             {"name": "baseline", "intervention": None,
                              "states": [{"role": "candidate-pass", "state": {"accelerator_count": "2"},
                                          "predicted": "PASS", "margin": 0.1, "binding": "hbm_capacity"}]},
                             {"name": "intervention", "intervention": "acme/kvz@1.0",
                              "effects": {"kv-cache": {"compression_ratio": 2.0}},
                              "states": [{"role": "candidate-pass", "state": {"accelerator_count": "1"},
                                          "predicted": "PASS"}]}],
                         "sha256": "0" * 64}
    rec = matrix_record(evaluation_matrix, "luma partner evaluate")
    assert "effects" not in json.dumps(rec)
    assert validate_document(rec, "m").model.configurations[1].intervention == "acme/kvz@1.0"
