"""Energy counters of this host, read around a trial: measured where the host exposes them,
"not available" (with why) where it does not — never a made-up figure.

Counters: Linux powercap RAPL package zones (`/sys/class/powercap/intel-rapl:N/energy_uj`; AMD
hosts expose theirs there too; whole sockets, so a trial's figure includes whatever else ran on
them) and NVML's total energy of every NVIDIA GPU (millijoules since the driver loaded).
"""

from __future__ import annotations

import glob
import os

RAPL_GLOB = "/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"


def counters() -> tuple[str | None, str]:
    """("rapl" | "nvml" | None, what this host has, in words)."""
    zones = [z for z in glob.glob(RAPL_GLOB) if os.access(z, os.R_OK)]
    if zones:
        return "rapl", f"measured: Linux powercap RAPL package counters ({len(zones)} zone(s), whole socket)"
    if _nvml_handles():
        return "nvml", "measured: NVML total energy of the NVIDIA GPU(s)"
    why = ("no readable /sys/class/powercap/intel-rapl zone" if not os.path.isdir("/sys/class/powercap")
           or not glob.glob(RAPL_GLOB) else "RAPL zones exist but are not readable by this user")
    return None, f"not available on this host: {why}; no NVIDIA GPU with NVML"


def rapl_joules() -> float:
    """Sum of the package counters, in joules (wrap-around is handled by the caller's deltas)."""
    return sum(int(open(z).read()) for z in glob.glob(RAPL_GLOB)) / 1e6


def _rapl_ranges() -> float:
    total = 0.0
    for z in glob.glob(RAPL_GLOB):
        try:
            total += int(open(os.path.join(os.path.dirname(z), "max_energy_range_uj")).read()) / 1e6
        except (OSError, ValueError):
            pass
    return total


def _nvml_handles() -> list:
    try:
        import pynvml

        pynvml.nvmlInit()
        return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:  # noqa: BLE001 - no NVML library, no driver or no GPU: not available
        return []


def nvml_joules() -> float:
    """Total energy of every NVIDIA GPU since its driver loaded, in joules."""
    import pynvml

    return sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in _nvml_handles()) / 1e3


class Meter:
    """Energy between `start()` and `stop()`: {"energy_j", "energy_source"} when a counter exists,
    {"energy": "not available: ..."} otherwise."""

    def __init__(self):
        self.kind, self.words = counters()
        self._start = None

    def _read(self) -> float:
        return rapl_joules() if self.kind == "rapl" else nvml_joules()

    def start(self) -> None:
        if self.kind:
            self._start = self._read()

    def stop(self) -> dict:
        if not self.kind or self._start is None:
            return {"energy": self.words}
        delta = self._read() - self._start
        if delta < 0 and self.kind == "rapl":
            delta += _rapl_ranges()  # the counter wrapped once
        return {"energy_j": delta, "energy_source": self.words}
