"""The analytical transformer-serving model: closed-form checks against published figures, and
properties every state must satisfy (monotone memory, bandwidth never hurts)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import ConfigError, UnknownName
from luma.experiments.model import llm, llm_config

L2_70B = llm_config.PRESETS["llama-2-70b"]


def test_llama_2_70b_kv_cache_is_327680_bytes_per_token():
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 2 bytes (fp16)
    assert L2_70B.kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2 == 327_680


def test_llama_2_7b_fp16_weights_are_13_5_gb():
    cfg = llm_config.PRESETS["llama-2-7b"]
    assert cfg.total_params() == 6_738_415_616  # the published 6.74 B parameters
    assert cfg.weight_bytes() == pytest.approx(13.48e9, rel=1e-3)


@pytest.mark.parametrize("name, billions", [("llama-2-13b", 13.0), ("llama-2-70b", 69.0), ("llama-3-8b", 8.03),
                                            ("llama-3-70b", 70.6), ("mistral-7b", 7.24)])
def test_presets_match_their_published_parameter_counts(name, billions):
    assert llm_config.PRESETS[name].total_params() / 1e9 == pytest.approx(billions, rel=0.01)


def test_precision_scales_weights_and_kv():
    assert L2_70B.weight_bytes("fp8") == L2_70B.weight_bytes() / 2 == L2_70B.weight_bytes("int4") * 2
    assert L2_70B.kv_bytes_per_token("fp8") == 327_680 / 2


def _state(**over):
    s = {"weight_bytes": 2.0, "kv_bytes": 2.0, "flops": 989e12, "bandwidth": 3.35e12, "capacity": 80e9,
         "interconnect": 450e9, "link_latency": 5e-6, "power": 700.0, "count": 1.0, "tp": 1.0, "pp": 1.0,
         "concurrency": 1.0, "context": 1024.0, "new_tokens": 128.0, "eff_compute": 1.0, "eff_bandwidth": 1.0,
         "eff_link": 1.0, "runtime_bytes": 0.0}
    s.update(over)
    return s


def test_weights_only_decode_is_bounded_by_the_weights_it_reads_over_bandwidth():
    cfg = llm_config.PRESETS["llama-2-7b"]
    bound = llm.decode_lower_bound(cfg, 3.35e12)
    # The matmul weights (6.61 B parameters): the input embedding is a lookup of one row per token.
    assert bound == (cfg.total_params() - cfg.vocab * cfg.hidden) * 2 / 3.35e12  # 13.22 GB / 3.35 TB/s = 3.94 ms
    out = llm.serve(cfg, _state(context=1.0, new_tokens=1.0, capacity=1e12))
    assert out["tpot"] >= bound
    # At batch 1 and a short context decode is bandwidth-bound: the bound plus the KV read, nothing else.
    assert out["terms"]["tpot"]["memory_bandwidth"] == pytest.approx(bound, rel=1e-3)


def test_decode_lower_bound_does_not_read_the_input_embedding_table_per_token():
    # Llama-3-8B's 128,256 x 4,096 input embedding is 1.05 GB of its 16.06 GB of bf16 weights
    # (6.5 %); a token reads one 8 KiB row of it, not the table.
    cfg = llm_config.PRESETS["llama-3-8b"]
    table = cfg.vocab * cfg.hidden * 2
    assert llm.decode_lower_bound(cfg, 1.0) == cfg.weight_bytes() - table
    one = llm.serve(cfg, _state(weight_bytes=2.0, context=1.0, new_tokens=1.0, capacity=1e12))
    assert one["terms"]["tpot"]["memory_bandwidth"] * 3.35e12 < cfg.weight_bytes() - table * 0.99
    assert one["weights_per_device"] == cfg.weight_bytes()  # the table still occupies memory


def test_seventy_billion_needs_more_than_one_80_gb_device_in_fp16():
    one = llm.serve(L2_70B, _state())
    two = llm.serve(L2_70B, _state(count=2.0, tp=2.0))
    assert one["memory_min"] > 80e9 > two["memory_min"]
    assert two["slots"] >= 1 and one["slots"] == 0


def test_tensor_parallelism_pays_for_its_all_reduces():
    no_link = llm.serve(L2_70B, _state(count=4.0, tp=4.0, interconnect=1e6, capacity=1e12))
    fast = llm.serve(L2_70B, _state(count=4.0, tp=4.0, interconnect=900e9, capacity=1e12))
    assert no_link["tpot"] > fast["tpot"]
    assert fast["terms"]["tpot"]["interconnect"] > 0
    single = llm.serve(L2_70B, _state(capacity=1e12))
    assert single["terms"]["tpot"]["interconnect"] == 0


def test_requests_wait_when_kv_room_runs_out():
    # 70B fp16 over 2 x 80 GB leaves ~20 GB for KV: far fewer than 256 sequences of 4,096 tokens.
    out = llm.serve(L2_70B, _state(count=2.0, tp=2.0, concurrency=256.0, context=4096.0))
    assert 1 <= out["slots"] < 256 and out["wait"] > 0
    # A steady closed loop: every request queues behind the 256 - n others, n served per
    # generation (Little's law), so the wait is in every quantile.
    t_gen = out["slots"] / out["throughput"]
    assert out["wait_fraction"] == 1 and out["wait"] == pytest.approx((256 - out["slots"]) / out["slots"] * t_gen)
    burst = llm.serve(L2_70B, _state(count=2.0, tp=2.0, concurrency=256.0, context=4096.0, waves=True))
    assert 0 < burst["wait_fraction"] < 1  # static batches: only the later rounds wait


def test_energy_is_power_times_time():
    out = llm.serve(L2_70B, _state(count=2.0, tp=2.0))
    n = out["slots"]
    t_gen = n / out["throughput"]  # one generation of the batch
    assert out["energy_per_request"] == pytest.approx(700 * 2 * t_gen / n, rel=1e-9)
    assert out["energy_per_token"] < out["energy_per_request"]


finite = {"allow_nan": False, "allow_infinity": False}


@settings(max_examples=60, deadline=None)
@given(st.floats(1, 256, **finite), st.floats(16, 8192, **finite),
       st.floats(1, 2048, **finite), st.sampled_from([1.0, 2.0, 4.0, 8.0]), st.booleans())
def test_every_energy_figure_is_power_over_the_work_done(concurrency, context, new_tokens, tp, waves):
    # One definition: devices x power x wall time / work; the prefills interleaved into the decode
    # steps of continuous batching are part of the wall time (they were left out of J/token).
    out = llm.serve(L2_70B, _state(concurrency=concurrency, context=context, new_tokens=new_tokens, count=tp, tp=tp,
                                   capacity=1e13, waves=waves))
    watts = 700.0 * tp
    assert out["energy_per_token"] == pytest.approx(watts / out["token_throughput"], rel=1e-9)
    assert out["energy_per_request"] == pytest.approx(watts / out["throughput"], rel=1e-9)


def test_energy_per_token_counts_the_interleaved_prefill():
    # 32 chats of 2,048 + 256 tokens on 4 devices: every decode step carries a share of a new
    # prompt's prefill (in TPOT), so a token costs at least the devices' energy over one TPOT
    # shared by the running sequences -- not a bare decode step's share (1.75 J vs 3.30 J once).
    out = llm.serve(L2_70B, _state(concurrency=32.0, context=2048.0, new_tokens=256.0, count=4.0, tp=4.0))
    assert out["energy_per_token"] >= 700.0 * 4 * out["tpot"] * 255 / 256 / out["slots"]


@settings(max_examples=60, deadline=None)
@given(st.floats(1, 16384, **finite), st.floats(1, 1024, **finite), st.floats(1, 2, **finite), st.floats(1, 2, **finite))
def test_memory_grows_with_context_and_concurrency(context, concurrency, more_ctx, more_conc):
    base = llm.serve(L2_70B, _state(context=context, concurrency=concurrency))
    longer = llm.serve(L2_70B, _state(context=context * more_ctx, concurrency=concurrency))
    busier = llm.serve(L2_70B, _state(context=context, concurrency=concurrency * more_conc))
    assert longer["memory_need"] >= base["memory_need"] and busier["memory_need"] >= base["memory_need"]
    assert longer["kv_per_device"] >= base["kv_per_device"] <= busier["kv_per_device"]


@settings(max_examples=60, deadline=None)
@given(st.floats(1e11, 1e13, **finite), st.floats(1, 10, **finite), st.floats(1, 512, **finite),
       st.floats(16, 8192, **finite), st.sampled_from([1.0, 2.0, 4.0, 8.0]))
def test_more_bandwidth_is_never_slower(bandwidth, factor, concurrency, context, tp):
    kw = {"concurrency": concurrency, "context": context, "count": tp, "tp": tp, "capacity": 1e13}
    slow = llm.serve(L2_70B, _state(bandwidth=bandwidth, **kw))
    fast = llm.serve(L2_70B, _state(bandwidth=bandwidth * factor, **kw))
    assert fast["tpot"] <= slow["tpot"] * (1 + 1e-12)
    assert fast["throughput"] >= slow["throughput"] * (1 - 1e-12)
    # TTFT alone may rise a little in a closed loop (faster decoding brings prompts sooner, and
    # they contend for prefill); a whole request never gets slower.
    latency = {k: o["ttft"] + 127.0 * o["tpot"] for k, o in (("s", slow), ("f", fast))}
    assert latency["f"] <= latency["s"] * (1 + 1e-12)
    alone = {k: llm.serve(L2_70B, _state(bandwidth=b, **{**kw, "concurrency": 1.0}))["ttft"]
             for k, b in (("s", bandwidth), ("f", bandwidth * factor))}
    assert alone["f"] <= alone["s"] * (1 + 1e-12)  # with no one to contend with, TTFT never rises


def test_the_model_is_vectorised():
    ctx = np.array([512.0, 1024.0, 2048.0, 4096.0])
    out = llm.serve(L2_70B, _state(context=ctx, capacity=1e12))
    assert out["ttft"].shape == (4,) and np.all(np.diff(out["ttft"]) > 0)


def _flat(out: dict, prefix: str = "") -> dict:
    flat = {}
    for k, v in out.items():
        flat.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
    return flat


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(llm_config.PRESETS)), st.sampled_from([1.0, 2.0, 8.0]),
                          st.floats(1, 512, **finite), st.floats(16, 32768, **finite), st.floats(1, 1024, **finite),
                          st.sampled_from(sorted(llm.ARRIVALS.values())),
                          st.sampled_from(sorted(llm.BATCHING.values())),
                          st.floats(0.01, 50, **finite)), min_size=1, max_size=12))
def test_a_stack_of_models_gives_each_row_its_own_models_figures(rows):
    """Calibration evaluates many models in one call (ModelStack): row by row, the very numbers each
    model's own call gives, for dense, MoE, sliding-window and latent-attention models alike."""
    def state(tp, conc, ctx, new, arrival, batching, rate):
        return _state(tp=tp, count=tp, concurrency=conc, context=ctx, new_tokens=new, arrival=arrival,
                      batching=batching, rate=rate, chunk=512.0, capacity=640e9, ep=tp, gemm_half=64.0,
                      step_overhead=1e-3, seq_overhead=1e-5, kv_block=16.0)
    alone = [_flat(llm.serve(llm_config.PRESETS[name], state(*rest))) for name, *rest in rows]
    cols = [state(*rest) for _, *rest in rows]
    stacked = {k: np.array([c[k] for c in cols], dtype=np.float64) for k in cols[0]}
    together = _flat(llm.serve(llm_config.ModelStack([llm_config.PRESETS[name] for name, *_ in rows]), stacked))
    assert set(together) == set(alone[0])
    for key, values in together.items():
        want = np.array([float(np.asarray(a[key])) for a in alone])
        assert np.array_equal(np.broadcast_to(values, want.shape), want, equal_nan=True), key


def test_config_from_hugging_face_json(tmp_path):
    path = tmp_path / "mistral" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                                "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
                                "torch_dtype": "bfloat16"}))
    cfg = llm_config.config(str(path))
    assert cfg.total_params() == llm_config.PRESETS["mistral-7b"].total_params() and cfg.precision == "bf16"
    path.write_text(json.dumps({"hidden_size": 4096}))
    with pytest.raises(ConfigError, match="lacks"):
        llm_config.config(str(path))


def test_bad_model_inputs():
    with pytest.raises(UnknownName, match="unknown model 'gpt-9'"):
        llm_config.config("gpt-9")
    with pytest.raises(ConfigError, match="not a multiple"):
        llm_config.ModelConfig("x", 2, 64, 6, 4, 128, 100)
    with pytest.raises(ConfigError, match="positive whole number"):
        llm_config.ModelConfig("x", -1, 64, 4, 4, 128, 100)
    with pytest.raises(ConfigError, match="unknown precision"):
        llm_config.ModelConfig("x", 2, 64, 4, 4, 128, 100, precision="fp7")
