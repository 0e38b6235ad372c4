"""Energy of the pilot's service: measured where the host has counters, simulated elsewhere.

Counters (measured): Linux powercap RAPL package zones (`/sys/class/powercap/intel-rapl:N/
energy_uj`, AMD hosts expose theirs there too) and NVML on NVIDIA GPUs (total energy since the
driver loaded). RAPL counts the whole socket, the controller included; the report says so.

Without counters the figure comes from a per-host power model and is `simulated` evidence,
labelled so wherever it appears: P = busy core-seconds x (TDP / hardware threads) + allotted
cores x an idle share of that, with the TDP of the shipped machine record that matches this CPU
(a vendor claim, named), and the idle share an assumption stated with it. The busy core-seconds
are the service processes' measured CPU time (/proc), so the model is driven by measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from luma.experiments.energy import RAPL_GLOB, counters, rapl_joules  # noqa: F401 - re-exported

#: Share of a hardware thread's TDP share drawn by an allotted but idle core: an assumption (idle
#: package power of server CPUs is commonly 20-40 % of TDP), stated with every figure it shapes.
IDLE_SHARE = 0.3


@dataclass(frozen=True)
class PowerModel:
    """Watts of a busy and of an allotted idle core, and where the figures come from."""

    busy_w: float
    idle_w: float
    source: str

    def joules(self, cpu_s: float, cores: int, seconds: float) -> float:
        """Energy of `cores` allotted for `seconds`, busy for `cpu_s` core-seconds of them."""
        busy = min(cpu_s, cores * seconds)
        return busy * self.busy_w + max(0.0, cores * seconds - busy) * self.idle_w

    def describe(self) -> str:
        return (f"per-host power model (simulated): {self.busy_w:.2f} W per busy core, {self.idle_w:.2f} W per "
                f"allotted idle core; {self.source}")


def host_model(cpu_model: str) -> PowerModel:
    """The power model of this host from the shipped machine record of its CPU family."""
    import importlib.resources

    root = importlib.resources.files("luma.experiments.machines")
    best = None
    for p in root.iterdir():
        if not p.name.endswith(".json"):
            continue
        doc = json.loads(p.read_text())
        arch = doc.get("architecture", {})
        if arch.get("kind") != "cpu" or not (doc.get("power") or {}).get("tdp"):
            continue
        name = arch.get("name", "")
        vendor_family = " ".join(name.split()[:2]).lower()  # "amd epyc", "intel xeon"
        if vendor_family and vendor_family in cpu_model.lower():
            best = (doc, p.name)
            if name.lower().split("(")[0].strip() in cpu_model.lower():
                break
    if best is None:
        # No record of this CPU: a generic 4 W per busy hardware thread, said plainly.
        return PowerModel(4.0, 4.0 * IDLE_SHARE, "assumed 4 W per busy hardware thread (no machine record "
                          f"matches {cpu_model!r}); idle share {IDLE_SHARE:.0%} assumed")
    doc, fname = best
    tdp = float(doc["power"]["tdp"]["value"])
    threads = _threads(doc)
    busy = tdp / threads
    return PowerModel(busy, busy * IDLE_SHARE,
                      f"TDP {tdp:g} W / {threads} hardware threads of {doc['architecture']['name']} "
                      f"(experiments/machines/{fname}, vendor-claim; this host reports {cpu_model!r}); "
                      f"idle share {IDLE_SHARE:.0%} assumed")


def _threads(doc: dict) -> int:
    import re

    for note in doc.get("notes", []):
        m = re.search(r"(\d+) threads", note)
        if m:
            return int(m.group(1))
        m = re.search(r"(\d+) cores", note)
        if m:
            return int(m.group(1))
    return 64
