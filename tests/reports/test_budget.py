"""A host_memory level is a budget on top of the runtime's own footprint (issue 15, item 15):
every host_memory decision says so and gives the total a deployment needs (level + the
footprint measured for that variant) — the boundary report's decision, facts and frontier table,
the Design-In report's qualified boundaries, and `luma sprint run`'s boundary table."""

from __future__ import annotations

from luma.kb.vocab import DIM, LUMA
from luma.reports import boundary
from luma.rules.derivations import Derivation
from luma.reports.boundary_data import ChainFacts, TrialFact
from luma.reports.boundary_terms import Level

BYTE = "http://qudt.org/vocab/unit/BYTE"
MIB = 2**20
CORE = "https://w3id.org/luma/unit/Core"


def _trial(seq, phase, variant, verdict, level_mib, foot_mib=80.8, cause=None, cores=1.0):
    obs = {"runtime_footprint": (foot_mib * MIB, BYTE), "peak_rss": (33 * MIB, BYTE)} if foot_mib else {}
    return TrialFact(f"t{seq}", seq, phase, variant, verdict, cause,
                     {"host_memory": Level(level_mib * MIB, BYTE), "compute": Level(cores, CORE)}, obs)


def _facts(trials, crossed="host_memory", pass_mib=8, fail_mib=6) -> ChainFacts:
    props = {LUMA + "crossedDimension": DIM + crossed, LUMA + "bindingResource": DIM + crossed,
             LUMA + "evidenceClass": LUMA + "Measured", LUMA + "recovered": "true", LUMA + "repetitions": "3",
             LUMA + "passContext": "c", LUMA + "failContext": "c"}
    entity = {"workload": "matvec", "contract": "matvec-memory", "architecture": "AMD EPYC", "intervention": "int8"}
    return ChainFacts("chain", "graph", props, entity, [],
                      {"host_memory": Level(pass_mib * MIB, BYTE), "compute": Level(1.0, CORE)},
                      {"host_memory": Level(fail_mib * MIB, BYTE), "compute": Level(1.0, CORE)},
                      {}, {}, {}, [], sprint="s1" if trials else None, sprint_trials=trials,
                      run=Derivation("qualified-boundary", 4, {"min_repetitions": "3"}, "activity"), qualified=True)


def _sprint_trials():
    return [_trial(0, "boundary", "fp32", "FAIL", 4, cause="oom"), _trial(1, "boundary", "fp32", "PASS", 8),
            _trial(2, "boundary", "fp32", "FAIL", 6, cause="oom"), _trial(3, "boundary", "fp32", "PASS", 8),
            _trial(4, "boundary", "fp32", "PASS", 8),
            # a diagnosis at 2 cores has a larger footprint (thread stacks): not the deployed state's
            _trial(5, "diagnosis", "fp32", "FAIL", 6, foot_mib=120.8, cause="oom", cores=2.0),
            *(_trial(6 + k, "intervention", "int8", "PASS", 6, foot_mib=82.0) for k in range(3)),
            _trial(9, "requalify", "int8", "FAIL", 4, foot_mib=82.0, cause="oom")]


def test_the_decision_gives_the_total_a_deployment_needs():
    f = _facts(_sprint_trials())
    a = boundary.analyse(f)
    text = boundary.decision(f, a)
    assert "host_memory ≥ 8 MiB over the runtime's footprint, 88.8 MiB in all (fp32)" in text
    assert "host_memory ≥ 6 MiB over the runtime's footprint, 88 MiB in all with int8" in text
    assert "budget on top of the runtime's own footprint" in text
    assert "80.8 MiB (fp32), 82 MiB (int8)" in text and "120.8" not in text


def test_the_facts_and_frontier_table_say_it_too():
    f = _facts(_sprint_trials())
    rep = boundary._report(f, boundary.analyse(f))
    facts = dict(rep.facts)
    assert facts["Minimum PASS"] == ("host_memory = 8 MiB (a budget on top of the runtime's 80.8 MiB footprint: "
                                     "88.8 MiB in all)")
    frontier = next(t for t in rep.tables() if t.id == "table-frontier")
    assert "deployment needs (level + runtime footprint)" in frontier.columns
    assert [r[3] for r in frontier.rows] == ["88.8 MiB", "88 MiB"]


def test_without_a_footprint_the_decision_says_it_is_unknown():
    trials = [_trial(t.sequence, t.phase, t.variant, t.verdict, t.levels["host_memory"].value / MIB, foot_mib=None,
                     cause=t.cause, cores=t.levels["compute"].value) for t in _sprint_trials()]
    f = _facts(trials)
    text = boundary.decision(f, boundary.analyse(f))
    assert "host_memory ≥ 8 MiB over the runtime's own footprint (not reported: add it)" in text
    assert "does not report the runtime's footprint" in text


def test_other_dimensions_get_no_budget_text():
    f = _facts(_sprint_trials())
    f.props[LUMA + "crossedDimension"] = DIM + "compute"
    f.pass_levels = {"compute": Level(2.0, CORE), "host_memory": Level(8 * MIB, BYTE)}
    f.fail_levels = {"compute": Level(1.0, CORE), "host_memory": Level(8 * MIB, BYTE)}
    for t in f.sprint_trials:
        t.levels["host_memory"] = Level(8 * MIB, BYTE)
    text = boundary.decision(f, boundary.analyse(f))
    # the context level is a host_memory budget too: it gets its total
    assert "host_memory = 8 MiB over the runtime's footprint" in text and "in all" in text


def test_the_sprint_table_gives_the_total():
    from luma.cli.sprint.run import boundary_rows

    out = {"min_pass": "8 MiB", "adjacent_fail": "6 MiB", "binding": "host_memory", "diagnosis": None,
           "intervention": "int8-weights", "recovered": True, "recovery_verdicts": ["PASS"],
           "frontier": None, "next_binding": None, "boundary_trials": 5, "trial_budget": 6, "exhaustive_trials": 24,
           "physical_trials": 13, "problems": [], "chain_recorded": False, "records_folder": "x",
           "requalified_min_pass": "6 MiB",
           "deployment": {"min_pass": {"variant": "fp32", "runtime_footprint_bytes": 80.8 * MIB,
                                       "total_bytes": 88.8 * MIB},
                          "requalified_min_pass": {"variant": "int8-weights", "runtime_footprint_bytes": None,
                                                   "total_bytes": None}}}
    rows = {r["item"]: r["value"] for r in boundary_rows(out)}
    assert rows["minimum PASS"] == "8 MiB over the runtime's 80.8 MiB footprint = 88.8 MiB in all (fp32)"
    assert rows["re-qualified minimum PASS"] == "6 MiB (over the runtime's footprint, not measured: add it)"


def test_model_explore_says_host_memory_levels_are_budgets(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from luma.cli.main import cli

    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(cli, ["model", "explore", "matvec-memory", "--space", "matvec-host"]).output
    assert "host_memory levels are budgets on top of the runtime's own footprint" in out
