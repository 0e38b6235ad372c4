"""Generative decoder service: a tiny byte-level GPT (`tiny_gpt`, trained deterministically in
`prepare`, since no model can be downloaded) served by a continuous-batching engine over a paged
KV cache with a byte budget. Variants change only the KV storage: `fp32`, or `int8-kv` (int8
levels plus one float32 scale per (token, head) vector); the weights are fp32 in both.

Quality = agreement with its own fp32 reference generations: the mean, over a fixed prompt set,
of the position-wise fraction of greedy tokens equal to those of a plain (unpaged) fp32 decode.
"""

from __future__ import annotations

import json
import numbers
import os
import random
import shutil
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F

from luma.errors import CapacityError, ContractError, StateError, TensorError
from luma.experiments.services.base import Event, Loaded
from luma.experiments.services.tiny_gpt import (
    GPTConfig, TinyGPT, TrainConfig, fingerprint, generate_plain, load_corpus, train,
)
from luma.kernels.kv_cache import _quantize_vectors

BLOCK = 16  # tokens per KV block
KV_DTYPES = {"fp32": "float32", "int8-kv": "int8"}
#: How many trainings `prepare` ran in this process (lets tests see that the cache was reused).
TRAININGS = 0


def block_bytes(cfg: GPTConfig, kv_dtype: str) -> int:
    """Bytes of one block: K and V of BLOCK tokens for every layer and head."""
    per_vector = cfg.head_dim * 4 if kv_dtype == "float32" else cfg.head_dim + 4  # int8 levels + f32 scale
    return 2 * cfg.layers * cfg.heads * BLOCK * per_vector


def blocks_for(tokens: int) -> int:
    return -(-tokens // BLOCK)


class KVPool:
    """`blocks` KV blocks for all layers, allocated once (real memory) and never resized."""

    def __init__(self, cfg: GPTConfig, blocks: int, kv_dtype: str):
        self.cfg, self.blocks, self.kv_dtype = cfg, blocks, kv_dtype
        shape = (cfg.layers, blocks, cfg.heads, BLOCK, cfg.head_dim)
        self.int8 = kv_dtype == "int8"
        dtype = torch.int8 if self.int8 else torch.float32
        self.k, self.v = torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
        if self.int8:
            self.k_scale, self.v_scale = torch.ones(shape[:-1]), torch.ones(shape[:-1])

    def nbytes(self) -> int:
        tensors = [self.k, self.v] + ([self.k_scale, self.v_scale] if self.int8 else [])
        return sum(t.numel() * t.element_size() for t in tensors)

    def write(self, layer: int, blk: torch.Tensor, slot: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store N token vectors k, v (N, heads, head_dim) at blocks `blk` (N,), slots `slot` (N,)."""
        if not self.int8:
            self.k[layer, blk, :, slot], self.v[layer, blk, :, slot] = k, v
            return
        for levels, scales, x in ((self.k, self.k_scale, k), (self.v, self.v_scale, v)):
            q, s = _quantize_vectors(x)
            levels[layer, blk, :, slot], scales[layer, blk, :, slot] = q, s.squeeze(-1)

    def read(self, layer: int, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V (B, heads, nb*BLOCK, head_dim) of the blocks in `table` (B, nb); int8 dequantised."""
        out = []
        for levels, scales in ((self.k, getattr(self, "k_scale", None)), (self.v, getattr(self, "v_scale", None))):
            x = levels[layer][table]  # (B, nb, heads, BLOCK, head_dim): the gather
            if self.int8:
                x = x.float() * scales[layer][table].unsqueeze(-1)
            b, nb, h, _, d = x.shape
            out.append(x.transpose(1, 2).reshape(b, h, nb * BLOCK, d))
        return out[0], out[1]


@dataclass
class _Seq:
    rid: int
    blocks: list[int]
    length: int  # tokens whose K/V are in the cache
    out: list[int]  # generated tokens; the last one is not cached yet
    max_new: int


class PagedEngine:
    """Continuous batching over a `KVPool`: FIFO admission when blocks for the whole sequence
    (prompt + max_new_tokens) are free and fewer than `max_batch` run; no preemption. Payloads
    are {"prompt": [token ids], "max_new_tokens": n}. One engine at a time per pool."""

    def __init__(self, model: TinyGPT, pool: KVPool, max_batch: int):
        self.model, self.pool, self.max_batch = model, pool, max(1, int(max_batch))
        self.free = list(range(pool.blocks))
        self.waiting: deque = deque()
        self.active: list[_Seq] = []
        self.outputs: dict[int, list[int]] = {}
        self.keep_outputs = False

    def submit(self, request_id: int, payload) -> None:
        prompt, max_new = _check_payload(payload, self.model.cfg)
        need = blocks_for(len(prompt) + max_new)
        if need > self.pool.blocks:
            raise CapacityError(f"request {request_id} needs {need} KV blocks ({len(prompt)} + {max_new} tokens) "
                                f"but the whole KV budget holds {self.pool.blocks}: it can never be served")
        self.waiting.append((request_id, prompt, max_new, need))

    def busy(self) -> bool:
        return bool(self.waiting or self.active)

    @torch.inference_mode()
    def step(self) -> list[Event]:
        admitted = []
        while (self.waiting and len(self.active) + len(admitted) < self.max_batch
               and self.waiting[0][3] <= len(self.free)):
            rid, prompt, max_new, need = self.waiting.popleft()
            blocks, self.free = self.free[:need], self.free[need:]
            admitted.append((_Seq(rid, blocks, 0, [], max_new), prompt))
        if admitted:
            return self._prefill(admitted)
        return self._decode() if self.active else []

    def _finish(self, seq: _Seq, now: float) -> Event:
        self.free.extend(seq.blocks)
        if self.keep_outputs:
            self.outputs[seq.rid] = list(seq.out)
        return Event(seq.rid, "done", now, tokens=len(seq.out))

    def _prefill(self, admitted: list) -> list[Event]:
        """Prompts of equal length run as one batch. Prefill attends over its own fp32 keys; the
        cache keeps them (int8 or fp32) for the decode steps."""
        events, groups = [], {}
        for seq, prompt in admitted:
            groups.setdefault(len(prompt), []).append((seq, prompt))
        for length, group in groups.items():
            tokens = torch.tensor([p for _, p in group])
            table = torch.tensor([s.blocks[: blocks_for(length)] for s, _ in group])
            pos = torch.arange(length)
            blk, slot = table[:, pos // BLOCK].reshape(-1), (pos % BLOCK).repeat(len(group))
            x = self.model.embed(tokens, pos)
            for layer, mod in enumerate(self.model.blocks):
                q, k, v = mod.attn_in(x)
                flat = [t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[3]) for t in (k, v)]  # (G*P, H, hd)
                self.pool.write(layer, blk, slot, *flat)
                x = mod.attn_out(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
            first = self.model.logits(x[:, -1]).argmax(-1).tolist()
            now = time.perf_counter()
            for (seq, _), tok in zip(group, first):
                seq.length, seq.out = length, [tok]
                events.append(Event(seq.rid, "first_token", now, tokens=1))
                if seq.max_new == 1:
                    events.append(self._finish(seq, now))
                else:
                    self.active.append(seq)
        return events

    def _decode(self) -> list[Event]:
        """One decode iteration for every active sequence, batched."""
        seqs = self.active
        lengths = torch.tensor([s.length for s in seqs])
        nb = blocks_for(int(lengths.max()) + 1)
        table = torch.tensor([(s.blocks + [0] * nb)[:nb] for s in seqs])  # padding is masked out
        rows = torch.arange(len(seqs))
        blk, slot = table[rows, lengths // BLOCK], lengths % BLOCK
        mask = (torch.arange(nb * BLOCK) <= lengths[:, None])[:, None, None, :]
        x = self.model.embed(torch.tensor([s.out[-1] for s in seqs])[:, None], lengths[:, None])
        for layer, mod in enumerate(self.model.blocks):
            q, k, v = mod.attn_in(x)
            self.pool.write(layer, blk, slot, k[:, :, 0], v[:, :, 0])
            keys, values = self.pool.read(layer, table)
            x = mod.attn_out(x, F.scaled_dot_product_attention(q, keys, values, attn_mask=mask))
        nxt = self.model.logits(x[:, 0]).argmax(-1).tolist()
        now, events, still = time.perf_counter(), [], []
        for seq, tok in zip(seqs, nxt):
            seq.length += 1
            seq.out.append(tok)
            if len(seq.out) >= seq.max_new:
                events.append(self._finish(seq, now))
            else:
                still.append(seq)
        self.active = still
        return events


def _check_payload(payload, cfg: GPTConfig) -> tuple[list[int], int]:
    try:
        prompt, max_new = [int(t) for t in payload["prompt"]], payload["max_new_tokens"]
    except (TypeError, KeyError, ValueError) as exc:
        raise TensorError(f"a decoder request is {{'prompt': [token ids], 'max_new_tokens': n}} ({exc})",
                          field="prompt") from None
    if not prompt or min(prompt) < 0 or max(prompt) >= cfg.vocab:
        raise TensorError(f"the prompt must be 1 or more token ids in [0, {cfg.vocab})", field="prompt")
    if isinstance(max_new, bool) or not isinstance(max_new, numbers.Integral) or max_new < 1:
        raise ContractError(f"max_new_tokens must be a positive integer, not {max_new!r}", field="max_new_tokens")
    if len(prompt) + max_new > cfg.max_pos:
        raise ContractError(f"{len(prompt)} prompt + {max_new} new tokens exceed the model's {cfg.max_pos} positions",
                          field="context")
    return prompt, int(max_new)


class DecoderService:
    """The `decoder` service (see `base.Service`). Constructor arguments shrink it for tests."""

    name: ClassVar[str] = "decoder"
    interventions: ClassVar[dict[str, str]] = {"int8-kv": "int8-kv"}

    def __init__(self, model: GPTConfig | None = None, training: TrainConfig | None = None,
                 quality_prompts: int = 16, quality_context: int = 64, quality_new_tokens: int = 32):
        self.cfg, self.training = model or GPTConfig(), training or TrainConfig()
        self.quality_set = (quality_prompts, quality_context, quality_new_tokens)
        self._corpus: bytes | None = None

    def corpus(self) -> bytes:
        if self._corpus is None:
            self._corpus = load_corpus()
        return self._corpus

    def workload(self) -> dict:
        c = self.cfg
        return {"name": "tiny-gpt-generation", "task": "generation",
                "model": f"tiny-gpt-bytes-{c.layers}l-{c.d_model}d-{c.heads}h-{c.max_pos}pos (trained on stdlib source)"}

    def prepare(self, variant: str, cache: Path) -> Path:
        """Train (or reuse) the shared weights and fp32 references; the artifact is a small JSON
        per variant beside them, naming the KV dtype."""
        global TRAININGS
        if variant not in KV_DTYPES:
            raise ContractError(f"unknown decoder variant {variant!r} (known: {', '.join(KV_DTYPES)})", field="variant")
        corpus = self.corpus()
        key = fingerprint(self.cfg, self.training, corpus, self.quality_set)
        folder = Path(cache) / f"decoder-{key}"
        if not (folder / "weights.pt").is_file():
            tmp = Path(cache) / f".decoder-{key}.{os.getpid()}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            start = time.perf_counter()
            model = train(self.cfg, self.training, corpus)
            seconds = time.perf_counter() - start
            TRAININGS += 1
            prompts = self._quality_prompts()
            torch.save({"prompts": prompts, "generations": generate_plain(model, prompts, self.quality_set[2])},
                       tmp / "reference.pt")
            (tmp / "meta.json").write_text(json.dumps({"train_seconds": round(seconds, 2),
                                                       "final_loss": model.final_loss, "key": key}))
            torch.save(model.state_dict(), tmp / "weights.pt")
            try:
                tmp.rename(folder)  # atomic: a half-written artifact is never reused
            except OSError:  # another process finished first; keep its copy
                shutil.rmtree(tmp, ignore_errors=True)
        artifact = folder / f"{variant}.json"
        if not artifact.is_file():
            artifact.write_text(json.dumps({"variant": variant, "kv_dtype": KV_DTYPES[variant],
                                             "model": asdict(self.cfg)}))
        return artifact

    def _quality_prompts(self) -> torch.Tensor:
        n, context, _ = self.quality_set
        corpus, rng = self.corpus(), random.Random(1234)
        return torch.tensor([list(corpus[o:o + context]) for o in
                             (rng.randrange(len(corpus) - context) for _ in range(n))])

    def load(self, artifact: Path, state: dict) -> Loaded:
        """`state["kv_cache"]`: KV budget in bytes; None gives each engine room for `max_batch`
        full-length (max positions) sequences."""
        spec = json.loads(Path(artifact).read_text())
        cfg, kv_dtype = GPTConfig(**spec["model"]), spec["kv_dtype"]
        model = TinyGPT(cfg)
        model.load_state_dict(torch.load(Path(artifact).parent / "weights.pt", weights_only=True))
        model.eval()
        per_block, budget = block_bytes(cfg, kv_dtype), state.get("kv_cache")
        pool = None
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0:
                raise StateError(f"kv_cache must be a byte count, not {budget!r}", field="kv_cache")
            pool = KVPool(cfg, int(budget) // per_block, kv_dtype)

        def engine_factory(max_batch: int) -> PagedEngine:
            own = pool or KVPool(cfg, max(1, int(max_batch)) * blocks_for(cfg.max_pos), kv_dtype)
            return PagedEngine(model, own, max_batch)

        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        extra = {"kv_blocks": pool.blocks if pool else None, "kv_block_bytes": per_block, "kv_dtype": kv_dtype}
        return Loaded(engine_factory, weight_bytes, extra)

    def requests(self, n: int, seed: int, contract: dict) -> list[dict]:
        # A contract's load section holds None where it sets nothing: that means the default.
        context, new = contract.get("context"), contract.get("max_new_tokens")
        context, new = 64 if context is None else context, 32 if new is None else new
        for field, value in (("context", context), ("max_new_tokens", new)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ContractError(f"{field} must be a positive integer, not {value!r}", field=field)
        if context + new > self.cfg.max_pos:
            raise ContractError(f"context {context} + max_new_tokens {new} exceed the model's {self.cfg.max_pos} "
                              "positions", field="context")
        corpus, rng = self.corpus(), random.Random(seed)
        return [{"prompt": list(corpus[o:o + context]), "max_new_tokens": new}
                for o in (rng.randrange(len(corpus) - context) for _ in range(n))]

    def quality(self, loaded: Loaded, artifact: Path, contract: dict) -> float:
        """Token agreement of this variant's engine with the stored fp32 references."""
        ref = torch.load(Path(artifact).parent / "reference.pt", weights_only=True)
        prompts, gens = ref["prompts"], ref["generations"]
        engine = loaded.engine_factory(len(prompts))
        engine.keep_outputs = True
        for i, prompt in enumerate(prompts.tolist()):
            engine.submit(i, {"prompt": prompt, "max_new_tokens": gens.shape[1]})
        while engine.busy():
            engine.step()
        agree = [(torch.tensor(engine.outputs[i]) == gens[i]).float().mean() for i in range(len(prompts))]
        return float(torch.stack(agree).mean())
