"""luma.experiments.chains.assemble: a pex-chain from trial records already in the ledger — built
as a sprint builds its own, checked as ingest checks it, and every missing piece said, one line
each, with nothing written."""

from __future__ import annotations

import json
import sqlite3

import pytest

from luma.errors import RecordError
from luma.experiments.chains.assemble import AssembleConfig, assemble_chain
from luma.experiments.chains.selection import Selection
from tests.experiments.chains.conftest import LAB, complete, reps, trial

BY_CONTRACT = AssembleConfig(Selection(contract="matvec-memory"))


def rows(settings) -> list[tuple[str, str]]:
    """(kind, evidence class) of every ledger row, in order."""
    with sqlite3.connect(settings.home / "ledger.sqlite") as conn:
        return conn.execute("SELECT kind, evidence_class FROM ledger_record ORDER BY id").fetchall()


def refused(settings, config=BY_CONTRACT) -> list[str]:
    """The missing pieces of an assembly that must write nothing."""
    before = rows(settings)
    a = assemble_chain(settings, config)
    assert a.chain is None and a.missing and not a.ingested
    assert rows(settings) == before
    return a.missing


def test_a_complete_set_of_trials_becomes_a_signed_ingested_chain_citing_them(settings, put, runner_key):
    hashes = put(complete())
    a = assemble_chain(settings, BY_CONTRACT)
    assert a.missing == [] and a.notes == [] and a.ingested
    assert rows(settings)[-1] == ("pex-chain", "measured")
    c = a.chain
    assert c["pass_state"]["dimensions"]["host_memory"] == {"value": 8, "unit": "MiB"}
    assert c["fail_state"]["dimensions"]["host_memory"] == {"value": 6, "unit": "MiB"}
    assert (c["crossed_dimension"], c["binding_resource"], c["intervention"]["name"], c["recovered"],
            c["repetitions"]) == ("host_memory", "host_memory", "int8-weights", True, 3)
    assert [(t["state"], t["verdict"]) for t in c["trials"]] == [("pass", "PASS")] * 3 + [("fail", "FAIL")] * 2 + [
        ("recovered", "PASS")] * 3
    assert [t["record"] for t in c["trials"]] == hashes[3:6] + hashes[6:8] + hashes[9:12]
    assert c["attestation"]["key"] == runner_key.fingerprint
    assert a.summary()["min_pass"] == "8 MiB" and a.summary()["adjacent_fail"] == "6 MiB"
    again = assemble_chain(settings, BY_CONTRACT)  # the same trials make the same record: a no-op
    assert again.content_hash == a.content_hash and again.duplicate and not again.ingested


def test_no_ingest_checks_the_chain_and_writes_only_the_file(settings, put, tmp_path):
    put(complete())
    before = rows(settings)
    a = assemble_chain(settings, BY_CONTRACT, ingest=False, out=tmp_path / "chain.json")
    assert not a.ingested and rows(settings) == before
    assert json.loads((tmp_path / "chain.json").read_text()) == a.chain


def test_only_passing_levels_say_there_is_no_adjacent_fail(settings, put):
    put(reps(3, 8, "PASS") + reps(3, 12, "PASS") + reps(3, 8, "PASS", "int8-weights"))
    assert refused(settings) == [
        "no FAIL at an adjacent level: levels tried 8 MiB (PASS ×3), 12 MiB (PASS ×3)"]


def test_an_inconclusive_adjacent_level_is_no_fail(settings, put):
    put(reps(3, 8, "PASS") + reps(2, 6, "INCONCLUSIVE") + reps(3, 6, "PASS", "int8-weights"))
    [line] = refused(settings)
    assert line.startswith("INCONCLUSIVE trial at host_memory 6 MiB, the level below the minimum PASS 8 MiB: "
                           "no FAIL at the adjacent level")


def test_pass_and_fail_states_that_differ_in_two_dimensions_are_no_boundary(settings, put):
    put(reps(3, 8, "PASS", compute=2) + reps(1, 6, "FAIL", compute=1))
    assert refused(settings, AssembleConfig(Selection(contract="matvec-memory"), dimension="host_memory")) == [
        "the PASS and FAIL states differ in 2 dimensions (compute, host_memory): a chain crosses one dimension, "
        "the others held"]


def test_without_the_interventions_trials_at_the_fail_state_it_says_so(settings, put):
    put(reps(3, 8, "PASS") + reps(1, 6, "FAIL") + reps(3, 8, "PASS", "int8-weights"))
    assert refused(settings) == [
        "no trial of the intervention at the FAIL state (compute 1 core, host_memory 6 MiB): the contract names "
        "int8-weights (variant int8-weights)"]


def test_trials_of_two_architectures_are_not_mixed(settings, put):
    other = {**LAB, "name": "Lab Xeon 8480"}
    put(complete() + reps(3, 4, "PASS", architecture=other))
    assert refused(settings) == ["trials of 2 architectures mixed: Lab EPYC 9654 (12), Lab Xeon 8480 (3); narrow "
                                 "the selection by architecture"]
    narrowed = AssembleConfig(Selection(contract="matvec-memory", architecture=LAB["name"]))
    assert assemble_chain(settings, narrowed).ingested


def test_measured_and_vendor_claim_trials_are_not_mixed(settings, put):
    put(complete() + reps(3, 16, "PASS", evidence="vendor-claim"))
    assert refused(settings) == ["trials of 2 evidence classes mixed: measured (12), vendor-claim (3); narrow the "
                                 "selection by evidence class"]


def test_too_few_repetitions_make_a_chain_that_says_it_will_not_qualify(settings, put):
    put(reps(2, 8, "PASS") + reps(1, 6, "FAIL") + reps(3, 6, "PASS", "int8-weights"))
    a = assemble_chain(settings, BY_CONTRACT)
    assert a.ingested and a.chain["repetitions"] == 2
    assert a.notes == ["only 2 repetitions at the PASS state; the qualification rule needs 3 (min_repetitions)"]


def test_vendor_claim_trials_make_a_vendor_claim_chain(settings, put):
    put(complete(evidence="vendor-claim"))
    a = assemble_chain(settings, BY_CONTRACT)
    assert a.ingested and a.chain["evidence_class"] == "vendor-claim"
    assert rows(settings)[-1] == ("pex-chain", "vendor-claim")
    assert a.notes == ["the trials are vendor-claim evidence, so the chain is too: only measured chains qualify"]


def test_a_trial_whose_verdict_was_edited_refuses_the_chain(settings, put):
    edited = {**trial(6, "PASS", evidence="vendor-claim"), "verdict": "FAIL", "sequence": 9}  # passing observations
    put(reps(3, 8, "PASS", evidence="vendor-claim") + [edited] + reps(3, 6, "PASS", "int8-weights",
                                                                      evidence="vendor-claim"))
    before = rows(settings)
    with pytest.raises(RecordError) as refusal:
        assemble_chain(settings, BY_CONTRACT)
    assert refusal.value.one_line().startswith(
        "assembled chain: trials[3].verdict: trial record ") and "(sprint 'lab-import-1', sequence 9) does not bear " \
        "out its verdict: verdict FAIL but every clause holds: quality 0.9995 >= 0.999" in refusal.value.one_line()
    assert rows(settings) == before


def test_a_restoration_at_the_fail_state_is_the_chains_diagnosis(settings, put):
    put(complete() + reps(1, 6, "PASS", compute=2))
    c = assemble_chain(settings, AssembleConfig(Selection(contract="matvec-memory"), dimension="host_memory")).chain
    assert [(r["dimension"], r["verdict"]) for r in c["diagnosis"]] == [("host_memory", "PASS"), ("compute", "PASS")]
    assert c["binding_resource"] == "host_memory" and c["co_binding"] == ["compute"]


def test_an_unknown_contract_needs_its_variants_named(settings, put):
    contract = {"name": "lab-contract", "clauses": [{"metric": "p95_latency", "op": "<=", "value": 50, "unit": "ms"}]}
    put(complete(contract=contract))
    by_name = Selection(contract="lab-contract")
    assert refused(settings, AssembleConfig(by_name)) == [
        "the contract is neither shipped nor in this project, so its baseline variant is unknown: name it with "
        "--baseline"]
    named = AssembleConfig(by_name, baseline="fp32", intervention="int8", variant="int8-weights")
    assert assemble_chain(settings, named).chain["intervention"]["name"] == "int8"
