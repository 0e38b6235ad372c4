"""A tiny byte-level GPT (causal, pre-LayerNorm, learned positions), its deterministic training on
Python's own standard-library source, and a plain (unpaged, no KV cache) greedy decode used as
the reference that the paged engine of `decoder` must reproduce."""

from __future__ import annotations

import hashlib
import math
import random
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from luma.errors import ConfigError

#: Fixed stdlib modules (~100 KB of source; ships with every Python, needs no download). Small on
#: purpose: the ~40 s training budget then sees it several times, so greedy generations are peaked.
CORPUS_MODULES = (
    "textwrap.py", "string.py", "fnmatch.py", "shlex.py", "heapq.py", "bisect.py", "queue.py", "copy.py",
    "colorsys.py",
)


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256  # bytes
    layers: int = 2
    d_model: int = 128
    heads: int = 4
    max_pos: int = 512

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 400
    batch: int = 12
    seq: int = 96  # covers the default request: 64 prompt + 32 generated tokens
    lr: float = 2e-3
    seed: int = 0


def load_corpus() -> bytes:
    """The corpus: the listed stdlib modules' source, concatenated, as ASCII bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts = []
    for name in CORPUS_MODULES:
        path = root / name
        if not path.is_file():
            raise ConfigError(f"stdlib module {path} is missing: the decoder corpus needs it", field="corpus")
        parts.append(path.read_bytes())
    return b"\n".join(parts).decode("utf-8", "replace").encode("ascii", "replace")


def fingerprint(model: GPTConfig, train: TrainConfig, corpus: bytes, *more) -> str:
    """Hash of everything the trained weights and references depend on (settings, corpus, this
    module's code, torch version): a change retrains."""
    key = repr((sorted(asdict(model).items()), sorted(asdict(train).items()), more, torch.__version__))
    h = hashlib.sha256(key.encode())
    h.update(hashlib.sha256(corpus).digest() + hashlib.sha256(Path(__file__).read_bytes()).digest())
    return h.hexdigest()[:16]


class Block(nn.Module):
    """Pre-LN transformer block, split at attention so a paged engine can supply its own."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d = cfg.d_model
        self.heads, self.head_dim = cfg.heads, cfg.head_dim
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def attn_in(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of x (B, T, d), each (B, heads, T, head_dim)."""
        b, t, _ = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    def attn_out(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Residual update of x from the attention output a (B, heads, T, head_dim), then the MLP."""
        b, _, t, _ = a.shape
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_pos, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
        # Positions past the training window get no gradient: zero keeps them a neutral "no
        # position signal" rather than random noise as large as the token embeddings.
        nn.init.zeros_(self.pos.weight)

    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos(positions)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln_f(x))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Full causal attention over idx (B, T) at positions 0..T-1; logits (B, T, vocab)."""
        x = self.embed(idx, torch.arange(idx.shape[1]))
        for blk in self.blocks:
            q, k, v = blk.attn_in(x)
            x = blk.attn_out(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return self.logits(x)


@torch.no_grad()
def generate_plain(model: TinyGPT, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decode by recomputing full attention over the whole sequence each step (no cache):
    the reference. prompts (B, T) of equal length; returns (B, new_tokens)."""
    seq = prompts
    for _ in range(new_tokens):
        nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
    return seq[:, prompts.shape[1]:]


def train(cfg: GPTConfig, tc: TrainConfig, corpus: bytes) -> TinyGPT:
    """Deterministic training (fixed seed, one thread, fixed step count) on the corpus."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(tc.seed)
        rng = random.Random(tc.seed)
        data = torch.frombuffer(bytearray(corpus), dtype=torch.uint8).long()
        model = TinyGPT(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, betas=(0.9, 0.99), weight_decay=0.0)
        warm = max(1, tc.steps // 16)
        for step in range(tc.steps):
            lr = tc.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / tc.steps)))
            for g in opt.param_groups:
                g["lr"] = lr
            starts = torch.tensor([rng.randrange(len(data) - tc.seq - 1) for _ in range(tc.batch)])
            win = data[starts[:, None] + torch.arange(tc.seq + 1)]
            logits = model(win[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), win[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        model.final_loss = float(loss.detach())
        return model.eval()
    finally:
        torch.set_num_threads(threads)
