"""`luma sprint run`'s boundary table (cli/sprint/run.py `boundary_rows`) on a synthetic sprint of
the TinyLlama KV-cache contract: the real sprint logic (`Sprint.run`, `summarize`) with the
trials replaced by llama.cpp's measured outcome (F16 needs 256 KiB, a Q8_0 cache 192 KiB)."""

from __future__ import annotations

from luma.cli.sprint.run import boundary_rows
from luma.experiments.sprint import contract as contract_mod
from luma.experiments.sprint import pex, states
from luma.experiments.sprint.summary import summarize
from luma.experiments.sprint.trial import Trial, judge

KiB = 1024
STREAM = {"ttft": [0.012] * 36, "tpot": [0.002] * 36, "completed": 36, "throughput": 2.5}
SHORT = {"failure_cause": "kv-capacity", "error": "short-output: 224 of 300 tokens"}


class KVService:
    """Passes when the KV cache holds a stream: 256 KiB with F16, 192 KiB with a Q8_0 cache."""

    interventions = {"int8-kv": "kv-q8_0"}

    def prepare(self, variant, cache):
        return cache / variant

    def workload(self):
        return {"name": "tinyllama-completion", "model": "luma-tinyllama-2l", "task": "text-generation"}

    def passes(self, state, variant) -> bool:
        return state.enforced()["kv_cache"] >= (256 if variant == "f16" else 192) * KiB


def _summary(monkeypatch, tmp_path, levels=None) -> dict:
    monkeypatch.setattr(states, "usable_cpus", lambda: [0, 1])
    contract = contract_mod.load("llamacpp-tinyllama-kv")
    plan = pex.plan(contract, levels=levels)
    service = KVService()

    def fake_trial(contract, state, artifact, variant, phase, **kw):
        tel = STREAM if service.passes(state, variant) else SHORT
        verdict, cause, rows = judge(contract, tel)
        return Trial(state, variant, phase, verdict, cause, rows, tel, 36)

    monkeypatch.setattr(pex, "run_trial", fake_trial)
    s = pex.Sprint(plan, tmp_path)
    s.service = service
    return {**summarize(s.run()), "chain_recorded": True, "records_folder": str(tmp_path)}  # run_sprint adds these


def test_the_tinyllama_table_shows_the_requalified_minimum_and_the_saving_in_kib(monkeypatch, tmp_path):
    """Issue 32: the KV-cache sprint's table lacked the re-qualified minimum PASS (only host_memory
    sprints had it) and said "saves 0.0625 MiB" for 256 KiB -> 192 KiB."""
    out = _summary(monkeypatch, tmp_path)
    assert (out["min_pass"], out["requalified_min_pass"]) == ("256 KiB", "192 KiB")
    rows = {r["item"]: r["value"] for r in boundary_rows(out)}
    assert rows["minimum PASS"] == "256 KiB"
    assert rows["re-qualified minimum PASS"] == "192 KiB"
    assert rows["frontier shift"] == "256 KiB -> 192 KiB  (saves 64 KiB = 25 % of the minimum PASS)"


def test_a_kv_cache_in_tokens_saves_tokens(monkeypatch, tmp_path):
    levels = [states.parse_level("kv_cache", f"{n} token") for n in (128, 256, 384, 512, 640)]
    monkeypatch.setattr(KVService, "passes", lambda self, state, variant:
                        state.enforced()["kv_cache"] >= (512 if variant == "f16" else 384))
    out = _summary(monkeypatch, tmp_path, levels)
    assert out["frontier"]["unit"] == "token"  # not "byte": the chain's frontier_shift says the same
    rows = {r["item"]: r["value"] for r in boundary_rows(out)}
    assert rows["frontier shift"] == "512 token -> 384 token  (saves 128 tokens = 25 % of the minimum PASS)"
