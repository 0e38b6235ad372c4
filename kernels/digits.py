"""A small MLP on scikit-learn's bundled digits (8x8 images, 10 classes): trained in seconds, then
evaluated in fp32 and quantized. The held-out split is fixed by the seed."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from luma.kernels import gemm_backend
from luma.kernels.linear import QuantConfig, model_weight_bytes, quantize_model


@dataclass(frozen=True)
class DigitsData:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load(seed: int = 0, test_fraction: float = 0.25) -> DigitsData:
    """The 1,797 digits, scaled to [0, 1], split stratified into train and held-out test."""
    # scikit-learn (~4 s): only the digits data set needs it
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x.astype(np.float32) / 16.0, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return DigitsData(torch.from_numpy(x_tr), torch.from_numpy(y_tr), torch.from_numpy(x_te), torch.from_numpy(y_te))


def build(hidden: tuple[int, ...] = (256, 128)) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = 64
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def train(data: DigitsData, seed: int = 0, epochs: int = 200) -> nn.Sequential:
    """Full-batch Adam; deterministic for a seed (single-threaded)."""
    torch.manual_seed(seed)
    model = build()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        opt.zero_grad()
        loss_fn(model(data.x_train), data.y_train).backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, data: DigitsData) -> float:
    return float((model(data.x_test).argmax(dim=1) == data.y_test).float().mean())


def evaluate(bits=(8, 6, 4, 3, 2), granularities=("per-tensor", "per-channel"), mode: str = "dynamic",
             seed: int = 0) -> list[dict]:
    """fp32 accuracy, then one row per (bits, granularity): accuracy, change in percentage
    points, and weight bytes."""
    data = load(seed)
    model = train(data, seed)
    base = accuracy(model, data)
    rows = [{"model": "digits-mlp", "method": "fp32", "bits": 32, "granularity": "-", "mode": "-",
             "accuracy": base, "delta_pp": 0.0, "weight_bytes": model_weight_bytes(model)}]
    for b in bits:
        for g in granularities:
            q = copy.deepcopy(model)
            quantize_model(q, QuantConfig(mode=mode, granularity=g, bits=b))
            acc = accuracy(q, data)
            rows.append({"model": "digits-mlp", "method": f"int{b}", "bits": b, "granularity": g, "mode": mode,
                         "backend": gemm_backend.resolve() if mode == "dynamic" else None,
                         "accuracy": acc, "delta_pp": 100 * (acc - base), "weight_bytes": model_weight_bytes(q)})
    return rows
