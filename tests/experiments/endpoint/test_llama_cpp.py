"""A real engine: llama.cpp's server (llama-cpp-python, the `engines` extra) serving the shipped
MiniLM converted to GGUF by llama.cpp's own converter. Skipped where the engine is not installed
(`luma engine install llama.cpp`; `.ci/run` installs it)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

import pytest

from luma.experiments.sprint import contract, pex as sprint, trial
from luma.experiments.endpoint import engines
from luma.experiments.services import for_contract

pytestmark = pytest.mark.skipif(
    engines.llama_cpp_version() is None or not (engines.converter_dir() / "convert_hf_to_gguf.py").is_file(),
    reason="llama.cpp is not installed here (luma engine install llama.cpp)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """Both GGUF variants and the quality reference, converted once for the module."""
    path = tmp_path_factory.mktemp("engine-cache")
    svc = for_contract(contract.load("llamacpp-minilm-memory"))
    for variant in ("f16", "q8_0"):
        svc.prepare(variant, path)
    return path


def _plan(c=None, levels=("288 MiB", "320 MiB"), **kw):
    return sprint.plan(c or contract.load("llamacpp-minilm-memory"), "host_memory", list(levels), **kw)


def _trial(plan, cache, index: int, variant: str, requests: int | None = None):
    c = plan.contract
    if requests:
        c = c.model_copy(update={"load": c.load.model_copy(update={"requests": requests})})
    svc = for_contract(c)
    return trial.run_trial(c, plan.state(index), svc.prepare(variant, cache), variant, "boundary", max_retries=0,
                           service_spec=svc.trial_spec(cache))


def test_gguf_variants_are_made_by_llama_cpps_converter(cache):
    f16, q8 = (cache / "endpoint" / f"minilm-{v}.gguf" for v in ("f16", "q8_0"))
    assert f16.read_bytes()[:4] == b"GGUF" == q8.read_bytes()[:4]
    assert 0.45 < q8.stat().st_size / f16.stat().st_size < 0.65  # 8-bit blocks + scales vs 16-bit


def test_a_trial_on_llama_cpp_passes_and_names_its_engine(cache):
    from datetime import datetime, timezone

    from luma.experiments.sprint.records import trial_record

    plan = _plan()
    t = _trial(plan, cache, 1, "f16")
    assert t.verdict == "PASS", t.telemetry.get("error")
    assert t.telemetry["quality"] > 0.999  # llama.cpp's F16 MiniLM against LUMA's fp32 embeddings
    assert t.telemetry["completed"] == plan.contract.requests_needed()
    assert t.telemetry["runtime_footprint_bytes"] == 0  # the level limits the whole server
    t.extra["artifact"] = str(cache / "endpoint" / "minilm-f16.gguf")
    rec = trial_record(plan, "s-1", t, datetime.now(timezone.utc), t.extra["artifact"])
    eng = rec["provenance"]["engine"]
    assert eng["name"] == "llama.cpp" and eng["version"] == f"llama-cpp-python {engines.LLAMA_CPP_PYTHON}"
    assert "--n_threads" in eng["command"] and str(320 * 2**20) not in eng["command"]
    assert len(eng["artifact"]) == 64
    from luma.kb.records.pex_trial import PexTrial

    PexTrial.model_validate(rec)  # the record schema carries the engine block


def test_q8_0_serves_with_less_memory_than_f16(cache):
    """The int8 intervention on a real engine: at the level where F16 fails, Q8_0 passes."""
    plan = _plan(levels=("256 MiB", "272 MiB"))
    f16 = _trial(plan, cache, 0, "f16")
    q8 = _trial(plan, cache, 0, "q8_0")
    assert (f16.verdict, f16.cause) == ("FAIL", "oom") or f16.cause == "launch", f16.telemetry.get("error")
    assert q8.verdict == "PASS", q8.telemetry.get("error")
    assert q8.telemetry["quality"] > 0.99


def test_a_memory_level_the_server_cannot_start_in_is_a_launch_fail(cache):
    plan = _plan(levels=("160 MiB", "320 MiB"))
    t = _trial(plan, cache, 0, "f16")
    assert (t.verdict, t.cause) == ("FAIL", "launch")
    assert "before it was ready" in t.telemetry["error"] and t.telemetry["log_tail"]
    # The signed trial record says why (issue 32), one line, not only the unsigned sprint.json.
    from datetime import datetime, timezone

    from luma.experiments.sprint.records import trial_record
    from luma.kb.records.loader import validate_document

    rec = trial_record(plan, "s-1", t, datetime.now(timezone.utc))
    message = validate_document(rec, "trial-000.json").model.failure_message
    assert message.startswith("the server exited with code") and "before it was ready" in message


def _server_pids(mark: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if f"LUMA_TEST_MARK={mark}".encode() in open(f"/proc/{pid}/environ", "rb").read():
                    out.append(int(pid))
            except OSError:
                pass
    return out


def _killer(mark: str, after_s: float, kills: list) -> threading.Thread:
    """Kill the first server carrying `mark` `after_s` seconds after it appears (once)."""
    def run():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pids = _server_pids(mark)
            if pids:
                time.sleep(after_s)
                for pid in _server_pids(mark):
                    os.kill(pid, signal.SIGKILL)
                    kills.append(pid)
                return
            time.sleep(0.05)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def _marked(mark: str):
    c = contract.load("llamacpp-minilm-memory")
    # A server that hangs at start (llama.cpp under a tight memory limit can) is given up on sooner.
    ep = c.endpoint.model_copy(update={"env": {"LUMA_TEST_MARK": mark}, "startup_timeout_s": 8})
    return c.model_copy(update={"endpoint": ep, "load": c.load.model_copy(update={"requests": 600}),
                                "sprint": c.sprint.model_copy(update={"intervention": None})})


@pytest.mark.slow  # a real server killed mid-trial (~15 s)
def test_killing_the_server_mid_trial_is_a_fail_with_cause_error_and_the_sprint_goes_on(cache):
    mark, kills = uuid.uuid4().hex, []
    c = _marked(mark)
    plan = sprint.plan(c, "host_memory", ["304 MiB", "320 MiB"], repetitions=1)
    plan.start = 0  # the first trial runs at 304 MiB: it would pass, but its server is killed
    killer = _killer(mark, 2.5, kills)  # start-up ~1 s, then warm-up and serving
    trials = []
    result = sprint.Sprint(plan, cache, trials.append).run()
    killer.join(1)
    assert kills, "the test never found the server to kill"
    first = trials[0]
    assert (first.verdict, first.cause) == ("FAIL", "error")
    assert "the server died during the" in first.telemetry["error"] and "signal 9" in first.telemetry["error"]
    assert len(trials) >= 2 and result.trials == trials  # the sprint went on to its next trials
    assert any(t.verdict == "PASS" for t in trials[1:])
    assert [t.phase for t in trials[:2]] == ["boundary", "boundary"] and trials[1].state != first.state
    assert json.dumps(first.telemetry)  # telemetry stays JSON (the sprint's summary file)


@pytest.mark.slow  # a sprint of real trials at several memory levels (~25 s)
def test_the_kv_budget_binds_the_generation_contract_and_a_q8_0_kv_cache_recovers(tmp_path_factory):
    """The generation contract on the small Llama trained here: at 192 KiB an F16 KV cache buys
    256 tokens and every 300-token stream is cut short (kv-capacity); a Q8_0 one buys 512."""
    cache = tmp_path_factory.mktemp("tinyllama")
    c = contract.load("llamacpp-tinyllama-kv")
    plan = sprint.plan(c, "kv_cache", ["192 KiB", "256 KiB"])
    svc = for_contract(c)
    art = svc.prepare("f16", cache)
    assert art.read_bytes()[:4] == b"GGUF"
    trials = [trial.run_trial(c, plan.state(0), art, v, "boundary", max_retries=0, service_spec=svc.trial_spec(cache))
              for v in ("f16", "kv-q8_0")]
    assert (trials[0].verdict, trials[0].cause) == ("FAIL", "kv-capacity")
    assert "short-output" in trials[0].telemetry["error"]
    assert trials[1].verdict == "PASS", trials[1].telemetry.get("error")
    assert trials[1].telemetry["completed"] == c.requests_needed() and trials[1].telemetry["ttft"]


@pytest.mark.slow
def test_luma_sprint_run_qualifies_the_llama_cpp_boundary_and_the_report_renders(luma_home, tmp_path):
    from click.testing import CliRunner

    from luma.cli.main import cli

    run = CliRunner().invoke(cli, ["sprint", "run", "llamacpp-minilm-memory", "--format", "json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    # On a failure, say which trials decided it (a CI log has nothing else to go on).
    why = "\n".join(f"{t['phase']} {t['state']} {t['variant']}: {t['verdict']} {t['cause']} {(t.get('error') or '')[:160]}"
                    for t in out["trials"])
    assert out["problems"] == [] and out["chain_recorded"] and out["recovered"] is True, why
    assert out["binding"] == "host_memory", why
    levels = out["levels"]
    assert levels.index(out["adjacent_fail"]) == levels.index(out["min_pass"]) - 1, why
    assert levels.index(out["requalified_min_pass"]) <= levels.index(out["adjacent_fail"]), why
    chain = json.loads(next((luma_home / "sprints").glob("*/chain.json")).read_text())
    assert chain["provenance"]["engine"]["name"] == "llama.cpp" and chain["attestation"]
    assert chain["software"]["variant"] == "f16" and chain["intervention"]["software"]["variant"] == "q8_0"
    assert CliRunner().invoke(cli, ["rules", "run"]).exit_code == 0
    rep = CliRunner().invoke(cli, ["report", "boundary", "--latest", "--out", str(tmp_path / "r")])
    assert rep.exit_code == 0, rep.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "llamacpp-minilm-memory" in md and "q8_0" in md and "measured" in md
