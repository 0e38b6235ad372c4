"""The sentence-embedding service of PEX sprints: all-MiniLM-L6-v2 on the lean encoder
(`minilm_encoder`), in fp32 or with int8 weights.

The parent `prepare`s one artifact per variant: a `torch.save`d dict of plain tensors (int8
levels + float32 scales for the int8 parts), plus the fp32 reference embeddings of the quality
set. The worker `load`s an artifact as stored, so an int8 trial never holds fp32 weights; it
never imports transformers or sentence-transformers.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import ClassVar

import torch

from luma.errors import ContractError
from luma.experiments.services import minilm_encoder as me
from luma.experiments.services.base import BatchEngine, Loaded
from luma.kernels import torch_ops
from luma.kernels.sentences import CALIBRATION, SENTENCES

#: variant -> the layer families stored int8 (per-channel weights; see minilm_encoder.FAMILIES).
FAMILY_VARIANTS = {"int8-weights": ("attention", "ffn", "embeddings"), "int8-linear": ("attention", "ffn"),
                   "int8-attention": ("attention",), "int8-ffn": ("ffn",), "int8-embeddings": ("embeddings",)}
VARIANTS = ("fp32", *FAMILY_VARIANTS)
FORMAT = 1


def source_hash() -> str:
    """Key of the artifacts: the code that writes them (this service, the encoder, the int8
    quantizer) and the model file it reads (by size)."""
    h = hashlib.sha256()
    for path in (Path(__file__), Path(me.__file__), Path(torch_ops.__file__)):
        h.update(path.read_bytes())
    h.update(str((me.model_dir() / "model.safetensors").stat().st_size).encode())
    return h.hexdigest()[:12]


def _payload(p) -> tuple[str, int | None]:
    """(text, context) of a request: a dict {"text", "context"} or a bare string."""
    if isinstance(p, str):
        return p, None
    return p["text"], p.get("context")


def _save(obj, path: Path) -> None:
    # Written aside then renamed: a concurrent or interrupted prepare never leaves half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class EmbeddingService:
    """all-MiniLM-L6-v2 sentence embeddings; quality = mean cosine to the fp32 embeddings."""

    name: ClassVar[str] = "embedding"
    #: int8 weights of every family, or of one layer family (precision per layer family).
    interventions: ClassVar[dict[str, str]] = {v: v for v in FAMILY_VARIANTS}
    #: its engine is a BatchEngine: `replicas` copies can serve side by side (services/replicas.py)
    replicable: ClassVar[bool] = True

    def __init__(self) -> None:
        #: max tokens per text from the last contract given to `requests` (None: max_seq_length)
        self.context: int | None = None

    def workload(self) -> dict:
        return {"name": "minilm-sentence-embedding", "model": "all-MiniLM-L6-v2", "task": "embedding"}

    # -- parent side -----------------------------------------------------------------------

    def prepare(self, variant: str, cache: Path) -> Path:
        """The artifact of `variant` under `cache` (built once per source hash), and the fp32
        reference embeddings beside it."""
        if variant not in VARIANTS:
            raise ContractError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})", field="variant")
        cache = Path(cache)
        cache.mkdir(parents=True, exist_ok=True)
        key = source_hash()
        artifact = cache / f"embedding-{variant}-{key}.pt"
        reference = self.reference_path(artifact)
        if artifact.exists() and reference.exists():
            return artifact
        config = me.read_config()
        state = me.load_fp32_state()
        if not reference.exists():
            with torch.inference_mode():
                ref = me.encode(me.Encoder(state, config), me.Tokenizer(config["max_seq_length"]), list(SENTENCES))
            _save({"sentences": list(SENTENCES), "embeddings": ref.clone()}, reference)
        if not artifact.exists():
            tensors = (me.quantize_state(state, config["layers"], FAMILY_VARIANTS[variant])
                       if variant in FAMILY_VARIANTS else state)
            _save({"format": FORMAT, "variant": variant, "config": config, "tensors": tensors}, artifact)
        return artifact

    @staticmethod
    def reference_path(artifact: Path) -> Path:
        """`embedding-reference-<hash>.pt` beside `embedding-<variant>-<hash>.pt`."""
        key = Path(artifact).stem.rsplit("-", 1)[-1]
        return Path(artifact).with_name(f"embedding-reference-{key}.pt")

    # -- worker side -----------------------------------------------------------------------

    def load(self, artifact: Path, state: dict) -> Loaded:
        """The encoder as stored (mmap=False: anonymous memory, counted by the memory limit).
        `state` levels do not change how an embedding model is held; they are ignored."""
        obj = torch.load(Path(artifact), weights_only=True, mmap=False)
        if obj.get("format") != FORMAT or obj.get("variant") not in VARIANTS:
            raise ContractError(f"{artifact} is not an embedding artifact of format {FORMAT}", field="artifact")
        config, variant = obj["config"], obj["variant"]
        encoder = me.Encoder(obj.pop("tensors"), config)
        tokenizer = me.Tokenizer(config["max_seq_length"])

        @torch.inference_mode()
        def run_batch(payloads: list) -> list[torch.Tensor]:
            texts, contexts = zip(*(_payload(p) for p in payloads))
            # A bare-string payload gets the context of the last contract given to `requests`.
            contexts = [self.context if c is None else c for c in contexts]
            ids, attention = tokenizer(list(texts), contexts)
            return list(encoder(ids, attention))

        # extra stays JSON-friendly (trial records); `quality` reaches the model through the engine.
        return Loaded(engine_factory=lambda max_batch: BatchEngine(run_batch, max_batch),
                      weight_bytes=encoder.weight_bytes(),
                      extra={"variant": variant, "hidden": config["hidden"],
                             "max_seq_length": config["max_seq_length"]})

    def requests(self, n: int, seed: int, contract: dict) -> list[dict]:
        """n texts drawn (seeded) from the sentence and calibration sets, each capped at the
        contract's `context` tokens."""
        # A bad context is refused here, before the load test, not mid-trial.
        context = self.context = me.check_context((contract or {}).get("context"))
        rng = random.Random(seed)
        pool = [*SENTENCES, *CALIBRATION]
        return [{"text": rng.choice(pool), "context": context} for _ in range(n)]

    def quality(self, loaded: Loaded, artifact: Path, contract: dict) -> float:
        """Mean cosine similarity of this variant's embeddings of SENTENCES to the stored fp32
        ones. Both at the full `max_seq_length`: the contract's context caps served requests,
        and every variant is compared against the same untruncated reference."""
        ref = torch.load(self.reference_path(artifact), weights_only=True, mmap=False)
        # Batched as the contract serves (a bigger quality batch would need memory serving does not).
        got = torch.stack(embed(loaded, ref["sentences"], context=loaded.extra["max_seq_length"],
                                batch=int(contract.get("max_batch") or 8)))
        return float(torch.nn.functional.cosine_similarity(got.double(), ref["embeddings"].double(), dim=1).mean())


def embed(loaded: Loaded, texts, context: int | None = None, batch: int = 32) -> list[torch.Tensor]:
    """Embeddings of `texts` through the loaded service's own engine (one per text, in order)."""
    engine = loaded.engine_factory(batch)
    engine.keep_outputs = True
    for i, text in enumerate(texts):
        engine.submit(i, {"text": text, "context": context})
    while engine.busy():
        engine.step()
    return [engine.outputs[i] for i in range(len(texts))]
