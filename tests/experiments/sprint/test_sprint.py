"""`luma sprint`: the whole chain on the tiny matvec service (seconds), its records in the ledger
and KB, bad input refused before any trial, and a killed sprint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import states


def _run(*args):
    return CliRunner().invoke(cli, list(args))


def _ledger_counts(home: Path) -> dict:
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.settings import Settings

    if not (home / "ledger.sqlite").exists():
        return {}
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        return {kind: n for (kind, _), n in kb.ledger.count_by().items()}


@pytest.mark.slow
def test_whole_chain_on_the_tiny_service_lands_in_ledger_and_kb(luma_home):
    result = _run("sprint", "run", "matvec-memory", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["problems"] == []
    assert out["binding"] == "host_memory" and out["recovered"] is True
    levels = out["levels"]
    assert levels.index(out["adjacent_fail"]) == levels.index(out["min_pass"]) - 1
    # int8 weights need less memory: the re-qualified minimum PASS is at or below the FAIL level
    assert levels.index(out["requalified_min_pass"]) <= levels.index(out["adjacent_fail"])
    assert out["frontier"]["saved"] > 0
    assert out["boundary_trials"] <= out["trial_budget"] < out["exhaustive_trials"]
    counts = _ledger_counts(luma_home)
    # The project's first runner makes its runner key and trusts it (one runner-trust record).
    assert counts == {"pex-trial": out["physical_trials"], "pex-chain": 1, "runner-trust": 1}

    assert _run("rules", "run").exit_code == 0  # the named query reads what the rules derive
    q = _run("kb", "query", "--name", "qualified-boundaries", "--format", "json")
    rows = json.loads(q.stdout)["results"]["bindings"]
    assert len(rows) == 1 and rows[0]["binding"]["value"].endswith("/host_memory")
    ev = _run("kb", "query", "--format", "json",
              "PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?ec WHERE { ?c a luma:BoundaryQualification ; "
              "luma:evidenceClass ?ec }")
    assert json.loads(ev.stdout)["results"]["bindings"][0]["ec"]["value"].endswith("#Measured")
    chain = json.loads(next((luma_home / "sprints").glob("*/chain.json")).read_text())
    env = chain["provenance"]["environment"]
    assert env["cpu_model"] and env["isa"] is not None and env["numpy"]
    assert {t["state"] for t in chain["trials"]} == {"pass", "fail", "recovered"}


BAD_CONTRACTS = {
    "not toml": ("name = [", "not valid TOML"),
    "unknown metric": ('name="x"\nservice="matvec"\n[[clauses]]\nmetric="p95_speed"\nop="<="\nvalue=1\nunit="ms"\n',
                       "unknown metric 'p95_speed'"),
    "unit misfit": ('name="x"\nservice="matvec"\n[[clauses]]\nmetric="p95_latency"\nop="<="\nvalue=1\nunit="GiB"\n',
                    "does not fit p95_latency"),
    "metric no sprint judges": ('name="x"\nservice="matvec"\n[[clauses]]\nmetric="accuracy"\nop=">="\nvalue=0.9\n'
                                'unit="dimensionless"\n', "a sprint cannot judge metric 'accuracy'"),
    "hostile unit": ('name="x"\nservice="matvec"\n[[clauses]]\nmetric="p95_latency"\nop="<="\nvalue=1\n'
                     'unit="ms/0"\n', "not a unit expression"),
    "poisson without rate": ('name="x"\nservice="matvec"\n[load]\nmode="poisson"\n[[clauses]]\nmetric="quality"\n'
                             'op=">="\nvalue=0.9\nunit="dimensionless"\n', "rate"),
    "generative metric": ('name="x"\nservice="matvec"\n[[clauses]]\nmetric="p95_ttft"\nop="<="\nvalue=1\n'
                          'unit="ms"\n', "needs a generative service"),
    "unknown service": ('name="x"\nservice="chatbot"\n[[clauses]]\nmetric="quality"\nop=">="\nvalue=0.9\n'
                        'unit="dimensionless"\n', "service"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONTRACTS))
def test_malformed_contracts_fail_before_any_trial(luma_home, tmp_path, case):
    text, message = BAD_CONTRACTS[case]
    path = tmp_path / "c.toml"
    path.write_text(text)
    result = _run("sprint", "run", str(path), "--dimension", "host_memory", "--levels", "1 MiB,2 MiB")
    assert result.exit_code == 1 and message in result.output and str(path) in result.output
    assert "Traceback" not in result.output
    assert not (luma_home / "sprints").exists() and _ledger_counts(luma_home) == {}


@pytest.mark.parametrize("args, message", [
    (["--dimension", "warp_drive"], "unknown or unenforceable dimension 'warp_drive'"),
    (["--dimension", "kv_cache"], "the matvec service has no kv_cache"),
    (["--dimension", "compute", "--levels", "1 core,4096 core"], "4096 cores asked"),
    (["--levels", "1 MiB,64 PiB"], "more memory than this host has"),
    (["--levels", "1 MiB,2 GHz"], "does not fit host_memory"),
    (["--levels", "1 MiB,1 MiB"], "levels repeat a value"),
    (["--levels", "1 MiB"], "at least two levels"),
    (["--intervention", "int3-magic"], "has no intervention 'int3-magic'"),
    (["--dimension", "runtime", "--levels", "default,avx9"], "must be ATEN_CPU_CAPABILITY=default|avx2|avx512"),
])
def test_bad_dimension_level_or_intervention_fails_before_any_trial(luma_home, args, message):
    result = _run("sprint", "run", "matvec-memory", *args)
    assert result.exit_code == 1 and message in result.output, result.output
    assert not (luma_home / "sprints").exists() and _ledger_counts(luma_home) == {}


def test_an_isa_this_cpu_lacks_is_impossible():
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= states.cpu_flags():
        pytest.skip("this CPU has AVX-512")
    with pytest.raises(Exception, match="cannot run ISA level 'avx512'"):
        states.base_value("runtime", states.parse_level("runtime", "avx512"))


def test_every_shipped_contract_loads():
    shipped = contract_mod.shipped()
    assert {"matvec-memory", "minilm-memory"} <= set(shipped)
    for path in shipped.values():
        c = contract_mod.load(path)
        assert c.sprint and c.sprint.levels


@pytest.mark.slow
def test_a_killed_sprint_keeps_its_trials_and_no_half_written_chain(luma_home):
    proc = subprocess.Popen([sys.executable, "-m", "luma.cli.main", "sprint", "run", "matvec-memory"],
                            env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((luma_home / "sprints").glob("*/trial-*.json"))) < 4:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(list((luma_home / "sprints").glob("*/trial-*.json")))
    assert written >= 4
    counts = _ledger_counts(luma_home)  # opening the KB also rolls back an interrupted ingest
    assert written - 1 <= counts.get("pex-trial", 0) <= written
    assert "pex-chain" not in counts
    # and the project still works: the next sprint records normally
    assert _run("sprint", "run", "matvec-memory", "--format", "json").exit_code == 0
    assert _ledger_counts(luma_home)["pex-chain"] == 1
