"""A Hugging Face config.json read into ModelConfig fields: the field names each model family uses
(LLaMA's `num_hidden_layers`, GPT's `n_layer`, Falcon's `n_head_kv` ...), which families gate
their FFN, mixture-of-experts and multi-head-latent-attention sizes, and sliding-window layers.

The FFN kind is never guessed from `hidden_act`: Gemma gates a GELU, GPT-NeoX does not. It is
read from `model_type` (or `architectures` when the type is missing); a family not listed here
needs the config to state `"gated_ffn": true|false` itself, else the reader refuses it naming
`model_type`.
"""

from __future__ import annotations

import math

from luma.errors import ContractError

#: model_type -> (FFN gated, embeddings tied when the config does not say), per each family's
#: transformers configuration class default.
FAMILIES = {
    # Gated (SwiGLU / GeGLU: gate, up, down).
    "llama": (True, False), "mistral": (True, False), "mixtral": (True, False), "qwen2": (True, False),
    "qwen2_moe": (True, False), "qwen3": (True, False), "qwen3_moe": (True, False), "gemma": (True, True),
    "gemma2": (True, True), "gemma3_text": (True, True), "deepseek_v2": (True, False), "deepseek_v3": (True, False),
    "phi3": (True, False), "olmo2": (True, False), "granite": (True, False),
    # Non-gated (two matrices and an activation).
    "gptj": (False, False), "gpt2": (False, True), "gpt_neox": (False, False), "gpt_neo": (False, True),
    "gpt_bigcode": (False, True), "falcon": (False, True), "RefinedWeb": (False, True),
    "RefinedWebModel": (False, True), "opt": (False, True), "bloom": (False, True), "phi": (False, False),
    "starcoder2": (False, True),
}
#: architectures[0] -> model_type, for configs that leave model_type out.
ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3", "Phi3ForCausalLM": "phi3",
    "GPTJForCausalLM": "gptj", "GPT2LMHeadModel": "gpt2", "GPTNeoXForCausalLM": "gpt_neox",
    "FalconForCausalLM": "falcon", "RWForCausalLM": "RefinedWeb", "OPTForCausalLM": "opt",
    "BloomForCausalLM": "bloom", "PhiForCausalLM": "phi",
}
#: Families whose MLP is 4 x hidden when the config leaves its width out (n_inner: null).
_FOUR_X = {"gptj", "gpt2", "gpt_neo", "gpt_bigcode", "falcon", "RefinedWeb", "RefinedWebModel", "bloom"}
#: Families whose layers alternate sliding-window and full attention (even layers slide) when
#: the config has no layer_types list.
_ALTERNATING = {"gemma2"}
_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _first(config: dict, *names):
    """The first of `names` the config states (not null), with its name; (None, names[0]) if none."""
    for n in names:
        if config.get(n) is not None:
            return config[n], n
    return None, names[0]


def _int(config: dict, *names, default=None) -> int:
    value, name = _first(config, *names)
    if value is None:
        if default is not None:
            return default
        raise ContractError(f"config.json lacks {name!r}", field=name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ContractError(f"config.json {name} must be a whole number, not {value!r}", field=name)
    return int(value)


def family(config: dict) -> str:
    """The model_type, from the config or its architectures."""
    mt = config.get("model_type")
    if mt is None and isinstance(config.get("architectures"), list) and config["architectures"]:
        mt = ARCHITECTURES.get(str(config["architectures"][0]))
    return str(mt) if mt is not None else ""


def _ffn(config: dict, mt: str, hidden: int) -> tuple[bool, bool, int]:
    """(gated, tied-embeddings default, FFN width)."""
    if "gated_ffn" in config:
        if not isinstance(config["gated_ffn"], bool):
            raise ContractError("config.json gated_ffn must be true or false", field="gated_ffn")
        gated, tied = config["gated_ffn"], False
    elif mt in FAMILIES:
        gated, tied = FAMILIES[mt]
    else:
        known = ", ".join(sorted(FAMILIES))
        raise ContractError(f"config.json model_type {mt or None!r} is not a family LUMA knows ({known}); "
                            "state \"gated_ffn\": true|false in the config", field="model_type")
    width = _int(config, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size",
                 default=4 * hidden if mt in _FOUR_X else None)
    return gated, tied, width


def _kv_heads(config: dict, heads: int) -> int:
    value, _ = _first(config, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if value is not None:
        return _int(config, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    return 1 if config.get("multi_query") else heads  # Falcon-7B: multi_query, one KV head


def _moe(config: dict, layers: int, width: int) -> dict:
    experts = _int(config, "num_local_experts", "n_routed_experts", "num_experts", default=0)
    if not experts:
        return {}
    k = _int(config, "num_experts_per_tok")
    expert = _int(config, "moe_intermediate_size", default=width)
    shared = _int(config, "n_shared_experts", default=0) * expert + _int(config, "shared_expert_intermediate_size", default=0)
    dense = _int(config, "first_k_dense_replace", default=0)  # DeepSeek: the first layers keep a dense FFN
    step, only = _int(config, "decoder_sparse_step", default=1), config.get("mlp_only_layers") or []
    if not isinstance(only, list):
        raise ContractError("config.json mlp_only_layers must be a list of layer indices", field="mlp_only_layers")
    if step > 1 or only:  # Qwen-MoE: layer i is sparse when (i + 1) % step == 0 and i is not MLP-only
        dense = sum(1 for i in range(layers) if i in only or (i + 1) % max(step, 1) != 0)
    return {"experts": experts, "experts_per_token": k, "expert_intermediate": expert,
            "shared_intermediate": shared, "dense_layers": dense}


def _mla(config: dict) -> dict:
    if not config.get("kv_lora_rank"):
        return {}
    return {"kv_lora_rank": _int(config, "kv_lora_rank"), "q_lora_rank": _int(config, "q_lora_rank", default=0),
            "qk_rope_head_dim": _int(config, "qk_rope_head_dim"), "qk_nope_head_dim": _int(config, "qk_nope_head_dim"),
            "v_head_dim": _int(config, "v_head_dim")}


def _window(config: dict, mt: str, layers: int) -> dict:
    """The sliding window and how many layers use it, as the config states them."""
    if config.get("sliding_window") is None or config.get("use_sliding_window") is False:
        return {}
    window = _int(config, "sliding_window")
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        count = sum(1 for t in types if t == "sliding_attention")
    elif mt in _ALTERNATING:
        count = math.ceil(layers / 2)
    elif config.get("sliding_window_pattern"):  # Gemma-3: every pattern-th layer is global
        p = _int(config, "sliding_window_pattern")
        count = sum(1 for i in range(layers) if (i + 1) % p)
    elif config.get("use_sliding_window") and config.get("max_window_layers") is not None:
        count = max(layers - _int(config, "max_window_layers"), 0)  # Qwen2: layers from max_window_layers on
    else:
        count = layers  # Mistral-7B v0.1, Phi-3-mini: every layer
    return {"sliding_window": window, "window_layers": count} if count else {}


def _precision(config: dict) -> dict:
    """Weights' precision and, when the weights are quantised, the KV cache's (the dtype's)."""
    dtype, _ = _first(config, "torch_dtype", "dtype")
    native = _DTYPES.get(str(dtype), "fp16")
    quant = config.get("quantization_config")
    if isinstance(quant, dict) and str(quant.get("quant_method", "")).lower() in ("fp8", "fbgemm_fp8"):
        return {"precision": "fp8", "kv_precision": native}  # DeepSeek-V3 ships fp8 weights, keeps a bf16 cache
    return {"precision": native}


def fields(config: dict) -> dict:
    """ModelConfig keyword arguments from a config.json object (name excluded)."""
    mt = family(config)
    heads = _int(config, "num_attention_heads", "n_head")
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    gated, tied_default, width = _ffn(config, mt, hidden)
    tied = config.get("tie_word_embeddings", tied_default)
    head_dim = config.get("head_dim")
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": _kv_heads(config, heads),
            "intermediate": width, "vocab": _int(config, "vocab_size"),
            "head_dim": _int(config, "head_dim") if head_dim is not None else None,
            "gated_ffn": gated, "tied_embeddings": bool(tied), **_precision(config),
            **_moe(config, layers, width), **_mla(config), **_window(config, mt, layers)}
