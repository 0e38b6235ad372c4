"""NVIDIA GPUs of this host through NVML (pynvml, optional): count and memory per GPU, for the
accelerator-count and HBM-capacity levels of endpoint states."""

from __future__ import annotations

from luma.errors import HardwareError
from luma.experiments.energy import _nvml_handles


def _handles() -> list:
    return _nvml_handles()


def count() -> int:
    """NVIDIA GPUs visible to NVML (0 without NVML, a driver or a GPU)."""
    return len(_handles())


def memory_per_gpu() -> int:
    """Bytes of memory of the smallest visible GPU; ConfigError when there is none."""
    handles = _handles()
    if not handles:
        raise HardwareError("this host has no NVIDIA GPU visible to NVML (pip install nvidia-ml-py)",
                          field="hbm_capacity")
    import pynvml

    return min(int(pynvml.nvmlDeviceGetMemoryInfo(h).total) for h in handles)
