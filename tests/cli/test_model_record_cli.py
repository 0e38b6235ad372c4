"""`--record` of `luma model predict|explore` and `luma partner evaluate`, `luma sprint plan|run
--matrix`, and the acceptance test of issue 16 item 5: a sprint guided by the model, after its
predictions were recorded, answers `luma kb query --name model-vs-pex` with the agreement it
measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
KV = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
H100 = "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _kinds(home: Path) -> dict:
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.settings import Settings

    if not (home / "ledger.sqlite").exists():
        return {}
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        return {kind: n for (kind, _), n in kb.ledger.count_by().items()}


def _select(home: Path, sparql: str) -> list[dict]:
    out = run("kb", "query", sparql, "--format", "json")
    assert out.exit_code == 0, out.output
    return [{k: v["value"] for k, v in b.items()} for b in json.loads(out.stdout)["results"]["bindings"]]


def test_predict_records_only_when_asked(luma_home):
    plain = run("model", "predict", "matvec-memory", "--state", "host_memory=4 MiB", "--format", "json")
    assert plain.exit_code == 0 and "recorded" not in json.loads(plain.stdout)
    assert not (luma_home / "ledger.sqlite").exists()  # no --record: the project is not touched
    out = run("model", "predict", "matvec-memory", "--state", "host_memory=4 MiB", "--record")
    assert out.exit_code == 0, out.output
    assert "recorded: 1 predicted state(s) as simulated evidence (1 new record(s)" in out.output
    assert _kinds(luma_home) == {"model-prediction": 1}
    rows = _select(luma_home, "SELECT ?v ?r ?code ?m WHERE { ?p a luma:ModelPrediction ; luma:predictedVerdict ?v ; "
                              "luma:predictedBinding ?r . ?run luma:prediction ?p ; luma:modelCode ?code . "
                              "?p luma:predictedClause ?c . ?c luma:checkName \"memory\" ; qudt:numericValue ?m }")
    assert len(rows) == 1 and rows[0]["v"].endswith("#Fail") and rows[0]["r"] == "host_memory"
    assert len(rows[0]["code"]) == 64 and float(rows[0]["m"]) > 4 * 2**20  # predicted need, bytes
    # The same prediction again is the same record content but a new run (its start time differs).
    again = run("model", "predict", "matvec-memory", "--state", "host_memory=4 MiB", "--record", "--format", "json")
    assert json.loads(again.stdout)["recorded"]["states"] == 1


def test_a_bad_state_records_nothing_and_creates_no_project(luma_home):
    out = run("model", "predict", "matvec-memory", "--state", "host_memory=4 parsecs", "--record")
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert not (luma_home / "ledger.sqlite").exists() and not (luma_home / "model").exists()


def test_explore_records_the_frontier_and_the_proposals(luma_home):
    out = run("model", "explore", "matvec-memory", "--space", "matvec-host", "--propose", "3", "--record",
              "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    want = len({(("frontier",) + tuple(sorted({**r["state"], **r["demand"]}.items()))) for r in doc["frontier"]}) + \
        len({tuple(sorted(p["state"].items())) for p in doc["proposals"]})
    assert doc["recorded"]["states"] == want and _kinds(luma_home) == {"model-prediction": 1}
    roles = _select(luma_home, "SELECT ?role (COUNT(?p) AS ?n) WHERE { ?p luma:predictionRole ?role } GROUP BY ?role")
    assert {r["role"] for r in roles} == {"frontier", "proposal"}


def test_partner_evaluate_records_predictions_and_the_matrix(luma_home, tmp_path):
    assert run("partner", "add", KV).exit_code == 0
    out = run("partner", "evaluate", "kvzip", "--state", H100, "--record", "--out", tmp_path / "e.json")
    assert out.exit_code == 0, out.output
    assert "as projected evidence (2 new record(s)" in out.output
    kinds = _kinds(luma_home)
    assert kinds["model-prediction"] == 1 and kinds["experiment-matrix"] == 1
    rows = _select(luma_home, "SELECT ?tag ?base WHERE { ?run luma:partnerIntervention ?tag ; luma:prediction ?p . "
                              "?p luma:predictsBaseline ?base }")
    assert {r["tag"] for r in rows} == {"kvzip-labs/kvzip@1.2.0"} and {r["base"] for r in rows} == {"true", "false"}
    # The frozen matrix it wrote is an LLM's: a sprint here refuses it in one line, before any trial.
    refused = run("sprint", "run", "--matrix", tmp_path / "e.json")
    assert refused.exit_code == 1 and "contract.name" in refused.output and "llm-chat" in refused.output


def test_sprint_run_matrix_usage(luma_home, tmp_path):
    plan = run("sprint", "plan", "matvec-memory", "--out", tmp_path / "m.json")
    assert plan.exit_code == 0, plan.output
    assert run("sprint", "run").exit_code == 2
    mixed = run("sprint", "run", "--matrix", tmp_path / "m.json", "--levels", "1 MiB,2 MiB")
    assert mixed.exit_code == 2 and "--levels" in mixed.output
    other = run("sprint", "run", "minilm-memory", "--matrix", tmp_path / "m.json")
    assert other.exit_code == 2 and "matvec-memory" in other.output
    m = json.loads((tmp_path / "m.json").read_text())
    m["repetitions"] = 1
    (tmp_path / "edited.json").write_text(json.dumps(m))
    edited = run("sprint", "run", "--matrix", tmp_path / "edited.json")
    assert edited.exit_code == 1 and "sha256" in edited.output
    assert not (luma_home / "ledger.sqlite").exists()  # refused matrices write nothing


@pytest.mark.slow  # two short sprints of the tiny service (~20 s)
def test_a_model_guided_sprint_answers_model_vs_pex(luma_home, tmp_path):
    levels = ["4 MiB", "6 MiB", "8 MiB"]
    for level in levels:  # the model's verdict on every state the sprint may measure, recorded
        assert run("model", "predict", "matvec-memory", "--state", f"host_memory={level}", "--record").exit_code == 0
    sprint = run("sprint", "run", "matvec-memory", "--model", "--levels", ",".join(levels), "--repetitions", "1",
                 "--format", "json")
    assert sprint.exit_code == 0, sprint.output
    measured = {t["level"]: t["verdict"] for t in json.loads(sprint.stdout)["trials"]
                if t["phase"] == "boundary" and t["variant"] == "fp32"}
    assert measured, "the sprint measured no boundary state"
    assert run("rules", "run").exit_code == 0
    out = run("kb", "query", "--name", "model-vs-pex", "--format", "json")
    assert out.exit_code == 0, out.output
    rows = [{k: v["value"] for k, v in b.items()} for b in json.loads(out.stdout)["results"]["bindings"]]
    assert [(r["contract"], r["evidence"]) for r in rows] == [("matvec-memory", "Simulated")] * len(rows)
    assert sum(int(r["measured"]) for r in rows) == len(measured)  # one agreement per state PEX measured
    # The agreement the query reports is the one the sprint measured, state by state.
    predicted = {}
    for level in measured:
        p = json.loads(run("model", "predict", "matvec-memory", "--state", f"host_memory={level}",
                           "--format", "json").stdout)
        predicted[level] = p["verdict"]
    matches = sum(predicted[lv] == v for lv, v in measured.items())
    assert sum(int(r["matched"]) for r in rows) == matches
    # A sprint from the frozen matrix of the same levels measures again: the agreement rests on more trials.
    assert run("sprint", "plan", "matvec-memory", "--levels", ",".join(levels), "--repetitions", "1",
               "--out", tmp_path / "m.json").exit_code == 0
    again = run("sprint", "run", "--matrix", tmp_path / "m.json", "--format", "json")
    assert again.exit_code == 0, again.output
    assert run("rules", "run").exit_code == 0
    table = run("kb", "query", "--name", "model-vs-pex").output
    assert "matvec-memory" in table and "host_memory" in table
    n = _select(luma_home, "SELECT (SUM(?n) AS ?t) WHERE { ?a luma:measuredTrials ?n }")[0]["t"]
    assert int(n) > len(measured)
