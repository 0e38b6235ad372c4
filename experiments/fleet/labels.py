"""What a runner machine advertises to the fleet: Ray node labels read from the machine at run
time (never typed in), plus the fingerprint of its runner key and the owner's own labels.

    luma-isa          amx-int8 | avx512-vnni | avx512 | avx2 | avx | arm64-sve | arm64-neon | <arch>
    luma-arch         x86_64 | aarch64 | ...
    luma-cpus         usable logical CPUs
    luma-memory-gib   physical memory, GiB rounded down
    luma-accelerator  none | nvidia-<count>
    luma-runner-key   the runner key's fingerprint (the head routes only to keys it trusts;
                      the records' signatures prove it, the label only routes)
"""

from __future__ import annotations

import re

from luma.errors import ConfigError
from luma.experiments.endpoint import gpu
from luma.experiments.fleet.campaign import RESERVED, label_problem
from luma.experiments.host import cpu
from luma.experiments.sprint.states import total_memory

KEY_LABEL = RESERVED[0]
#: The custom Ray resource every runner offers exactly one of: a sprint takes it whole, so a
#: machine runs one trial at a time (physical limits need the machine to themselves).
SLOT = "luma-runner"


def isa(flags: list[str], machine: str) -> str:
    """The machine's widest int8-relevant ISA class, from the CPU flags LUMA records."""
    f = set(flags)
    for name, need in (("amx-int8", "amx_int8"), ("avx512-vnni", "avx512_vnni"), ("avx512", "avx512f"),
                       ("avx2", "avx2"), ("avx", "avx"), ("arm64-sve", "sve"), ("arm64-neon", "asimd")):
        if need in f:
            return name
    return re.sub(r"[^A-Za-z0-9_.-]", "-", machine or "unknown")


def accelerator() -> str:
    n = gpu.count()  # 0 without NVML, a driver or a GPU
    return f"nvidia-{n}" if n else "none"


def detect() -> dict[str, str]:
    """This machine's labels (everything but the runner key)."""
    info = cpu()
    out = {"luma-isa": isa(info["isa"], info["machine"]), "luma-arch": info["machine"] or "unknown",
           "luma-cpus": str(info["usable_cpus"] or info["logical_cpus"] or 0), "luma-accelerator": accelerator()}
    try:
        out["luma-memory-gib"] = str(total_memory() // 2**30)
    except (ValueError, OSError):  # a platform without the sysconf names
        pass
    return out


def parse(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`key=value` pairs of the command line as labels; a ConfigError naming the bad one."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        problem = label_problem(key, value) if sep else "no '='"
        if problem:
            raise ConfigError(f"{pair!r} is not a node label key=value: {problem}", field="label")
        out[key] = value
    return out


def ray_labels(labels: dict[str, str]) -> str:
    """The `ray start --labels` argument."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
