"""The host this code runs on: CPU model and ISA, library versions, git revision, read from this
machine at run time (the environment block of every kernel result and sprint record, and the
fleet's node labels). Unknown values stay None, never guessed.

Kernels, sprints and the fleet share it, so it imports nothing of LUMA's above the core."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from functools import lru_cache
from pathlib import Path

_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
              "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve")


@lru_cache(maxsize=1)
def cpu() -> dict:
    model, flags = None, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model") and model is None:
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu_model": model or platform.processor() or None,
        "isa": [f for f in _ISA_FLAGS if f in flags],
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "machine": platform.machine(),
    }


def architecture() -> dict:
    """This host as a record's `architecture` block: CPU model, kind, vendor."""
    model = cpu()["cpu_model"] or "unknown CPU"
    vendor = next((v for v in ("AMD", "Intel", "Arm", "Ampere", "AWS", "Apple") if v.lower() in model.lower()),
                  "unknown")
    return {"name": model, "kind": "cpu", "vendor": vendor}


def default_name(cpu_model: str, cpus: int) -> str:
    """A slug naming this host's kind: CPU model and usable CPUs (`amd-epyc-2c`), the name
    `luma machine characterize` gives its record."""
    base = re.sub(r"[^a-z0-9]+", "-", cpu_model.lower()).strip("-")[:50] or "host"
    return f"{base}-{cpus}c"


def git_revision() -> str | None:
    """The checkout's commit (with `+dirty` when it has local changes), or None outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        if not rev:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def describe(threads: int | None = None) -> dict:
    """CPU model and ISA, library versions, torch's CPU capability and threads, git revision."""
    import numpy

    env = {**cpu(), "python": platform.python_version(), "numpy": numpy.__version__, "git_revision": git_revision()}
    try:
        import torch

        env.update(torch=torch.__version__, torch_cpu_capability=torch.backends.cpu.get_cpu_capability(),
                   torch_threads=threads or torch.get_num_threads())
    except ImportError:
        env.update(torch=None)
    return env
