"""What a `host_memory` level means, and the total a deployment needs.

`luma sprint` enforces a host_memory level as a budget *on top of* the runtime's own footprint:
the trial process gets RLIMIT_DATA = the runtime's data segment measured after its imports + the
level (experiments/sprint/worker.py), so the level means the same thing whatever the runtime costs. A
buyer who provisions only the level under-provisions by the footprint (tens to hundreds of MiB),
so every place that prints a host_memory decision says what the level is and the total the
deployment needs: level + the largest footprint measured for that software variant.
"""

from __future__ import annotations

from collections.abc import Iterable

from luma.reports.fmt import bytes_text

#: Dimensions whose level is a budget above the runtime's footprint.
BUDGETS = ("host_memory",)
MEANING = ("a budget on top of the runtime's own footprint (what `luma sprint` enforces: the data "
           "segment may grow by the level beyond what the runtime holds after its imports)")
#: A served engine's level limits the whole server process (experiments/endpoint/launch.py):
#: its trials report a footprint of 0 B outside the budget.
WHOLE = ("the whole server process's data segment (what `luma sprint` enforces on an engine behind an "
         "endpoint: RLIMIT_DATA = the level, so nothing of it sits outside the budget)")


def is_budget(dimension: str) -> bool:
    return dimension in BUDGETS


def footprint(observations: Iterable[dict]) -> float | None:
    """The largest `runtime_footprint` (bytes) among observation dicts {metric: (value, unit)}."""
    seen = [obs["runtime_footprint"][0] for obs in observations if obs.get("runtime_footprint")]
    return max(seen) if seen else None


def total(level_bytes: float | None, foot: float | None) -> float | None:
    """Bytes the deployment needs in all: the level plus the runtime's footprint."""
    if level_bytes is None or foot is None:
        return None
    return level_bytes + foot


def need_text(level_bytes: float | None, foot: float | None) -> str:
    """"8 MiB + the runtime's 80.8 MiB = 88.8 MiB in all", or why the total is not known."""
    if level_bytes is None:
        return ""
    if foot is None:
        return (f"{bytes_text(level_bytes)} on top of the runtime's own footprint, which this evidence does not "
                "report: add it when provisioning")
    return f"{bytes_text(level_bytes)} + the runtime's {bytes_text(foot)} = {bytes_text(level_bytes + foot)} in all"
