"""A tiny NumPy service — one dense layer answering matrix-vector requests — for running the
whole PEX method on any machine in seconds (the tests use it; so can a first try of
`luma sprint run matvec-memory`).

It is real, only small: its weights (4,096 x 256 fp32 = 4 MiB; int8 = 1 MiB + scales) are
loaded inside the trial's memory limit, requests are computed, and quality is the cosine
similarity of its outputs to the fp32 outputs. It never imports torch, so a trial starts in
~0.2 s instead of ~3 s.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from luma.experiments.services.base import BatchEngine, Loaded

ROWS, COLS = 4096, 256
_VARIANTS = ("fp32", "int8-weights")


class MatvecService:
    """y = W x for 256-wide requests; int8-weights keeps W as int8 with a scale per row."""

    name = "matvec"
    uses_torch = False
    interventions = {"int8-weights": "int8-weights"}

    def workload(self) -> dict:
        return {"name": "matvec-4096x256", "model": "dense-4096x256-seed0", "task": "matvec"}

    def prepare(self, variant: str, cache: Path) -> Path:
        if variant not in _VARIANTS:
            raise ValueError(f"unknown variant {variant!r}")
        key = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
        path = Path(cache) / f"matvec-{variant}-{key}.npz"
        if not path.exists():
            rng = np.random.default_rng(0)
            w = rng.standard_normal((ROWS, COLS)).astype(np.float32)
            probe = rng.standard_normal((32, COLS)).astype(np.float32)
            arrays = {"probe": probe, "reference": probe @ w.T}
            if variant == "fp32":
                arrays["w"] = w
            else:
                scale = np.abs(w).max(axis=1, keepdims=True) / 127
                arrays["q"] = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
                arrays["scale"] = scale.astype(np.float32)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp.npz")
            np.savez(tmp, **arrays)
            tmp.replace(path)
        return path

    def load(self, artifact, state: dict) -> Loaded:
        with np.load(artifact) as z:
            arrays = {k: z[k] for k in z.files}
        self._probe, self._reference = arrays["probe"], arrays["reference"]
        if "w" in arrays:
            w = arrays["w"]

            def run_batch(xs: list) -> list:
                return list(np.stack(xs) @ w.T)
            nbytes = w.nbytes
        else:
            q, scale = arrays["q"], arrays["scale"]

            def run_batch(xs: list) -> list:
                # Dequantise a block of rows at a time: the fp32 copy of W never exists whole.
                x = np.stack(xs)
                out = np.empty((x.shape[0], ROWS), dtype=np.float32)
                for r in range(0, ROWS, 512):
                    out[:, r:r + 512] = x @ (q[r:r + 512].astype(np.float32) * scale[r:r + 512]).T
                return list(out)
            nbytes = q.nbytes + scale.nbytes
        return Loaded(engine_factory=lambda max_batch: BatchEngine(run_batch, max_batch), weight_bytes=nbytes,
                      extra={"run_batch": run_batch})

    def requests(self, n: int, seed: int, contract: dict) -> list:
        return list(np.random.default_rng(seed).standard_normal((n, COLS)).astype(np.float32))

    def quality(self, loaded: Loaded, artifact, contract: dict) -> float:
        got = np.stack(loaded.extra["run_batch"](list(self._probe)))
        ref = self._reference
        cos = (got * ref).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1))
        return float(cos.mean())
