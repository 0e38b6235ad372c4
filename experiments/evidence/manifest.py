"""The shipped evidence set's manifest: which machines measured, with what, under how much
contention, and which files hold their signed records (manifest.json beside this module).

A machine entry names the host as the sprints saw it (CPU model, ISA flags that matter, CPUs,
memory, accelerator, OS, Python, torch, LUMA version and git revision), the runner key that signed
its records (keys/<id>.pub, public part only) and, per shipped contract, the sprint, its record
count, wall time, load average and CPU steal, and its outcome; `files` lists each record file
with its SHA-256 and the content hashes of its records (what `luma evidence verify` checks and
what `luma evidence load` trusts the key for).
"""

from __future__ import annotations

import json
import os
import platform
import re
from datetime import datetime, timezone
from pathlib import Path

from luma import __version__
from luma.errors import RecordError
from luma.experiments import host
from luma.experiments.sprint.states import total_memory

FORMAT = 1
MANIFEST = "manifest.json"


def read(root: Path) -> dict:
    """The manifest of the evidence folder `root`; RecordError naming the field when it is not one."""
    path = Path(root) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot read the manifest: {exc}", source=str(path)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f"not an evidence manifest of format {FORMAT}", source=str(path), field="format")
    if not isinstance(data.get("machines"), list):
        raise RecordError("machines must be a list", source=str(path), field="machines")
    for i, m in enumerate(data["machines"]):
        for key in ("id", "key", "contracts", "files"):
            if key not in m:
                raise RecordError(f"{key} is missing", source=str(path), field=f"machines[{i}].{key}")
    return data


def write(root: Path, data: dict) -> Path:
    """Write the manifest of `root` (stable key order, one trailing newline)."""
    path = Path(root) / MANIFEST
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def empty() -> dict:
    """A manifest with no machine yet."""
    return {"format": FORMAT, "what": "Signed measured records from every machine LUMA's own sprints ran on "
            "(`luma evidence list|verify|load|record`).", "machines": []}


def machine_id() -> str:
    """A slug naming this machine type: CPU vendor and family, widest vector ISA, usable CPUs."""
    facts = host.cpu()
    words = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", " ", (facts["cpu_model"] or platform.machine()).lower())
    slug = "-".join(re.findall(r"[a-z0-9]+", words)[:3]) or "cpu"
    isa = facts["isa"]
    widest = next((f for f in ("amx_int8", "avx512f", "avx2", "asimd") if f in isa), None) or "base"
    widest = {"amx_int8": "amx", "avx512f": "avx512"}.get(widest, widest)
    return f"{slug}-{widest}-{facts['usable_cpus'] or facts['logical_cpus']}c"


def describe_machine(mid: str, fingerprint: str, accelerator: str | None = None) -> dict:
    """This host's manifest entry, without contracts and files yet."""
    env = host.describe()
    return {"id": mid, "cpu_model": env.get("cpu_model"), "isa": env.get("isa"),
            "logical_cpus": env.get("logical_cpus"), "usable_cpus": env.get("usable_cpus"),
            "memory_bytes": total_memory(), "accelerator": accelerator or "none",
            "os": f"{platform.system()} {platform.release()}", "python": env.get("python"), "torch": env.get("torch"),
            "luma_version": __version__, "git_revision": env.get("git_revision"),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "key": {"file": f"keys/{mid}.pub", "fingerprint": fingerprint}, "contracts": [], "files": []}


def contention() -> dict:
    """Load average and the aggregate CPU counters (/proc/stat) now; `None` fields off Linux."""
    try:
        load = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        ticks = None
    return {"load": load, "ticks": ticks}


def contention_between(before: dict, after: dict) -> dict:
    """What the host's other tenants took while a sprint ran: load averages at both ends, and the
    shares of CPU time stolen by the hypervisor and busy (all tenants) over the interval, in %."""
    out: dict = {"load_before": before.get("load"), "load_after": after.get("load"), "steal_pct": None,
                 "busy_pct": None}
    b, a = before.get("ticks"), after.get("ticks")
    if b and a:
        d = [y - x for x, y in zip(b, a)]
        total = sum(d)
        if total > 0:  # user nice system idle iowait irq softirq steal
            out["steal_pct"] = round(100 * d[7] / total, 2)
            out["busy_pct"] = round(100 * (total - d[3] - d[4]) / total, 2)
    return out
