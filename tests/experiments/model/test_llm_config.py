"""Model families: parameter counts against the figures model cards publish, KV bytes in closed
form (GQA, MQA, MLA), sliding windows, the mixture-of-experts read model, config.json reading
across field-name conventions, and bad configs refused with the field named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from luma.errors import ContractError
from luma.experiments.model import llm_config
from luma.experiments.model.llm_config import PRESETS, ModelConfig

# (preset, published total, published active or None, where it is published)
PUBLISHED = [
    ("mixtral-8x7b", 46.7e9, 12.9e9, "https://mistral.ai/news/mixtral-of-experts (46.7B total, 12.9B active)"),
    ("mixtral-8x22b", 141e9, 39e9, "https://mistral.ai/news/mixtral-8x22b (141B total, 39B active)"),
    ("deepseek-v3", 671e9, 37e9, "https://huggingface.co/deepseek-ai/DeepSeek-V3 (671B total, 37B activated)"),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, "https://huggingface.co/Qwen/Qwen3-30B-A3B (30.5B in total and 3.3B activated)"),
    ("llama-3.1-405b", 405e9, None, "https://huggingface.co/meta-llama/Llama-3.1-405B"),
    ("llama-3.1-70b", 70.6e9, None, "https://huggingface.co/meta-llama/Llama-3.1-70B (70.6B)"),
    ("llama-3.1-8b", 8.03e9, None, "https://huggingface.co/meta-llama/Llama-3.1-8B (8.03B)"),
    ("qwen2.5-7b", 7.61e9, None, "https://huggingface.co/Qwen/Qwen2.5-7B (Number of Parameters: 7.61B)"),
    ("gpt-j-6b", 6_053_381_344, None, "https://huggingface.co/EleutherAI/gpt-j-6b (n_parameters 6053381344)"),
    ("phi-3-mini", 3.8e9, None, "https://huggingface.co/microsoft/Phi-3-mini-4k-instruct (3.8B parameters)"),
    ("mistral-7b", 7.24e9, None, "https://huggingface.co/mistralai/Mistral-7B-v0.1 (7.24B)"),
]


@pytest.mark.parametrize("name, total, active, source", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_total_and_active_parameters_match_the_published_figures(name, total, active, source):
    cfg = PRESETS[name]
    assert cfg.total_params() == pytest.approx(total, rel=0.02), source
    assert cfg.active_params() == pytest.approx(active or total, rel=0.02), source


def test_every_issue_31_preset_ships():
    wanted = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.3-70b", "mixtral-8x7b", "mixtral-8x22b",
              "qwen2.5-7b", "qwen2.5-72b", "qwen3-30b-a3b", "deepseek-v3", "gpt-j-6b", "falcon-40b", "gemma-2-9b",
              "phi-3-mini", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b"}
    assert wanted <= set(PRESETS)


def test_dense_models_are_active_whole_and_matmul_excludes_the_input_embedding():
    cfg = PRESETS["llama-3.1-8b"]
    assert not cfg.moe and cfg.moe_layers == 0 and cfg.expert_params() == 0
    assert cfg.active_params() == cfg.total_params()
    assert cfg.matmul_params() == cfg.total_params() - 128256 * 4096
    tied = PRESETS["gemma-2-9b"]  # tied: the table is the LM head, multiplied through
    assert tied.tied_embeddings and tied.matmul_params() == tied.total_params()


def test_mixtral_expert_arithmetic():
    m = PRESETS["mixtral-8x7b"]
    assert (m.experts, m.experts_per_token, m.moe_layers) == (8, 2, 32)
    assert m.expert_params() == 3 * 4096 * 14336
    assert m.total_params() - m.active_params() == 32 * 6 * m.expert_params()


def test_deepseek_v3_keeps_three_dense_layers_and_a_shared_expert():
    d = PRESETS["deepseek-v3"]
    assert (d.experts, d.experts_per_token, d.dense_layers, d.moe_layers) == (256, 8, 3, 58)
    assert d.expert_params() == 3 * 7168 * 2048 and d.shared_intermediate == 2048
    assert d.precision == "fp8" and d.kv_precision == "bf16"


# KV bytes per token in closed form: 2 x layers x kv_heads x head_dim x bytes; MLA: the latent.
@pytest.mark.parametrize("name, expected", [
    ("llama-3.1-405b", 2 * 126 * 8 * 128 * 2),  # GQA
    ("falcon-40b", 2 * 60 * 8 * 64 * 2),  # 8 KV heads of 64
    ("gpt-j-6b", 2 * 28 * 16 * 256 * 2),  # MHA
    ("gemma-2-9b", 2 * 42 * 8 * 256 * 2),  # head_dim 256 stated, not hidden / heads
    ("qwen3-30b-a3b", 2 * 48 * 4 * 128 * 2),
    ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA: one latent + rope key per layer, bf16 cache
])
def test_kv_bytes_per_token_closed_forms(name, expected):
    assert PRESETS[name].kv_bytes_per_token() == expected


def test_mla_kv_is_one_replicated_latent():
    d = PRESETS["deepseek-v3"]
    assert d.kv_vectors_per_token() == 61 and d.kv_shards == 1 and d.kv_dim == 576
    assert d.kv_bytes_per_token("fp8") == 61 * 576


def test_read_params_is_monotone_in_tokens_and_bounded_by_the_total():
    tokens = np.array([1.0, 2.0, 8.0, 64.0, 512.0, 4096.0, 65536.0])
    for name in ("mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b"):
        cfg = PRESETS[name]
        read = cfg.read_params(tokens)
        assert read[0] == pytest.approx(cfg.matmul_params())  # one token: its own experts
        assert np.all(np.diff(read) >= 0) and np.diff(read)[0] > 0 and np.all(read <= cfg.total_params())
        # Every expert touched: all matmul weights, the input embedding excepted.
        assert read[-1] == pytest.approx(cfg.total_params() - cfg.vocab * cfg.hidden, rel=1e-6)


def test_read_params_follows_uniform_routing():
    m = PRESETS["mixtral-8x7b"]
    # Two tokens touch 8 (1 - (6/8)^2) = 3.5 experts per layer on average.
    extra = m.read_params(2.0) - m.matmul_params()
    assert extra == pytest.approx(32 * 1.5 * m.expert_params())


def test_dense_read_params_broadcasts():
    cfg = PRESETS["llama-3.1-70b"]
    out = cfg.read_params(np.ones((2, 3)))
    assert out.shape == (2, 3) and np.all(out == cfg.matmul_params())


def test_expert_parallel_bytes():
    m = PRESETS["mixtral-8x7b"]
    assert m.expert_parallel_bytes(np.array([1.0, 10.0]), 2.0).tolist() == [2 * 4096 * 2 * 2, 20 * 4096 * 2 * 2]
    assert PRESETS["llama-3-8b"].expert_parallel_bytes(10.0, 2.0) == 0.0


def test_kv_tokens_with_windows():
    ctx = np.array([1000.0, 4096.0, 10000.0])
    assert PRESETS["llama-3.1-8b"].kv_tokens(ctx).tolist() == ctx.tolist()
    assert PRESETS["mistral-7b"].kv_tokens(ctx).tolist() == [1000.0, 4096.0, 4096.0]  # v0.1: every layer
    gemma = PRESETS["gemma-2-9b"]  # half the layers slide over 4096 tokens
    assert gemma.window_layers == 21 and gemma.kv_tokens(ctx).tolist() == [1000.0, 4096.0, (4096 + 10000) / 2]
    assert PRESETS["qwen2.5-7b"].sliding_window is None  # use_sliding_window: false


def test_attention_flops():
    cfg = PRESETS["llama-3.1-8b"]
    assert cfg.attention_flops_per_token(1000.0) == 4 * 32 * 1000 * 4096
    assert PRESETS["mistral-7b"].attention_flops_per_token(10000.0) == 4 * 32 * 4096 * 4096  # capped
    d = PRESETS["deepseek-v3"]  # absorbed MLA: scores over 512 + 64, values over 512, 128 heads
    assert d.attention_flops_per_token(1000.0) == 2 * 61 * 1000 * 128 * (576 + 512)


def test_non_gated_families():
    for name in ("gpt-j-6b", "falcon-40b"):
        assert not PRESETS[name].gated_ffn
    j, f = PRESETS["gpt-j-6b"], PRESETS["falcon-40b"]
    assert j.intermediate == 4 * 4096 and f.intermediate == 4 * 8192  # n_inner null: 4 x hidden
    assert (f.heads, f.kv_heads, f.d_head, f.tied_embeddings) == (128, 8, 64, True)


def _hf(tmp_path, doc, name="m"):
    path = tmp_path / name / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(doc))
    return llm_config.config(str(path))


def test_gpt_style_field_names(tmp_path):
    cfg = _hf(tmp_path, {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257})
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.intermediate) == (12, 768, 12, 12, 3072)
    assert not cfg.gated_ffn and cfg.tied_embeddings
    mqa = _hf(tmp_path, {"model_type": "falcon", "num_hidden_layers": 32, "hidden_size": 4544, "num_attention_heads": 71,
                         "multi_query": True, "vocab_size": 65024}, "f7")
    assert mqa.kv_heads == 1 and mqa.kv_bytes_per_token() == 2 * 32 * 64 * 2


def test_family_from_architectures_and_stated_ffn(tmp_path):
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    assert _hf(tmp_path, {**base, "architectures": ["GPTNeoXForCausalLM"]}).gated_ffn is False
    assert _hf(tmp_path, {**base, "model_type": "newfam", "gated_ffn": True}, "n").gated_ffn is True


def test_qwen_moe_sparse_step_and_mlp_only_layers(tmp_path):
    doc = {"model_type": "qwen2_moe", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4,
           "intermediate_size": 256, "moe_intermediate_size": 32, "num_experts": 16, "num_experts_per_tok": 4,
           "shared_expert_intermediate_size": 128, "decoder_sparse_step": 2, "mlp_only_layers": [1], "vocab_size": 100}
    cfg = _hf(tmp_path, doc)
    # Sparse where (i + 1) % 2 == 0 and i != 1: layers 3, 5, 7.
    assert (cfg.moe_layers, cfg.dense_layers, cfg.shared_intermediate) == (3, 5, 128)


def test_layer_types_count_the_sliding_layers(tmp_path):
    doc = {"model_type": "gemma3_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 100, "sliding_window": 16,
           "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    cfg = _hf(tmp_path, doc)
    assert cfg.window_layers == 3 and float(cfg.kv_tokens(100.0)) == (3 * 16 + 100) / 4


@pytest.mark.parametrize("doc, field", [
    ({"model_type": "mystery", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100}, "model_type"),
    ({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100},
     "model_type"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100},
     "num_hidden_layers"),
    ({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100},
     "intermediate_size"),
    ({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100, "num_local_experts": 8}, "num_experts_per_tok"),
    ({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100, "num_local_experts": 8, "num_experts_per_tok": 9}, "experts_per_token"),
    ({"model_type": "llama", "num_hidden_layers": 2.5, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100}, "num_hidden_layers"),
    ({"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 128, "vocab_size": 100, "kv_lora_rank": 16}, "qk_rope_head_dim"),
])
def test_bad_configs_are_refused_naming_the_field(tmp_path, doc, field):
    with pytest.raises(ContractError) as exc:
        _hf(tmp_path, doc, "bad")
    assert exc.value.field == field and exc.value.source == "bad"
    assert "\n" not in exc.value.one_line()


def test_bad_model_tables():
    with pytest.raises(ContractError, match="dense_layers"):
        ModelConfig("x", 2, 64, 4, 4, 128, 100, experts=4, experts_per_token=2, dense_layers=3)
    with pytest.raises(ContractError, match="sliding_window"):
        ModelConfig("x", 2, 64, 4, 4, 128, 100, sliding_window=0)
    with pytest.raises(ContractError, match="experts"):
        ModelConfig("x", 2, 64, 4, 4, 128, 100, experts=-1)


def test_describe_carries_the_family_figures():
    d = PRESETS["qwen3-30b-a3b"].describe()
    assert d["experts"] == 128 and d["active_params"] < d["total_params"]
