"""A decoder-only transformer's shape, as its config.json describes it: layers, widths, heads,
FFN kind, vocabulary, precision -- what the serving model (llm.py) reads parameters, weight bytes and
KV bytes from. Presets hold the published config.json values of common open models."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from luma.errors import ContractError, UnknownName
from luma.experiments.model.hardware import PRECISION_BYTES
from luma.kb.records.input_files import CONFIG_FILE, read_text
from luma.kb.records.documents import parse_json


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, as its config.json describes it."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    head_dim: int | None = None  # default hidden / heads
    gated_ffn: bool = True  # SwiGLU (gate, up, down) vs a plain two-matrix MLP
    tied_embeddings: bool = False
    params: int | None = None  # a published total overrides the derived count
    precision: str = "fp16"  # weights
    kv_precision: str | None = None  # default: the weights' precision

    def __post_init__(self):
        for f in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ContractError(f"must be a positive whole number, not {v!r}", source=self.name, field=f)
        if self.heads % self.kv_heads:
            raise ContractError(f"{self.heads} attention heads are not a multiple of {self.kv_heads} KV heads",
                              source=self.name, field="kv_heads")
        for f in ("precision", "kv_precision"):
            p = getattr(self, f)
            if p is not None and p not in PRECISION_BYTES:
                raise ContractError(f"unknown precision {p!r} (known: {', '.join(PRECISION_BYTES)})",
                                  source=self.name, field=f)

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def attn_dim(self) -> int:
        return self.heads * self.d_head

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.d_head

    def layer_params(self) -> int:
        attn = self.hidden * self.attn_dim * 2 + self.hidden * self.kv_dim * 2  # q, o; k, v
        ffn = (3 if self.gated_ffn else 2) * self.hidden * self.intermediate
        return attn + ffn + 2 * self.hidden  # two norms

    def total_params(self) -> int:
        if self.params:
            return self.params
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params() + embeddings + self.hidden

    def matmul_params(self) -> int:
        """Parameters a token multiplies through (the input embedding is a lookup, not a matmul)."""
        return self.total_params() - self.vocab * self.hidden * (0 if self.tied_embeddings else 1)

    def weight_bytes(self, precision: str | None = None) -> float:
        """Bytes the weights occupy (every parameter, the input-embedding table included)."""
        return self.total_params() * PRECISION_BYTES[precision or self.precision]

    def weight_read_bytes(self, precision: str | None = None) -> float:
        """Bytes a forward pass reads whole: every matmul weight; the input embedding is a lookup
        of one row per token (tied embeddings are read whole as the LM head)."""
        return self.matmul_params() * PRECISION_BYTES[precision or self.precision]

    def kv_bytes_per_token(self, precision: str | None = None) -> float:
        return 2 * self.layers * self.kv_dim * PRECISION_BYTES[precision or self.kv_precision or self.precision]

    # -- what the serving model reads (llm.serve); dense, full-attention forms ----------------

    @property
    def moe(self) -> bool:
        return False

    def read_params(self, tokens):
        """Matmul parameters a step over `tokens` tokens reads from memory (dense: all, once)."""
        return np.zeros_like(np.asarray(tokens, dtype=np.float64)) + float(self.matmul_params())

    def kv_tokens(self, ctx):
        """Mean over layers of the KV tokens a sequence holds at context `ctx` (no window: ctx)."""
        return np.asarray(ctx, dtype=np.float64)

    def attention_flops_per_token(self, ctx):
        """FLOPs of one token's attention (scores and values) at context `ctx`, all layers."""
        return 4.0 * self.layers * np.asarray(ctx, dtype=np.float64) * self.attn_dim

    def expert_parallel_bytes(self, tokens, act_bytes):
        """Bytes one MoE layer's all-to-all moves for `tokens` tokens (dense: none)."""
        return 0.0 * np.asarray(tokens, dtype=np.float64)

    @classmethod
    def from_hf(cls, name: str, config: dict) -> ModelConfig:
        """From a Hugging Face config.json (LLaMA/Mistral field names)."""
        try:
            heads = int(config["num_attention_heads"])
            dtype = str(config.get("torch_dtype", "float16"))
            return cls(name=name, layers=int(config["num_hidden_layers"]), hidden=int(config["hidden_size"]),
                       heads=heads, kv_heads=int(config.get("num_key_value_heads", heads)),
                       intermediate=int(config["intermediate_size"]), vocab=int(config["vocab_size"]),
                       head_dim=config.get("head_dim"), tied_embeddings=bool(config.get("tie_word_embeddings", False)),
                       precision={"float32": "fp32", "bfloat16": "bf16"}.get(dtype, "fp16"))
        except KeyError as exc:
            raise ContractError(f"config.json lacks {exc.args[0]!r}", source=name, field=exc.args[0]) from None
        except (TypeError, ValueError) as exc:
            raise ContractError(f"config.json has a bad value: {exc}", source=name) from None

    def describe(self) -> dict:
        return {**asdict(self), "total_params": self.total_params(), "weight_bytes": self.weight_bytes(),
                "kv_bytes_per_token": self.kv_bytes_per_token()}


#: Published config.json values (Hugging Face model cards) of a few open models.
PRESETS = {
    "llama-2-7b": ModelConfig("llama-2-7b", 32, 4096, 32, 32, 11008, 32000),
    "llama-2-13b": ModelConfig("llama-2-13b", 40, 5120, 40, 40, 13824, 32000),
    "llama-2-70b": ModelConfig("llama-2-70b", 80, 8192, 64, 8, 28672, 32000),
    "llama-3-8b": ModelConfig("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, precision="bf16"),
    "llama-3-70b": ModelConfig("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, precision="bf16"),
    "mistral-7b": ModelConfig("mistral-7b", 32, 4096, 32, 8, 14336, 32000, precision="bf16"),
}


def config(ref: str | dict, project=None) -> ModelConfig:
    """A preset by name, a config.json path (read within the config-file limit of `project`, the
    command's Settings), or an inline table of ModelConfig fields."""
    if isinstance(ref, dict):
        try:
            return ModelConfig(**ref)
        except TypeError as exc:
            raise ContractError(f"bad model table: {exc}", field="model") from None
    if ref.lower() in PRESETS:
        return PRESETS[ref.lower()]
    path = Path(ref)
    if path.exists():
        # Untrusted like any file a user names: regular, at most 1 MiB, no duplicate keys, not deep.
        doc = parse_json(read_text(path, CONFIG_FILE.of(project)), str(path))
        if not isinstance(doc, dict):
            raise ContractError("a config.json holds one JSON object", source=str(path))
        return ModelConfig.from_hf(path.parent.name or path.stem, doc)
    raise UnknownName(f"unknown model {ref!r} (presets: {', '.join(PRESETS)}; or a config.json path)", field="model")


def with_precision(cfg: ModelConfig, precision: str, kv_precision: str | None = None) -> ModelConfig:
    return replace(cfg, precision=precision, kv_precision=kv_precision)
