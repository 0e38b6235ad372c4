"""The digits classifier service: the MLP of `luma.kernels.digits` serving 8x8 images.

Quality is accuracy on the held-out split. The model is tiny (≈200 KB of weights), so its
sprints are about compute (cores, vector ISA) and load rather than memory. The artifact holds
the trained fp32 weights and the held-out split, so a trial never imports scikit-learn; the
int8 variants are quantized at load (in-place, `luma.kernels.linear.quantize_model`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from luma.experiments.services.base import BatchEngine, Loaded
from luma.kernels import digits
from luma.kernels.linear import QuantConfig, model_weight_bytes, quantize_model

_VARIANTS = {"fp32": None, "int8-weights": "weight-only", "int8-dynamic": "dynamic"}


class ClassifierService:
    """Digits MLP behind a batching engine."""

    name = "classifier"
    interventions = {"int8-weights": "int8-weights", "int8-dynamic": "int8-dynamic"}
    #: its engine is a BatchEngine: `replicas` copies can serve side by side (services/replicas.py)
    replicable = True

    def workload(self) -> dict:
        return {"name": "digits-classification", "model": "digits-mlp-64-256-128-10", "task": "classification"}

    def prepare(self, variant: str, cache: Path) -> Path:
        if variant not in _VARIANTS:
            raise ValueError(f"unknown variant {variant!r}")
        src = hashlib.sha256(Path(digits.__file__).read_bytes()).hexdigest()[:12]
        path = Path(cache) / f"classifier-{src}.pt"
        if not path.exists():
            data = digits.load(seed=0)
            model = digits.train(data, seed=0)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            torch.save({"state": model.state_dict(), "x_test": data.x_test, "y_test": data.y_test}, tmp)
            tmp.replace(path)
        return path

    def load(self, artifact, state: dict) -> Loaded:
        blob = torch.load(artifact, weights_only=True, mmap=False)
        model = digits.build()
        model.load_state_dict(blob["state"])
        model.eval()
        mode = _VARIANTS[state.get("variant", "fp32")]
        if mode:
            quantize_model(model, QuantConfig(mode=mode, granularity="per-channel", bits=8))
        self._test = (blob["x_test"], blob["y_test"])

        @torch.inference_mode()
        def run_batch(images: list) -> list:
            return model(torch.stack(images)).argmax(dim=1).tolist()

        return Loaded(engine_factory=lambda max_batch: BatchEngine(run_batch, max_batch),
                      weight_bytes=model_weight_bytes(model), extra={"run_batch": run_batch})

    def requests(self, n: int, seed: int, contract: dict) -> list:
        x = self._test[0]
        g = torch.Generator().manual_seed(seed)
        return [x[i] for i in torch.randint(0, x.shape[0], (n,), generator=g).tolist()]

    def quality(self, loaded: Loaded, artifact, contract: dict) -> float:
        x, y = self._test
        pred = torch.tensor(loaded.extra["run_batch"](list(x)))
        return float((pred == y).float().mean())
