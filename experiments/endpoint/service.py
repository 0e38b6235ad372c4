"""The parent side of an endpoint service: what a sprint asks of any service (`prepare`,
`interventions`, `workload`, the baseline variant) for a server described by a contract's
`[service]` table. The trial itself (launch, load, quality) runs in the trial worker
(`luma.experiments.endpoint.trial`).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from luma.errors import ConfigError, ContractError
from luma.experiments.endpoint import vllm_cpu
from luma.experiments.endpoint.spec import EndpointSpec
from luma.kernels.sentences import CALIBRATION, SENTENCES

#: Seconds a variant's `prepare` command may take (a model conversion).
PREPARE_TIMEOUT_S = 1800


def texts(n: int, seed: int) -> list[str]:
    """n request texts drawn (seeded) from the shipped sentence and calibration sets."""
    rng = random.Random(seed)
    pool = [*SENTENCES, *CALIBRATION]
    return [rng.choice(pool) for _ in range(n)]


class EndpointService:
    """A service behind an OpenAI-compatible endpoint (see `spec.EndpointSpec`)."""

    name = "openai-endpoint"
    uses_torch = False

    def __init__(self, spec: EndpointSpec):
        self.spec = spec
        self.interventions = dict(spec.interventions)
        self.baseline = spec.baseline

    def workload(self) -> dict:
        return self.spec.workload.model_dump()

    def model_path(self, variant: str, cache: Path) -> Path | str:
        """Where the variant's artifact lives (a `file` under `cache/endpoint/`, absolute paths as
        given), or the model name the engine resolves."""
        v = self._variant(variant)
        if v.model is not None:
            return v.model
        path = Path(os.path.expanduser(v.file))
        return path if path.is_absolute() else Path(cache) / "endpoint" / path

    def _variant(self, variant: str):
        if variant not in self.spec.variants:
            raise ContractError(f"the endpoint service has no variant {variant!r} "
                              f"(it has: {', '.join(self.spec.variants)})", field="variant")
        return self.spec.variants[variant]

    def prepare(self, variant: str, cache: Path) -> Path:
        """The variant's artifact, made by its `prepare` command when missing (written aside and
        renamed, so an interrupted conversion never leaves half a file); the quality reference
        beside it when the contract scores quality."""
        target = self.model_path(variant, cache)
        if self.spec.uses("vllm_python"):
            vllm_cpu.python()  # not installed: one line naming the install command, before any trial
        if self.spec.quality == "minilm-cosine":
            reference_file(cache)
        if isinstance(target, str):
            return Path(target)
        v = self._variant(variant)
        if target.exists():
            return target
        if not v.prepare:
            raise ContractError(f"variant {variant!r}: {target} does not exist and the variant has no prepare "
                              f"command", field=f"service.variants.{variant}.file")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        values = {"python": sys.executable, "artifact": str(tmp), "model": str(target), "variant": variant}
        command = [part.format_map(values) for part in v.prepare]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PREPARE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tmp.unlink(missing_ok=True)
            raise ConfigError(f"variant {variant!r}: prepare command failed: {exc}",
                              field=f"service.variants.{variant}.prepare") from None
        if done.returncode != 0 or not tmp.exists():
            tmp.unlink(missing_ok=True)
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise ConfigError(f"variant {variant!r}: prepare command exited with {done.returncode}: {tail[0][:300]}",
                              field=f"service.variants.{variant}.prepare")
        os.replace(tmp, target)
        return target


    def trial_spec(self, cache: Path) -> dict:
        """What the trial worker needs beyond the common spec: the [service] table and the
        quality reference."""
        out = {"endpoint": self.spec.model_dump(mode="json")}
        if self.spec.quality == "minilm-cosine":
            out["reference"] = str(reference_file(cache))
        return out


def reference_file(cache: Path) -> Path:
    """LUMA's fp32 all-MiniLM-L6-v2 embeddings of the shipped sentences as a NumPy file (the
    `minilm-cosine` quality reference), made once from the in-process embedding service's."""
    import numpy as np

    from luma.experiments.services.embedding import EmbeddingService, source_hash  # imports torch

    out = Path(cache) / "endpoint" / f"minilm-reference-{source_hash()}.npz"
    if out.exists():
        return out
    import torch

    artifact = EmbeddingService().prepare("fp32", cache)
    ref = torch.load(EmbeddingService.reference_path(artifact), weights_only=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp.npz")
    np.savez(tmp, sentences=np.array(ref["sentences"]), embeddings=ref["embeddings"].numpy())
    os.replace(tmp, out)
    return out
