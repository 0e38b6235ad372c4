"""Calibration-aware mixed precision: per-layer sensitivity, then an accuracy–memory Pareto front.

1. Sensitivity: each Linear layer alone at each bit width (the rest fp32), scored on the
   *calibration* split — the drop in the quality metric from fp32.
2. Search: start from every layer at the widest width; repeatedly lower the layer whose next
   step down costs the least quality per byte saved (by the sensitivities), and score the whole
   configuration for real on the *evaluation* split. Each step is one point.
3. Front: the points no other point beats on both memory and quality.

The score function is the caller's (digits accuracy, MiniLM cosine similarity); higher is better.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from luma.kernels import torch_ops

Score = Callable[[nn.Module], float]


@dataclass
class Point:
    """One configuration: bits per layer, the Linear weight bytes, and its evaluation score."""

    layer_bits: dict[str, int]
    weight_bytes: int
    score: float
    on_front: bool = False
    label: str = ""


@dataclass
class Study:
    """Everything a mixed-precision run produces (written to the KB as data and plotted)."""

    metric: str
    fp32_score: float
    fp32_bytes: int
    sensitivity: dict[str, dict[int, float]] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)

    def front(self) -> list[Point]:
        return [p for p in self.points if p.on_front]

    def as_rows(self) -> list[dict]:
        return [{"label": p.label, "weight_bytes": p.weight_bytes, self.metric: p.score, "on_front": p.on_front,
                 "bits": ",".join(str(b) for b in p.layer_bits.values())} for p in self.points]


def linear_names(model: nn.Module, skip: tuple[str, ...] = ()) -> list[str]:
    return [n for n, m in model.named_modules() if type(m) is nn.Linear and n not in skip]


def _bytes(model: nn.Module, layer_bits: dict[str, int]) -> int:
    total = 0
    for name, m in model.named_modules():
        if type(m) is nn.Linear:
            bits = layer_bits.get(name)
            w = m.weight.numel()
            total += w * 4 if bits is None else (w * bits + 7) // 8 + m.weight.shape[0] * 4
    return total


class _WeightBits:
    """One working copy of the model whose Linear weights are swapped for their per-channel
    quantized values (x̂ = s·q, the numbers `Int8Linear` weight-only computes with), cached per
    (layer, bits): a configuration costs a pointer swap, not a model copy."""

    def __init__(self, model: nn.Module, layers: list[str]):
        self.model = copy.deepcopy(model)
        self.mods = {n: m for n, m in self.model.named_modules() if n in set(layers)}
        self.orig = {n: m.weight.detach().clone() for n, m in self.mods.items()}
        self.cache: dict[tuple[str, int], torch.Tensor] = {}

    def apply(self, layer_bits: dict[str, int]) -> nn.Module:
        for name, mod in self.mods.items():
            bits = layer_bits.get(name)
            if bits is None:
                mod.weight.data = self.orig[name]
            else:
                key = (name, bits)
                if key not in self.cache:
                    # Exactly the levels and scales `Int8Linear.from_float` stores (exact path).
                    q, s = torch_ops.quantize_per_channel(self.orig[name], 0, bits=bits, exact=True)
                    self.cache[key] = torch_ops.dequantize(q, s, 0).to(self.orig[name].dtype)
                mod.weight.data = self.cache[key]
        return self.model


def run(model: nn.Module, calibration: Score, evaluation: Score, metric: str, bits=(8, 6, 4, 3, 2),
        skip: tuple[str, ...] = (), progress: Callable[[str], None] | None = None) -> Study:
    """Sensitivity on `calibration`, greedy search scored on `evaluation`, then the front.
    Weight-only, per-channel: the weight-memory trade-off, with activations left in float."""
    layers = linear_names(model, skip)
    widths = sorted(set(bits), reverse=True)
    study = Study(metric, evaluation(model), _bytes(model, {}))
    work = _WeightBits(model, layers)
    base_cal = calibration(model)
    for name in layers:
        study.sensitivity[name] = {b: base_cal - calibration(work.apply({name: b})) for b in widths}
        if progress:
            progress(f"sensitivity {name}")
    current = {name: widths[0] for name in layers}
    study.points.append(_point(model, work, current, evaluation, f"all int{widths[0]}"))
    while True:
        best, best_cost = None, None
        for name in layers:
            i = widths.index(current[name])
            if i + 1 == len(widths):
                continue
            lower = widths[i + 1]
            saved = _bytes(model, {name: current[name]}) - _bytes(model, {name: lower})
            cost = (study.sensitivity[name][lower] - study.sensitivity[name][current[name]]) / max(saved, 1)
            if best_cost is None or cost < best_cost:
                best, best_cost = (name, lower), cost
        if best is None:
            break
        current = {**current, best[0]: best[1]}
        study.points.append(_point(model, work, current, evaluation, f"{best[0]} -> int{best[1]}"))
        if progress:
            progress(f"step {len(study.points) - 1}")
    _mark_front(study.points)
    return study


def _point(model, work: _WeightBits, layer_bits, evaluation, label) -> Point:
    return Point(dict(layer_bits), _bytes(model, layer_bits), evaluation(work.apply(layer_bits)), label=label)


def _mark_front(points: list[Point]) -> None:
    for p in points:
        p.on_front = not any(
            (o.weight_bytes <= p.weight_bytes and o.score >= p.score)
            and (o.weight_bytes < p.weight_bytes or o.score > p.score)
            for o in points
        )


def plot(study: Study, out: Path, title: str) -> list[Path]:
    """The front as PNG and SVG: score against weight MiB, fp32 marked."""
    # matplotlib (~0.2 s) loads only when the plot is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    mib = 2**20
    pts = study.points
    ax.scatter([p.weight_bytes / mib for p in pts], [p.score for p in pts], s=12, color="0.6", label="searched")
    front = sorted(study.front(), key=lambda p: p.weight_bytes)
    ax.plot([p.weight_bytes / mib for p in front], [p.score for p in front], "o-", color="C0", label="Pareto front")
    ax.scatter([study.fp32_bytes / mib], [study.fp32_score], marker="*", s=120, color="C3", label="fp32")
    ax.set_xlabel("Linear weight memory (MiB)")
    ax.set_ylabel(study.metric)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        path = out / f"pareto.{ext}"
        fig.savefig(path, dpi=120)
        paths.append(path)
    plt.close(fig)
    return paths
