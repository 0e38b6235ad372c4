"""The pilot-decision record: one decision of the Economic Control Pilot as measured evidence.
A decision is ingested only when it is measured, signed by a trusted runner key, and borne out by
its verification trials (re-judged on the clauses they observe); every refusal names the field
and leaves the ledger and the KB as they were. Its projection is declared by the ontology and
covered by the shapes, and the two pilot named queries answer from the records."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import RecordError
from luma.kb.ingest import consistency
from luma.kb.ingest.projection import LedgerMeta, project
from luma.kb.records.loader import validate_document
from luma.kb.records.pilot_decision import figure_judged, state_key
from luma.kb.records.schema import schema_text

from tests.kb.ingest.test_measured_gate import luma, ok, refused, state
from tests.kb.test_ontology import declared, graph
from tests.kb.ingest.test_shacl import _graph, fast_conforms, pyshacl_conforms

DATA = Path(__file__).parents[1] / "data"
DECISION = json.loads((DATA / "pilot_decision.json").read_text())
ONTOLOGY = Path(__file__).resolve().parents[3] / "ontology"
LUMA = "https://w3id.org/luma/ns#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _edit(change, doc: dict = DECISION) -> dict:
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


def _triples(doc: dict):
    rec = validate_document(doc, "test")
    return project(rec.model, LedgerMeta(rec.content_hash, "alice", datetime(2026, 12, 4, tzinfo=timezone.utc))).triples


def _trial(p95: float, verdict: str, cause: str | None = None) -> dict:
    """A verification window's trial: 400 requests, p95 with its interval (±10 %), rate, errors."""
    row = {"verdict": verdict, "observations": [
        {"metric": "completed_requests", "value": 400, "unit": "request"},
        {"metric": "rate", "value": 40.0, "unit": "1/s"},
        {"metric": "p95_latency", "value": p95, "unit": "s"},
        {"metric": "p95_latency.ci_low", "value": round(p95 * 0.9, 6), "unit": "s"},
        {"metric": "p95_latency.ci_high", "value": round(p95 * 1.1, 6), "unit": "s"},
        {"metric": "error_rate", "value": 0.0, "unit": "dimensionless"}]}
    if cause:
        row["failure_cause"] = cause
    return row


def _rolled_back(d: dict) -> None:
    """The candidate breached the 250 ms p95 on live traffic: verification FAIL, rolled back."""
    d["verification"] = {"verdict": "FAIL", "windows": 1, "trials": [_trial(0.4, "FAIL", "slo-miss")]}
    d["outcome"] = "rolled-back"


def decision(pilot: str = "pilot-a", sequence: int = 0, *, candidate: str | None = None, rolled_back: bool = False,
             predicted: float = 2.7e-6, realized: float = 2.8e-6, started: str = "2026-12-04T05:12:00+00:00") -> dict:
    """A valid decision of run `pilot`; `candidate` another key for the candidate state."""
    def change(d):
        d["pilot"], d["sequence"] = pilot, sequence
        d["provenance"]["started"] = started
        if candidate:
            d["candidate"]["key"] = candidate
        next(f for f in d["prediction"]["figures"] if f["metric"] == "cost_per_accepted")["value"] = predicted
        after = next(f for f in d["realized"]["after"] if f["metric"] == "cost_per_accepted")
        after.update(value=realized, ci_low=realized * 0.9, ci_high=realized * 1.1)
        if rolled_back:
            _rolled_back(d)
    return _edit(change)


# -- the model ---------------------------------------------------------------------------------


def test_the_committed_schema_is_the_models_and_accepts_the_example():
    import jsonschema

    text = (ONTOLOGY / "pilot-decision.schema.json").read_text()
    assert text == schema_text("pilot-decision")
    jsonschema.Draft202012Validator(json.loads(text)).validate(DECISION)


def test_the_example_validates_and_is_consistent():
    rec = validate_document(DECISION, "ok")
    assert rec.kind == "pilot-decision" and rec.model.candidate.key == DECISION["candidate"]["key"]
    consistency.check_measured(rec)  # no error
    rolled = validate_document(decision(rolled_back=True), "ok")
    consistency.check_measured(rolled)


def test_state_key_is_the_documented_hash():
    import hashlib

    levels = DECISION["candidate"]["state"]["dimensions"]
    text = json.dumps({"levels": levels, "settings": {"max_batch": 8, "threads": 1}, "variant": "int8-weights"},
                      sort_keys=True, separators=(",", ":"))
    assert state_key(levels, "int8-weights", {"threads": 1, "max_batch": 8}) == \
        hashlib.sha256(text.encode()).hexdigest()[:12] == DECISION["candidate"]["key"]
    model = validate_document(DECISION, "ok").model.candidate
    assert state_key(model.state, model.variant, model.settings) == model.key  # a MachineState is its dimensions


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from(["compute", "host_memory", "runtime", "a", "b"]),
                       st.integers(0, 64) | st.text(max_size=5), min_size=1),
       st.text(min_size=1, max_size=8), st.dictionaries(st.sampled_from(["max_batch", "threads"]), st.integers(1, 64)))
def test_state_key_ignores_key_order_and_is_twelve_hex(levels, variant, knobs):
    key = state_key(levels, variant, knobs)
    assert len(key) == 12 and all(c in "0123456789abcdef" for c in key)
    assert state_key(dict(reversed(list(levels.items()))), variant, dict(reversed(list(knobs.items())))) == key


def test_economic_and_reliability_clauses_are_judged_on_figures():
    assert all(figure_judged(m) for m in ("power", "energy_per_accepted", "cost_per_accepted", "error_rate",
                                          "availability"))
    assert not any(figure_judged(m) for m in ("p95_latency", "quality", "throughput", "rate"))


def _figure(where: str, index: int, **change):
    def edit(d):
        figures = d["prediction"]["figures"] if where == "prediction" else (
            d["realized"][where] if where in ("before", "after") else d[where])
        figures[index].update(change)
    return edit


def _drop(*path):
    def edit(d):
        target = d
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = None
    return edit


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda d: d.update(evidence_class="simulated"), "evidence_class", "physical event"),
    (lambda d: d.update(evidence_class="vendor-claim"), "evidence_class", "measured"),
    (lambda d: d["verification"].update(verdict="FAIL", trials=[_trial(0.4, "FAIL", "slo-miss")]), "outcome",
     "retained"),
    (lambda d: d["verification"].update(verdict="INCONCLUSIVE"), "outcome", "retained"),
    (_figure("observed", 0, metric="queue_depth"), "observed[0].metric", "unknown metric"),
    (_figure("prediction", 2, unit="J/request"), "prediction.figures[2].unit", "does not fit cost_per_accepted"),
    (_figure("prediction", 1, unit="GiB"), "prediction.figures[1].unit", "does not fit capacity"),
    (_figure("observed", 0, unit="furlongs"), "observed[0].unit", ""),
    (_figure("after", 0, ci_low=3.1e-6), "realized.after[0].ci_low", "ci_low <= value <= ci_high"),
    (_figure("before", 1, ci_high=1.2), "realized.before[1].ci_low", "ci_low <= value <= ci_high"),
    (_figure("before", 1, ci_high=None), "realized.before[1].ci_low", "both bounds"),
    (_figure("observed", 1, value=-0.1, ci_low=-0.2, ci_high=0.0), "observed[1].value", "cannot be negative"),
    (_figure("observed", 2, evidence_class="guess"), "observed[2].evidence_class", ""),
    (_figure("prediction", 1, metric="p95_latency", unit="s"), "prediction.figures[1].metric", "twice"),
    (lambda d: d["candidate"].update(key=d["from_state"]["key"]), "candidate.key", "another state"),
    (lambda d: d["candidate"].update(key="ABC"), "candidate.key", ""),
    (lambda d: d["candidate"]["settings"].update(threads=0), "candidate.settings.threads", ""),
    (lambda d: d["window"].update(end_s=30.0), "window.end_s", "after it starts"),
    (lambda d: d["prediction"].update(margin=1.0), "prediction.margin", ""),
    (lambda d: d["verification"].update(trials=[]), "verification.trials", ""),
    (lambda d: d["verification"].update(windows=0), "verification.windows", ""),
    (lambda d: d.update(reason=" "), "reason", ""),
    (lambda d: d.update(action="sidegrade"), "action", ""),
    (_drop("provenance"), "provenance", ""),
])
def test_bad_input_is_refused_naming_the_field(change, field, words):
    with pytest.raises(RecordError) as err:
        validate_document(_edit(change), "bad.json")
    assert err.value.field == field, err.value
    assert words in str(err.value), err.value


def test_a_first_placement_has_no_from_state():
    doc = _edit(lambda d: d.pop("from_state"))
    consistency.check_measured(validate_document(doc, "ok"))
    assert not any(p == LUMA + "fromState" for _, p, _ in _triples(doc))


# -- re-judging at ingest --------------------------------------------------------------------------


def _verification(*trials, verdict: str) -> callable:
    def edit(d):
        d["verification"] = {"verdict": verdict, "windows": len(trials), "trials": list(trials)}
        if verdict != "PASS":
            d["outcome"] = "rolled-back"
    return edit


@pytest.mark.parametrize(("change", "field", "words"), [
    # The deciding trial FAILed, the record says PASS (and retained it).
    (_verification(_trial(0.25, "INCONCLUSIVE"), _trial(0.4, "FAIL", "slo-miss"), verdict="PASS"),
     "verification.verdict", "decide FAIL"),
    # No trial decided: the verification is INCONCLUSIVE, not FAIL.
    (_verification(_trial(0.25, "INCONCLUSIVE"), _trial(0.25, "INCONCLUSIVE"), verdict="FAIL"),
     "verification.verdict", "decide INCONCLUSIVE"),
    # A verification ends at its first PASS or FAIL: nothing follows a deciding trial.
    (_verification(_trial(0.118, "PASS"), _trial(0.4, "FAIL", "slo-miss"), verdict="PASS"),
     "verification.trials[1]", "ends at its first PASS or FAIL"),
    # A trial whose p95 interval lies above 250 ms may not say PASS.
    (_verification(_trial(0.4, "PASS"), verdict="PASS"), "verification.trials[0].verdict", "p95_latency"),
    # ... nor INCONCLUSIVE: what it observes failing is a FAIL whatever the figures say.
    (_verification(_trial(0.4, "INCONCLUSIVE"), verdict="INCONCLUSIVE"), "verification.trials[0].verdict",
     "p95_latency"),
    # A PASS with nothing measured to re-judge it on.
    (_verification({"verdict": "PASS", "observations": [{"metric": "rate", "value": 4, "unit": "1/s"}]},
                   verdict="PASS"), "verification.trials[0].observations", "p95_latency"),
    # A percentile without the samples behind it cannot be judged.
    (_verification({"verdict": "PASS", "observations": _trial(0.118, "PASS")["observations"][2:]}, verdict="PASS"),
     "verification.trials[0].observations", "samples"),
    # A quality-miss where the observed clause failing is a latency one.
    (_verification(_trial(0.4, "FAIL", "quality-miss"), verdict="FAIL"), "verification.trials[0].failure_cause",
     "slo-miss"),
])
def test_a_decision_its_trials_do_not_bear_out_is_refused(change, field, words):
    rec = validate_document(_edit(change), "bad.json")  # a valid record ...
    with pytest.raises(RecordError) as err:
        consistency.check_measured(rec)  # ... that its own trials contradict
    assert err.value.field == field, err.value
    assert words in str(err.value), err.value


def test_clauses_judged_on_figures_may_fail_a_trial_that_its_observations_pass():
    # The cost clause failed on the pilot's (projected) figures: FAIL with slo-miss stands
    # although the observed p95 passes, and so does an out-of-memory FAIL.
    for trial in (_trial(0.118, "FAIL", "slo-miss"), _trial(0.118, "FAIL", "oom"), _trial(0.118, "FAIL")):
        consistency.check_measured(validate_document(_edit(_verification(trial, verdict="FAIL")), "ok"))
    # With every clause observed and judged, the verdict must be exactly the judge's.
    latency_only = _edit(lambda d: d["contract"].update(clauses=d["contract"]["clauses"][:1]))
    with pytest.raises(RecordError, match="every clause holds"):
        consistency.check_measured(validate_document(
            _edit(_verification(_trial(0.118, "FAIL", "slo-miss"), verdict="FAIL"), latency_only), "bad"))


def test_a_clause_live_traffic_does_not_observe_is_not_judged():
    # The pilot contract's shape (experiments/contracts/minilm-pilot.toml): a quality clause live
    # traffic has no observation of, an error-rate clause the pilot judges per window, a cost
    # clause on projected figures. Only the observed p95 is re-judged.
    clauses = [{"metric": "quality", "op": ">=", "value": 0.99, "unit": "dimensionless"},
               {"metric": "p95_latency", "op": "<=", "value": 150, "unit": "ms"},
               {"metric": "error_rate", "op": "<=", "value": 0.01, "unit": "dimensionless"},
               {"metric": "cost_per_accepted", "op": "<=", "value": 1e-6, "unit": "USD/request"}]
    pilot_contract = _edit(lambda d: d["contract"].update(clauses=clauses))
    consistency.check_measured(validate_document(pilot_contract, "ok"))
    with pytest.raises(RecordError) as err:  # p95 interval [126, 154] ms: no PASS under 150 ms
        consistency.check_measured(validate_document(
            _edit(_verification(_trial(0.14, "PASS"), verdict="PASS"), pilot_contract), "bad"))
    assert err.value.field == "verification.trials[0].verdict"
    # An observed quality is judged: 0.5 under a 0.99 clause is no PASS.
    observed = _edit(lambda d: d["verification"]["trials"][0]["observations"].append(
        {"metric": "quality", "value": 0.5, "unit": "dimensionless"}), pilot_contract)
    with pytest.raises(RecordError, match="quality"):
        consistency.check_measured(validate_document(observed, "bad"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["PASS", "FAIL", "INCONCLUSIVE"]), min_size=1, max_size=6),
       st.sampled_from(["PASS", "FAIL", "INCONCLUSIVE"]))
def test_the_verification_verdict_is_its_deciding_trials(verdicts, stated):
    p95 = {"PASS": 0.118, "FAIL": 0.4, "INCONCLUSIVE": 0.25}  # interval inside, above, across 250 ms
    trials = [_trial(p95[v], v, "slo-miss" if v == "FAIL" else None) for v in verdicts]
    rec = validate_document(_edit(_verification(*trials, verdict=stated)), "h")
    # INCONCLUSIVE windows extend a verification; the first PASS or FAIL decides and ends it.
    deciding = [i for i, v in enumerate(verdicts) if v != "INCONCLUSIVE"]
    ends = not deciding or deciding[0] == len(verdicts) - 1
    expected = verdicts[deciding[0]] if deciding else "INCONCLUSIVE"
    if ends and expected == stated:
        consistency.check_measured(rec)
    else:
        with pytest.raises(RecordError) as err:
            consistency.check_measured(rec)
        assert err.value.field == ("verification.verdict" if ends else f"verification.trials[{deciding[0] + 1}]")


def test_an_extended_verification_that_passes_is_retained():
    # Seen live beside a busy loop: a verification window INCONCLUSIVE (p95 interval across the
    # threshold), the next PASS. The controller retains the state, and the record it writes must
    # be valid and borne out by its trials at ingest.
    trials = [_trial(0.25, "INCONCLUSIVE"), _trial(0.118, "PASS")]
    edit = _verification(*trials, verdict="PASS")
    rec = validate_document(_edit(lambda d: (edit(d), d.update(outcome="retained"))), "ok")
    consistency.check_measured(rec)
    assert rec.model.outcome == "retained" and rec.model.verification.verdict == "PASS"


# -- ingest ------------------------------------------------------------------------------------


def test_ingest_through_the_cli_and_bad_input_changes_nothing(luma_home, signed, tmp_path):
    ok(luma("kb", "ingest", signed(DECISION, "decision.json")))
    before = state(luma_home)
    # Signed (the runner vouches for them) but contradicted by their own trials.
    contradicted = {
        "verification.verdict": _verification(_trial(0.25, "INCONCLUSIVE"), _trial(0.4, "FAIL", "slo-miss"),
                                              verdict="PASS"),
        "verification.trials[1]": _verification(_trial(0.118, "PASS"), _trial(0.4, "FAIL", "slo-miss"), verdict="PASS"),
        "verification.trials[0].verdict": _verification(_trial(0.4, "PASS"), verdict="PASS"),
    }
    for field, change in contradicted.items():
        refused(luma("kb", "ingest", signed(_edit(change), "contradicted.json")), "contradicted.json", field)
    # Refused by the model before any signature is looked at.
    invalid = {
        "evidence_class": lambda d: d.update(evidence_class="projected"),
        "outcome": lambda d: d["verification"].update(verdict="FAIL", trials=[_trial(0.4, "FAIL", "slo-miss")]),
        "observed[0].metric": _figure("observed", 0, metric="queue_depth"),
        "prediction.figures[2].unit": _figure("prediction", 2, unit="J/request"),
        "realized.after[0].ci_low": _figure("after", 0, ci_low=3.1e-6),
    }
    for field, change in invalid.items():
        path = tmp_path / "invalid.json"
        path.write_text(json.dumps(_edit(change)))
        refused(luma("kb", "ingest", path), "invalid.json", field)
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps(decision(sequence=7)))
    refused(luma("kb", "ingest", unsigned), "unsigned.json", "attestation", "must be signed by a runner key")
    assert state(luma_home) == before


# -- projection ----------------------------------------------------------------------------------


def test_projection_is_declared_covered_by_shapes_and_conforms():
    from rdflib import RDF, Namespace

    triples = _triples(DECISION)
    ours = declared(graph("luma.ttl"))
    types = {o[1:-1] for _, p, o in triples if p == str(RDF.type)}
    predicates = {p for _, p, _ in triples} - {str(RDF.type), "http://www.w3.org/2000/01/rdf-schema#label"}
    assert predicates - ours == set() and types - ours == set()
    sh = Namespace("http://www.w3.org/ns/shacl#")
    shapes = _graph("shapes.ttl")
    assert types <= {str(c) for c in shapes.objects(None, sh.targetClass)}
    assert {p for _, p, _ in triples} - {str(RDF.type)} <= {str(p) for p in shapes.objects(None, sh.path)}
    assert pyshacl_conforms(triples) and fast_conforms(triples)


def test_projection_facts():
    triples = _triples(DECISION)
    by = {}
    for s, p, o in triples:
        by.setdefault(s, {}).setdefault(p.removeprefix(LUMA), []).append(o)
    [d] = [s for s, facts in by.items() if f"<{LUMA}PilotDecision>" in facts.get(RDF_TYPE, [])]
    facts = by[d]
    assert facts["pilotRun"] == ['"pilot-20261204T051200-3f2a"'] and facts["pilotOutcome"] == ['"retained"']
    assert facts["pilotAction"] == ['"downscale"'] and facts["decisionSequence"][0].startswith('"0"')
    assert facts["verificationVerdict"] == [f"<{LUMA}Pass>"] and facts["evidenceClass"] == [f"<{LUMA}Measured>"]
    assert facts["windowStart"][0].startswith('"30.0"') and facts["windowEnd"][0].startswith('"40.0"')
    assert {"workload", "architecture", "contract", "candidateState", "fromState"} <= set(facts)
    # The states: keyed, on the machine-state entity trials name (levels in canonical units).
    candidate = by[facts["candidateState"][0].strip("<>")]
    assert candidate["stateKey"] == [f'"{DECISION["candidate"]["key"]}"']
    assert candidate["softwareVariant"] == ['"int8-weights"'] and sorted(candidate["setting"]) == [
        '"max_batch=8"', '"threads=1"']
    levels = by[candidate["machineState"][0].strip("<>")]["level"]
    assert "<https://w3id.org/luma/id/level/host_memory/268435456.0-byte>" in levels
    # Predicted and realized-after cost and energy, each with its own evidence class.
    figures = {}
    for prop in ("predictedFigure", "realizedAfter"):
        for f in facts[prop]:
            fig = by[f.strip("<>")]
            figures[prop, fig["metric"][0].strip('"')] = (float(fig["http://qudt.org/schema/qudt/numericValue"][0]
                                                                .split('"')[1]), fig["figureEvidence"][0])
    assert figures["predictedFigure", "cost_per_accepted"] == (2.7e-6, '"projected"')
    assert figures["predictedFigure", "energy_per_accepted"] == (0.9, '"simulated"')
    assert figures["realizedAfter", "cost_per_accepted"] == (2.8e-6, '"projected"')
    assert figures["realizedAfter", "energy_per_accepted"] == (0.95, '"simulated"')


def test_a_trial_and_a_decision_in_one_state_name_one_machine_state():
    # The same levels in other units (0.25 GiB is 256 MiB): the same luma:MachineState entity.
    doc = {"record_type": "pex-trial", "evidence_class": "vendor-claim", "sprint": "s", "sequence": 0,
           "phase": "boundary", "workload": DECISION["workload"], "architecture": DECISION["architecture"],
           "contract": DECISION["contract"], "state": {"dimensions": {"compute": {"value": 1, "unit": "core"},
                                                                     "host_memory": {"value": 0.25, "unit": "GiB"}}},
           "variant": "int8-weights", "verdict": "PASS", "provenance": {"tool": "t"}}
    state_of_trial = next(o for _, p, o in _triples(doc) if p == LUMA + "machineState")
    states = {o for _, p, o in _triples(DECISION) if p == LUMA + "machineState"}
    assert state_of_trial in states and len(states) == 2


# -- named queries ---------------------------------------------------------------------------------


def _rows(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return [{k: v["value"] for k, v in row.items()} for row in json.loads(result.stdout)["results"]["bindings"]]


def test_the_pilot_queries_answer_from_the_decisions(luma_home, runner_key, evidence, tmp_path):
    other = "0123456789ab"
    docs = [
        decision("pilot-a", 0, predicted=2e-6, realized=3e-6),                       # retained
        decision("pilot-a", 1, predicted=4e-6, realized=5e-6, rolled_back=True),     # rolled back
        decision("pilot-b", 0, predicted=3e-6, realized=4e-6, rolled_back=True,
                 started="2026-12-05T08:00:00+00:00"),                                # a later run
        decision("pilot-b", 1, candidate=other, rolled_back=True, started="2026-12-05T08:00:00+00:00"),
    ]
    path = evidence.write_signed(runner_key, tmp_path / "decisions.jsonl", *docs)
    ok(luma("kb", "ingest", path))

    rows = _rows(luma("kb", "query", "--name", "pilot-realized-value", "--format", "json"))
    by_key = {r["stateKey"]: r for r in rows}
    assert set(by_key) == {DECISION["candidate"]["key"], other} and len(rows) == 2
    row = by_key[DECISION["candidate"]["key"]]
    assert (row["workload"], row["contract"]) == ("minilm-embedding", "minilm-embedding-pilot")
    assert (int(row["decisions"]), int(row["retained"]), int(row["rolledBack"])) == (3, 1, 2)
    assert float(row["meanPredicted"]) == pytest.approx(3e-6) and float(row["meanRealized"]) == pytest.approx(4e-6)
    assert float(row["ratio"]) == pytest.approx(4 / 3)
    assert (row["predictedEvidence"], row["realizedEvidence"]) == ("projected", "projected")
    assert row["predictedUnit"] == row["realizedUnit"] == "USDPerRequest"
    assert (int(by_key[other]["decisions"]), int(by_key[other]["rolledBack"])) == (1, 1)

    rollbacks = _rows(luma("kb", "query", "--name", "pilot-rollbacks", "--format", "json"))
    assert len(rollbacks) == 1  # the other state was rolled back once: no evidence against it yet
    [r] = rollbacks
    assert r["stateKey"] == DECISION["candidate"]["key"] and r["variant"] == "int8-weights"
    assert (int(r["rollbacks"]), int(r["runs"]), r["latestPilot"]) == (2, 2, "pilot-b")
    assert r["latestAt"].startswith("2026-12-05T08:00:00")
