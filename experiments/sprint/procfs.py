"""What Linux's /proc says about a process: the memory figures a trial's telemetry keeps (shared by
the trial worker and the endpoint runner, which watches a server process)."""

from __future__ import annotations


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmData, VmRSS, VmHWM and VmPeak of a process (this one by default), in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmData", "VmRSS", "VmHWM", "VmPeak"):
                out[key] = int(value.split()[0]) * 1024
    return out
