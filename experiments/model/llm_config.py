"""A decoder-only transformer's shape, as its config.json describes it: layers, widths, heads
(MHA, GQA, MQA or DeepSeek's multi-head latent attention), a gated or plain FFN, mixture-of-experts
layers, sliding-window layers, vocabulary, precision -- what the serving model (llm.py) reads
parameters, weight and KV bytes, attention FLOPs and expert-parallel traffic from.

Presets are the published config.json values of common open models (families/<name>.json, each
naming the Hugging Face config it transcribes), read by the same reader as a user's config.json.

Mixture of experts: a token multiplies through its `experts_per_token` routed experts (plus any
shared ones); a step over n tokens reads the experts they touch -- under uniform routing
E·(1 − (1 − k/E)^n) distinct experts per MoE layer, not all E (read_params).
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from luma.errors import ContractError, UnknownName
from luma.experiments.model import hf_config
from luma.experiments.model.hardware import PRECISION_BYTES
from luma.kb.records.documents import parse_json
from luma.kb.records.input_files import CONFIG_FILE, read_text


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, as its config.json describes it."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int  # the dense FFN width
    vocab: int
    head_dim: int | None = None  # default hidden / heads
    gated_ffn: bool = True  # SwiGLU/GeGLU (gate, up, down) vs a plain two-matrix MLP
    tied_embeddings: bool = False
    params: int | None = None  # a published total overrides the derived count
    precision: str = "fp16"  # weights
    kv_precision: str | None = None  # default: the weights' precision
    # Mixture of experts (experts 0: dense).
    experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    expert_intermediate: int | None = None  # one routed expert's FFN width (default: intermediate)
    shared_intermediate: int = 0  # the always-on shared experts' FFN width, all of them together
    dense_layers: int = 0  # layers of an MoE model that keep a dense FFN (DeepSeek's first three)
    # Sliding-window attention (None: every layer attends over the whole context).
    sliding_window: int | None = None
    window_layers: int | None = None  # how many layers use the window (default: all)
    # Multi-head latent attention (kv_lora_rank 0: standard attention).
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self):
        for f in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"):
            _whole(self, f, getattr(self, f), least=1)
        for f in ("experts", "experts_per_token", "shared_intermediate", "dense_layers", "kv_lora_rank", "q_lora_rank",
                  "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            _whole(self, f, getattr(self, f), least=0)
        for f in ("head_dim", "expert_intermediate", "sliding_window", "window_layers"):
            if getattr(self, f) is not None:
                _whole(self, f, getattr(self, f), least=0 if f == "window_layers" else 1)
        if self.heads % self.kv_heads:
            raise ContractError(f"{self.heads} attention heads are not a multiple of {self.kv_heads} KV heads",
                                source=self.name, field="kv_heads")
        if self.experts and not 1 <= self.experts_per_token <= self.experts:
            raise ContractError(f"experts_per_token must be 1..{self.experts}, not {self.experts_per_token}",
                                source=self.name, field="experts_per_token")
        if self.dense_layers > self.layers or (self.window_layers or 0) > self.layers:
            raise ContractError(f"more layers than the model's {self.layers}", source=self.name,
                                field="dense_layers" if self.dense_layers > self.layers else "window_layers")
        if self.kv_lora_rank and not (self.qk_rope_head_dim and self.qk_nope_head_dim and self.v_head_dim):
            raise ContractError("latent attention needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim",
                                source=self.name, field="kv_lora_rank")
        for f in ("precision", "kv_precision"):
            p = getattr(self, f)
            if p is not None and p not in PRECISION_BYTES:
                raise ContractError(f"unknown precision {p!r} (known: {', '.join(PRECISION_BYTES)})",
                                    source=self.name, field=f)

    # Attention shape.
    @property
    def mla(self) -> bool:
        """Multi-head latent attention: the KV cache holds one compressed latent per layer."""
        return self.kv_lora_rank > 0

    @property
    def d_head(self) -> int:
        """Width of one head's attention output (MLA: v_head_dim)."""
        return self.v_head_dim if self.mla else (self.head_dim or self.hidden // self.heads)

    @property
    def attn_dim(self) -> int:
        return self.heads * self.d_head

    @property
    def kv_dim(self) -> int:
        """Elements one layer caches per token for K (and as many for V); MLA: the whole latent
        (kv_lora_rank + qk_rope_head_dim), K and V together."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.mla else self.kv_heads * self.d_head

    def kv_elements_per_token(self) -> int:
        """Elements the KV cache holds per token over all layers (windows aside)."""
        return self.layers * self.kv_dim * (1 if self.mla else 2)

    def kv_vectors_per_token(self) -> int:
        """Cached vectors per token over all layers (a per-vector scale is stored this often)."""
        return self.layers * (1 if self.mla else 2 * self.kv_heads)

    @property
    def kv_shards(self) -> int:
        """How many ways tensor parallelism can split the KV cache (MLA's latent is replicated)."""
        return 1 if self.mla else self.kv_heads

    def kv_bytes_per_token(self, precision: str | None = None) -> float:
        """Bytes per token of a model whose every layer holds the whole context: 2 × layers ×
        kv_dim × bytes; MLA: layers × (kv_lora_rank + qk_rope_head_dim) × bytes."""
        return self.kv_elements_per_token() * PRECISION_BYTES[precision or self.kv_precision or self.precision]

    def kv_tokens(self, ctx):
        """Mean over layers of the KV tokens a sequence holds at context `ctx` (array): min(ctx,
        window) on sliding-window layers, ctx on the others."""
        ctx = np.asarray(ctx, dtype=np.float64)
        if self.sliding_window is None:
            return ctx
        share = self.window_share
        return share * np.minimum(ctx, float(self.sliding_window)) + (1.0 - share) * ctx

    @property
    def window_share(self) -> float:
        """The share of layers that attend over a sliding window (0 without one)."""
        if self.sliding_window is None:
            return 0.0
        return (self.layers if self.window_layers is None else self.window_layers) / self.layers

    def attention_flops_per_token(self, ctx):
        """FLOPs of one token's attention scores and weighted values at context `ctx` (array),
        summed over layers: 4 × layers × ctx × attn_dim, windows capping ctx. MLA in DeepSeek's
        absorbed (decode) form: scores over the latent and rope key (heads × (kv_lora_rank +
        qk_rope_head_dim)), values over the latent (heads × kv_lora_rank)."""
        return 2.0 * self.layers * self.kv_tokens(ctx) * self.attention_width

    @property
    def attention_width(self) -> int:
        """FLOPs per layer per cached token, halved: scores and weighted values (MLA: over the
        latent and rope key, and the latent)."""
        if self.mla:
            return self.heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.attn_dim

    # Parameters.
    def attention_params(self) -> int:
        """One layer's attention projections."""
        h = self.hidden
        if not self.mla:
            return 2 * h * self.attn_dim + 2 * h * self.kv_dim  # q, o; k, v
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk if self.q_lora_rank \
            else h * self.heads * qk
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank + \
            self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + self.heads * self.v_head_dim * h

    def _ffn(self, width: int) -> int:
        return (3 if self.gated_ffn else 2) * self.hidden * width

    def layer_params(self) -> int:
        """One layer with a dense FFN: attention, FFN, two norms."""
        return self.attention_params() + self._ffn(self.intermediate) + 2 * self.hidden

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0

    def expert_params(self) -> int:
        """Parameters of ONE routed expert in ONE layer (0 for a dense model)."""
        return self._ffn(self.expert_intermediate or self.intermediate) if self.moe else 0

    def _moe_layer_params(self, routed: int) -> int:
        """One MoE layer with `routed` routed experts counted: attention, experts, shared experts,
        router, two norms."""
        return (self.attention_params() + routed * self.expert_params() + self._ffn(self.shared_intermediate)
                + self.hidden * self.experts + 2 * self.hidden)

    def _embeddings(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    def total_params(self) -> int:
        """Every weight: all experts, both embedding tables (one when tied)."""
        if self.params:
            return self.params
        dense = self.layers - self.moe_layers
        return (dense * self.layer_params() + self.moe_layers * self._moe_layer_params(self.experts)
                + self._embeddings() + self.hidden)

    def _inactive(self) -> int:
        """Routed-expert parameters one token does not use."""
        return self.moe_layers * (self.experts - self.experts_per_token) * self.expert_params()

    def _input_embedding(self) -> int:
        """The input embedding's parameters a token does not multiply through (tied: the table is
        the LM head, which it does)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def matmul_params(self) -> int:
        """Parameters ONE token multiplies through: the dense parts, its experts_per_token routed
        experts, the shared experts, the LM head (the input embedding is a lookup, not a matmul)."""
        return self.total_params() - self._input_embedding() - self._inactive()

    def active_params(self) -> int:
        """Active parameters as model cards count them: matmul_params plus the input embedding."""
        return self.total_params() - self._inactive()

    def read_params(self, tokens):
        """Expected matmul parameters a forward step over `tokens` tokens (array) reads: the dense
        parts once, and per MoE layer the distinct routed experts the tokens touch, E·(1 − (1 −
        k/E)^tokens) under uniform routing (k at one token, → E as tokens grow)."""
        tokens = np.asarray(tokens, dtype=np.float64)
        if not self.moe:
            return np.full_like(tokens, float(self.matmul_params()))
        e, k = float(self.experts), float(self.experts_per_token)
        touched = e * (1.0 - (1.0 - k / e) ** tokens)
        return float(self.unrouted_params()) + self.moe_layers * touched * self.expert_params()

    def unrouted_params(self) -> int:
        """Matmul parameters a step reads whatever the routing: all but the routed experts."""
        return self.matmul_params() - self.moe_layers * self.experts_per_token * self.expert_params()

    def expert_parallel_bytes(self, tokens, act_bytes):
        """Bytes one MoE layer's all-to-all moves for `tokens` tokens under expert parallelism:
        dispatch and combine of each token's activations to its experts_per_token experts,
        2 × tokens × hidden × act_bytes × experts_per_token (0 for a dense model)."""
        return 2.0 * np.asarray(tokens, dtype=np.float64) * self.hidden * np.asarray(act_bytes) * self.experts_per_token

    def weight_bytes(self, precision: str | None = None) -> float:
        """Bytes the weights occupy (every parameter, every expert, the input-embedding table)."""
        return self.total_params() * PRECISION_BYTES[precision or self.precision]

    def weight_read_bytes(self, precision: str | None = None) -> float:
        """Bytes a one-token forward pass reads: every matmul weight it uses; the input embedding
        is a lookup of one row per token (tied embeddings are read whole as the LM head)."""
        return self.matmul_params() * PRECISION_BYTES[precision or self.precision]

    @classmethod
    def from_hf(cls, name: str, config: dict) -> ModelConfig:
        """From a Hugging Face config.json object (hf_config.py: the field names of each family)."""
        try:
            return cls(name=name, **hf_config.fields(config))
        except ContractError as exc:
            if exc.source:
                raise
            raise ContractError(exc.message, source=name, field=exc.field) from None
        except (TypeError, ValueError) as exc:
            raise ContractError(f"config.json has a bad value: {exc}", source=name) from None

    def describe(self) -> dict:
        return {**asdict(self), "total_params": self.total_params(), "active_params": self.active_params(),
                "weight_bytes": self.weight_bytes(), "kv_bytes_per_token": self.kv_bytes_per_token()}


class ModelStack:
    """Many configs as one, row by row: the figures llm.serve() reads from a ModelConfig, as arrays
    with one entry per row, so one call evaluates states of different models together (a
    calibration over many models pays NumPy's per-call cost once, not once per model). Each
    row's figures are computed by the same formulas as its config's, so they are the same numbers."""

    def __init__(self, configs: list[ModelConfig]):
        col = lambda get: np.array([float(get(c)) for c in configs], dtype=np.float64)  # noqa: E731
        self.layers, self.hidden = col(lambda c: c.layers), col(lambda c: c.hidden)
        self.intermediate, self.vocab = col(lambda c: c.intermediate), col(lambda c: c.vocab)
        self.attn_dim, self.kv_shards = col(lambda c: c.attn_dim), col(lambda c: c.kv_shards)
        self.moe_layers = col(lambda c: c.moe_layers)
        self.experts_per_token = col(lambda c: c.experts_per_token)
        self._total, self._matmul = col(ModelConfig.total_params), col(ModelConfig.matmul_params)
        self._kv_elements = col(ModelConfig.kv_elements_per_token)
        self._kv_vectors = col(ModelConfig.kv_vectors_per_token)
        self._window = np.array([c.sliding_window is not None for c in configs])
        self._share = col(lambda c: c.window_share)
        self._window_tokens = col(lambda c: np.inf if c.sliding_window is None else c.sliding_window)
        self._width = col(lambda c: c.attention_width)
        self._moe = np.array([c.moe for c in configs])
        # Dense rows get a harmless expert count (their MoE terms are never selected).
        self._experts = col(lambda c: c.experts if c.moe else 1)
        self._expert_params = col(ModelConfig.expert_params)
        self._moe_base = col(ModelConfig.unrouted_params)

    @classmethod
    def join(cls, stacks: list[ModelStack]) -> ModelStack:
        """The rows of several stacks, one after the other."""
        out = cls.__new__(cls)
        for name, first in vars(stacks[0]).items():
            setattr(out, name, np.concatenate([first] + [vars(s)[name] for s in stacks[1:]]))
        return out

    def total_params(self) -> np.ndarray:
        return self._total

    def matmul_params(self) -> np.ndarray:
        return self._matmul

    def kv_elements_per_token(self) -> np.ndarray:
        return self._kv_elements

    def kv_vectors_per_token(self) -> np.ndarray:
        return self._kv_vectors

    def kv_tokens(self, ctx):
        """ModelConfig.kv_tokens, per row."""
        ctx = np.asarray(ctx, dtype=np.float64)
        share = self._share
        return np.where(self._window, share * np.minimum(ctx, self._window_tokens) + (1.0 - share) * ctx, ctx)

    def attention_flops_per_token(self, ctx):
        """ModelConfig.attention_flops_per_token, per row."""
        return 2.0 * self.layers * self.kv_tokens(ctx) * self._width

    def read_params(self, tokens):
        """ModelConfig.read_params, per row."""
        tokens = np.asarray(tokens, dtype=np.float64)
        e = self._experts
        touched = e * (1.0 - (1.0 - self.experts_per_token / e) ** tokens)
        return np.where(self._moe, self._moe_base + self.moe_layers * touched * self._expert_params,
                        np.broadcast_to(self._matmul, np.broadcast(tokens, self._matmul).shape))

    def expert_parallel_bytes(self, tokens, act_bytes):
        """ModelConfig.expert_parallel_bytes, per row."""
        return 2.0 * np.asarray(tokens, dtype=np.float64) * self.hidden * np.asarray(act_bytes) * self.experts_per_token


def _whole(cfg: ModelConfig, field: str, v, least: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        what = "positive" if least else "non-negative"
        raise ContractError(f"must be a {what} whole number, not {v!r}", source=cfg.name, field=field)


def _presets() -> dict[str, ModelConfig]:
    """The shipped presets: families/<name>.json, each a transcribed config.json."""
    root = importlib.resources.files("luma.experiments.model.families")
    out = {}
    for p in sorted(root.iterdir(), key=lambda p: p.name):
        if p.name.endswith(".json"):
            out[p.name[:-5]] = ModelConfig.from_hf(p.name[:-5], json.loads(p.read_text(encoding="utf-8")))
    return out


#: Published config.json values (Hugging Face model cards) of common open models.
PRESETS = _presets()


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
