"""experiments/model/llm.py serve() beyond one replica in a closed loop: deployment shape (replicas,
tensor parallel launch cost, expert parallel), batching (static, continuous, chunked prefill),
arrivals (closed loop, Poisson/gamma at a rate, offline), length mixes, model families; and every
setting the issue listed as not expressible, stated through `luma model predict`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from luma.experiments.model import lengths, llm, llm_config

L70 = llm_config.PRESETS["llama-3.1-70b"]
L8 = llm_config.PRESETS["llama-3.1-8b"]


def _state(**over):
    """One H100-like device per tensor-parallel rank, engine figures of a calibrated engine."""
    s = {"weight_bytes": 2.0, "kv_bytes": 2.0, "flops": 989e12, "bandwidth": 3.35e12, "capacity": 80e9,
         "interconnect": 25e9, "links": 18.0, "link_latency": 2.5e-6, "power": 700.0, "count": 1.0, "tp": 1.0,
         "pp": 1.0, "concurrency": 16.0, "context": 1024.0, "new_tokens": 256.0, "eff_compute": 0.6,
         "eff_bandwidth": 0.7, "eff_link": 0.8, "runtime_bytes": 2.0 * 2**30, "step_overhead": 1e-3,
         "kv_fraction": 0.9}
    s.update(over)
    return s


def test_replicas_split_the_load_and_multiply_the_throughput():
    one = llm.serve(L70, _state(count=2.0, tp=2.0, concurrency=16.0))
    four = llm.serve(L70, _state(count=8.0, tp=2.0, replicas=4.0, concurrency=64.0))
    # Four copies, each with a quarter of the 64 clients: four times one copy with 16.
    assert four["throughput"] == pytest.approx(4 * one["throughput"], rel=1e-9)
    assert four["tpot"] == pytest.approx(one["tpot"]) and four["ttft"] == pytest.approx(one["ttft"])
    # Written as TP8 the same 8 devices serve differently (one copy, all-reduces over 8).
    tp8 = llm.serve(L70, _state(count=8.0, tp=8.0, concurrency=64.0))
    assert tp8["throughput"] != pytest.approx(four["throughput"], rel=0.05)
    assert four["weights_per_device"] == one["weights_per_device"] > tp8["weights_per_device"]


def test_tensor_parallel_launch_cost_grows_with_the_group():
    s = _state(count=8.0, tp=8.0, concurrency=1.0)
    base = llm.serve(L70, s)
    paid = llm.serve(L70, {**s, "tp_overhead": 5e-6})
    # 2 all-reduces per layer x 80 layers x log2(8) x 5 us = 2.4 ms a step.
    assert paid["tpot"] - base["tpot"] == pytest.approx(2 * 80 * 3 * 5e-6, rel=1e-6)
    single = llm.serve(L70, {**_state(count=1.0, tp=1.0, capacity=1e12, concurrency=1.0), "tp_overhead": 5e-6})
    assert single["tpot"] == pytest.approx(llm.serve(L70, _state(capacity=1e12, concurrency=1.0))["tpot"])


def test_offline_prompts_arriving_together_wait_for_each_others_prefill():
    # 16 prompts of 2,048 tokens at once (the case): the first token comes after the
    # batch's prefill, not half a decode step after arrival.
    s = _state(concurrency=16.0, context=2048.0, new_tokens=128.0, batching=llm.BATCHING["continuous"])
    closed = llm.serve(L8, s)
    offline = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["offline"]})
    prefill_all = 2 * L8.matmul_params() * 16 * 2048 / (989e12 * 0.6)
    assert offline["ttft"] >= prefill_all > 5 * closed["ttft"] * 0 + closed["tpot"]
    assert offline["ttft"] > 3 * closed["ttft"]
    # Chunked at 8,192 tokens a step: 4 prefill steps, a prompt's first token on average after 2.5.
    chunked = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["offline"], "batching": llm.BATCHING["chunked"],
                             "chunk": 8192.0})
    assert chunked["ttft"] < offline["ttft"]


def test_offline_pays_each_prompt_s_prefill_once():
    # Compute-bound (bandwidth, overheads and attention out of the way): every request's tokens are
    # multiplied through the weights once, so 3,000 requests queued at once are served at
    # peak / (2 N (P + G)) requests a second -- a first wave's burst is not paid again in the
    # steps that carry the later waves' prompts (that halved a 2,048/128 load's throughput).
    s = _state(concurrency=3000.0, context=2048.0, new_tokens=128.0, arrival=llm.ARRIVALS["offline"],
               batching=llm.BATCHING["continuous"], eff_compute=1.0, bandwidth=1e18, step_overhead=0.0,
               capacity=200e9)
    cfg = L8
    out = llm.serve(cfg, s)
    ideal = 989e12 / (2 * cfg.matmul_params() * (2048 + 128))
    assert out["throughput"] == pytest.approx(ideal, rel=0.1)
    # One wave (every request admitted at once): the burst, then plain decode steps.
    one = llm.serve(cfg, {**s, "concurrency": 64.0})
    assert one["throughput"] == pytest.approx(ideal, rel=0.1)


def test_offline_tokens_of_a_wave_nothing_replaces_come_from_plain_decode_steps():
    # Every request admitted at once: no prompt joins while they decode, so their time per output
    # token is the plain decode step's; a closed loop of as many clients carries a new prompt in
    # some steps. With many waves the steps carrying the later waves' prompts dominate.
    s = _state(concurrency=64.0, context=512.0, new_tokens=64.0, batching=llm.BATCHING["continuous"],
               capacity=200e9)
    closed = llm.serve(L8, s)
    one_wave = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["offline"]})
    assert one_wave["running"] == 64.0 and one_wave["tpot"] < closed["tpot"]
    plain = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["offline"], "batching": llm.BATCHING["static"]})
    assert one_wave["tpot"] == pytest.approx(plain["tpot"], rel=1e-6)
    many = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["offline"], "concurrency": 64.0 * 50, "max_batch": 64.0})
    assert one_wave["tpot"] < many["tpot"] <= closed["tpot"] * (1 + 1e-9)
    assert many["tpot"] == pytest.approx((plain["tpot"] + 49 * closed["tpot"]) / 50, rel=1e-6)


def test_a_chunked_prompt_waits_for_its_own_chunks_not_the_mean_spread():
    # At light load a chunked engine spreads little prefill over each step on average (what TPOT
    # sees), but a new prompt's first token needs all of its own tokens: its TTFT is the whole
    # prompt's prefill when the prompt fits the step's budget, as without chunking.
    s = _state(concurrency=2.0, context=2048.0, new_tokens=512.0)
    chunked = llm.serve(L8, {**s, "batching": llm.BATCHING["chunked"], "chunk": 8192.0})
    whole = llm.serve(L8, {**s, "batching": llm.BATCHING["continuous"]})
    prefill = 2 * L8.matmul_params() * 2048 / (989e12 * 0.6)
    assert chunked["ttft"] >= prefill and chunked["ttft"] == pytest.approx(whole["ttft"], rel=0.15)


def test_a_long_chunked_prompt_pays_its_prefill_once_over_the_steps_it_spans():
    # 20,000 tokens at 8,192 a step span three steps, but the prompt's work is 20,000 tokens, not
    # three full chunks (24,576): compute-bound, its first token costs its own prefill.
    s = _state(concurrency=1.0, context=20000.0, new_tokens=64.0, batching=llm.BATCHING["chunked"], chunk=8192.0,
               eff_compute=1.0, bandwidth=1e18, step_overhead=0.0, capacity=1e12)
    out = llm.serve(L8, s)
    work = (2 * L8.matmul_params() * 20000 + 2 * L8.layers * 20000 ** 2 * L8.attn_dim) / 989e12
    assert out["ttft"] == pytest.approx(work, rel=0.05)


def test_an_arrival_waits_for_the_step_in_flight_only_when_one_is():
    # One client alone finds the engine idle: its first token is its prefill step, no half step
    # before it; with more clients (or a busy open loop) it waits for the running step to end.
    s = _state(concurrency=1.0, context=512.0, new_tokens=128.0, batching=llm.BATCHING["continuous"])
    alone = llm.serve(L8, s)
    two = llm.serve(L8, {**s, "concurrency": 2.0})
    assert two["ttft"] - alone["ttft"] > 0.4 * two["tpot"]
    rare = llm.serve(L8, {**s, "arrival": llm.ARRIVALS["poisson"], "rate": 0.01, "concurrency": 1e6})
    assert rare["ttft"] < alone["ttft"] + 0.05 * rare["tpot"]


def test_a_small_gemm_reaches_less_of_the_peak_than_a_large_one():
    # M / (M + gemm_half) of the compute share: the tile waste slows a 512-token prompt's prefill
    # by a quarter (gemm_half 128) and a 4,096-token one's by a few per cent.
    s = _state(concurrency=1.0, new_tokens=2.0, batching=llm.BATCHING["static"], step_overhead=0.0)

    def slowdown(prompt):
        return llm.serve(L8, {**s, "context": prompt, "gemm_half": 128.0})["ttft"] / \
            llm.serve(L8, {**s, "context": prompt})["ttft"] - 1.0

    assert slowdown(512.0) == pytest.approx(0.25, abs=0.03) and slowdown(4096.0) < 0.05
    # The wasted rows cost at most the weight read: a batch-1 decode stays bandwidth-bound even on
    # a stack that reaches a small share of the peak (a memory-bound kernel fills no tile).
    d = {**s, "context": 16.0, "new_tokens": 256.0, "eff_compute": 0.05}
    slow, plain = llm.serve(L8, {**d, "gemm_half": 1000.0}), llm.serve(L8, d)
    assert slow["tpot"] == pytest.approx(plain["tpot"], rel=0.05)
    assert slow["terms"]["tpot"]["memory_bandwidth"] > slow["terms"]["tpot"]["compute"]


def test_gemms_and_attention_do_not_hide_each_other():
    # A decode step of many long sequences: the GEMMs are compute-bound, attention reads the KV
    # cache; they are separate kernels, so the step costs both, not the larger of the two.
    s = _state(concurrency=512.0, context=512.0, new_tokens=64.0, capacity=1e12, step_overhead=0.0)
    out = llm.serve(L8, s)
    gemm = 2 * L8.matmul_params() * out["running"] / (989e12 * 0.6)
    kv = out["running"] * L8.kv_bytes_per_token() * (512 + 32) / (3.35e12 * 0.7)
    assert out["tpot"] >= 0.95 * (gemm + kv) > 1.3 * max(gemm, kv)


def test_multi_step_scheduling_amortises_the_step_cost_and_delays_new_prompts():
    # vLLM's --num-scheduler-steps 10: scheduling once per ten steps pays its cost once per ten
    # steps (faster decode) while a new prompt waits for the next scheduling point (k / 2 steps).
    s = _state(arrival=llm.ARRIVALS["poisson"], rate=2.0, concurrency=1e6, context=512.0, new_tokens=256.0,
               batching=llm.BATCHING["continuous"], step_overhead=2e-3)
    one, ten = llm.serve(L8, s), llm.serve(L8, {**s, "scheduler_steps": 10.0})
    assert ten["tpot"] < one["tpot"]
    assert ten["ttft"] - one["ttft"] == pytest.approx(4.5 * ten["tpot"], rel=0.3)


def test_an_open_loop_serves_its_rate_until_capacity_then_queues_without_bound():
    s = _state(arrival=llm.ARRIVALS["poisson"], concurrency=1e6, context=512.0, new_tokens=128.0)
    low, mid = llm.serve(L8, {**s, "rate": 1.0}), llm.serve(L8, {**s, "rate": 20.0})
    assert low["throughput"] == pytest.approx(1.0) and mid["throughput"] == pytest.approx(20.0)
    assert low["running"] < mid["running"] and low["ttft"] < mid["ttft"] and low["tpot"] <= mid["tpot"]
    over = llm.serve(L8, {**s, "rate": 1e5})
    assert np.isinf(over["ttft"]) and over["throughput"] < 1e5
    # Burstier arrivals (gamma shape 0.25: c_a^2 = 4) wait longer than Poisson ones at the same rate.
    bursty = llm.serve(L8, {**s, "rate": 20.0, "burstiness": 0.25, "queue_factor": 1.0})
    assert bursty["ttft"] > llm.serve(L8, {**s, "rate": 20.0, "queue_factor": 1.0})["ttft"]


def test_chunked_prefill_spreads_a_long_prompt_over_steps():
    s = _state(concurrency=32.0, context=16384.0, new_tokens=256.0, capacity=200e9)
    whole = llm.serve(L8, {**s, "batching": llm.BATCHING["continuous"]})
    chunked = llm.serve(L8, {**s, "batching": llm.BATCHING["chunked"], "chunk": 2048.0})
    # A 16k prompt at 2k tokens a step spans 8 steps (plus the half step it waits), and the
    # running sequences' steps carry the spread prefill instead of one long stall.
    assert chunked["ttft"] > 8 * chunked["tpot"] * 0.9
    assert chunked["ttft"] != pytest.approx(whole["ttft"], rel=0.05)


def test_a_length_mix_uses_its_means_and_second_moment():
    mix = lengths.preset("sharegpt")
    fixed = llm.serve(L8, _state(context=mix.mean_prompt, new_tokens=mix.mean_output))
    spread = llm.serve(L8, _state(context=mix.mean_prompt, context_sq=mix.mean_prompt_sq, new_tokens=mix.mean_output))
    assert mix.mean_prompt_sq > mix.mean_prompt ** 2
    # The same mean prompt, a wider spread: more attention work in prefill, never less.
    assert spread["terms"]["ttft"]["compute"] >= fixed["terms"]["ttft"]["compute"]


def test_a_mixture_of_experts_reads_the_experts_its_tokens_touch():
    moe = llm_config.PRESETS["mixtral-8x7b"]
    s = _state(capacity=200e9, context=128.0, new_tokens=128.0)
    one = llm.serve(moe, {**s, "concurrency": 1.0})
    many = llm.serve(moe, {**s, "concurrency": 256.0})
    total = moe.total_params() * 2.0  # every expert, fp16
    # Batch 1 reads 2 of 8 experts per layer: far less than every weight.
    assert one["terms"]["tpot"]["memory_bandwidth"] * 3.35e12 * 0.7 < 0.5 * total
    assert many["terms"]["tpot"]["memory_bandwidth"] * 3.35e12 * 0.7 > 0.95 * float(moe.read_params(256.0)) * 2
    # Expert parallelism pays an all-to-all per MoE layer.
    ep = llm.serve(moe, {**s, "count": 2.0, "tp": 2.0, "ep": 2.0, "concurrency": 64.0})
    no_ep = llm.serve(moe, {**s, "count": 2.0, "tp": 2.0, "ep": 1.0, "concurrency": 64.0})
    assert ep["terms"]["tpot"]["interconnect"] > no_ep["terms"]["tpot"]["interconnect"]


def test_sliding_windows_hold_less_kv_at_long_context():
    gemma = llm_config.PRESETS["gemma-2-9b"]
    out = llm.serve(gemma, _state(context=16384.0, new_tokens=128.0, capacity=200e9))
    full = gemma.kv_bytes_per_token("fp16") * (16384 + 128)
    assert out["kv_per_device"] / 16 < full  # half its layers hold 4,096 tokens at most


def test_devices_beyond_one_tensor_parallel_group_are_replicas():
    from luma.cli.model.common import load_contract
    from luma.cli.states import parse_state
    from luma.experiments.model import predict, space

    c = load_contract("llm-chat")

    def run(text):
        return predict.predict(c, space.from_state(parse_state("accelerator_type=nvidia-h100-sxm5-80gb,precision=fp8,"
                                                                + text), c, "llama-3.1-70b", None), None)

    implied, stated = run("accelerator_count=8,tp=2"), run("accelerator_count=8,tp=2,replicas=4")
    assert implied.figures["throughput"] == pytest.approx(stated.figures["throughput"])
    assert any("served as 4 replicas" in n for n in implied.notes)
    assert run("accelerator_count=8").figures["throughput"] != pytest.approx(stated.figures["throughput"], rel=0.02)
    odd = run("accelerator_count=8,tp=3")
    assert any("cannot run this state" in n for n in odd.notes)


def test_a_rate_alone_means_an_open_loop_at_it():
    from luma.cli.model.common import load_contract
    from luma.cli.states import parse_state
    from luma.experiments.model import predict, space

    c = load_contract("llm-chat")
    one = lambda text: predict.predict(c, space.from_state(parse_state(  # noqa: E731
        "accelerator_type=nvidia-h100-sxm5-80gb,precision=fp8," + text), c, "llama-3.1-8b", None), None).figures
    assert one("rate=3")["throughput"] == pytest.approx(3.0)
    assert one("rate=3")["throughput"] == pytest.approx(one("rate=3,arrivals=poisson")["throughput"])
    assert one("rate=3,arrivals=closed")["throughput"] != pytest.approx(3.0, rel=0.01)


NOT_EXPRESSIBLE_BEFORE = [
    ("nvidia-b200-sxm-180gb", "llama-3.1-70b", "accelerator_count=2,precision=fp8"),
    ("B200", "llama-3.1-70b", "accelerator_count=2,precision=fp8"),
    ("nvidia-gb200-186gb", "llama-3.1-70b", "accelerator_count=2,precision=fp8"),
    ("nvidia-gh200-96gb", "llama-3.1-8b", "accelerator_count=1,precision=fp8"),
    ("nvidia-h100-pcie-80gb", "llama-3.1-8b", "accelerator_count=1,precision=bf16"),
    ("nvidia-h100-nvl-94gb", "llama-3.1-70b", "accelerator_count=2,precision=fp8"),
    ("nvidia-l40s-48gb", "llama-3.1-8b", "accelerator_count=1,precision=fp8"),
    ("nvidia-l4-24gb", "llama-3.1-8b", "accelerator_count=1,precision=fp8"),
    ("nvidia-a10g-24gb", "llama-3.1-8b", "accelerator_count=1,precision=fp16"),
    ("nvidia-a100-sxm4-40gb", "llama-3.1-8b", "accelerator_count=1,precision=bf16"),
    ("amd-instinct-mi325x", "llama-3.1-70b", "accelerator_count=1,precision=fp8"),
    ("intel-gaudi2", "llama-3.1-8b", "accelerator_count=1,precision=bf16"),
    ("intel-gaudi3", "llama-3.1-70b", "accelerator_count=2,precision=fp8"),
    # Replicas, Poisson arrivals, a length mix, MoE, a plain FFN, an engine, static batching.
    ("nvidia-h100-sxm5-80gb", "llama-3.1-70b",
     "accelerator_count=8,tp=2,replicas=4,precision=fp8,engine=vllm,arrivals=poisson,rate=12,dataset=sharegpt"),
    ("nvidia-h100-sxm5-80gb", "mixtral-8x7b", "accelerator_count=2,ep=2,precision=fp8,engine=sglang"),
    ("nvidia-h100-sxm5-80gb", "gpt-j-6b", "accelerator_count=1,precision=fp16,batching=static,arrivals=offline"),
    ("nvidia-h200-sxm-141gb", "deepseek-v3", "accelerator_count=8,precision=fp8,engine=sglang,burstiness=0.5,"
                                            "arrivals=poisson,rate=2"),
]


@pytest.mark.parametrize("machine, model, rest", NOT_EXPRESSIBLE_BEFORE)
def test_settings_once_not_expressible_are_stated_and_predicted(luma_home, machine, model, rest):
    from luma.cli.main import cli

    out = CliRunner().invoke(cli, ["model", "predict", "llm-chat", "--llm", model, "--format", "json",
                                   "--state", f"accelerator_type={machine},{rest}"])
    assert out.exit_code == 0, out.output
    p = json.loads(out.stdout)
    # Quality is declared, not predicted: an 8-bit state without a declared quality is UNKNOWN on that
    # clause alone; every serving clause is judged.
    assert p["evidence_class"] == "projected" and p["verdict"] in ("PASS", "FAIL", "UNKNOWN")
    assert all(c["verdict"] in ("PASS", "FAIL") for c in p["clauses"] if c["check"] != "quality")
    assert not any("cannot run this state" in n for n in p["notes"]), p["notes"]
    f = p["figures"]
    assert np.isfinite(f["tpot"]) and f["tpot"] > 0 and f["throughput"] > 0
    assert all(c["band"] is None or 0 < c["band"] < 10 for c in p["clauses"])


@pytest.mark.parametrize("state, field, words", [
    ("engine=fastllm", "state.engine", "unknown engine"),
    ("arrivals=poisson", "state.rate", "need a rate"),
    ("rate=-3", "state.rate", "arrival rate"),
    ("dataset=nosuch", "state.dataset", "nosuch"),
    ("batching=sometimes", "state.batching", "unknown batching"),
    ("burstiness=0", "state.burstiness", "positive"),
])
def test_bad_settings_are_one_line_errors(luma_home, state, field, words):
    from luma.cli.main import cli

    out = CliRunner().invoke(cli, ["model", "predict", "llm-chat", "--llm", "llama-3.1-8b", "--state",
                                   f"accelerator_type=nvidia-h100-sxm5-80gb,{state}"])
    assert out.exit_code in (1, 2) and out.output.startswith("Error:") and out.output.count("\n") == 1, out.output
    assert field in out.output and words in out.output
