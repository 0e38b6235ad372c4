"""`luma campaign plan`: what a campaign will ask of each machine class, before anything runs.

Per class: its sprints, the most trials they may run (`sprint.max_trials`), how many machines
take them (the file's `machines`, or the live trusted runners of a cluster), and the wall time
if every trial takes the campaign's `trial_seconds`: sprints are placed whole, one per machine
at a time, longest first (Graham's LPT). Classes run side by side on their own machines, so the
campaign's wall time is the longest class's.
"""

from __future__ import annotations

from luma.experiments.fleet import head
from luma.experiments.fleet.campaign import Campaign, lpt_makespan


def plan(campaign: Campaign, machines: dict[str, int] | None = None) -> dict:
    """The plan of `campaign`; `machines`: machines per class as a cluster reports them (else
    the file's)."""
    rows = []
    for cls, arch in campaign.classes().items():
        units = [u for u in campaign.units if u.machine_class == cls]
        n = machines.get(cls, 0) if machines is not None else arch.machines
        durations = [u.max_trials() * u.trial_seconds for u in units]
        wall = lpt_makespan(durations, n) if n is not None else None
        rows.append({"class": cls, "labels": ",".join(f"{k}={v}" for k, v in sorted(arch.labels.items())),
                     "machines": n, "sprints": len(units), "max_trials": sum(u.max_trials() for u in units),
                     "serial_s": round(sum(durations), 1),
                     "wall_s": None if wall is None or wall == float("inf") else round(wall, 1),
                     "note": "no machine of this class" if n == 0 else
                             "machines unknown: give `machines` or --cluster" if n is None else ""})
    walls = [r["wall_s"] for r in rows]
    total = {"sprints": len(campaign.units), "max_trials": campaign.max_trials(),
             "trial_budget": campaign.spec.trial_budget, "machines": sum(r["machines"] or 0 for r in rows),
             "serial_s": round(sum(r["serial_s"] for r in rows), 1),
             "wall_s": max(walls) if walls and all(w is not None for w in walls) else None,
             "trial_seconds": campaign.spec.trial_seconds}
    return {"campaign": campaign.id, "file": campaign.source, "classes": rows, "total": total}


def cluster_machines(campaign: Campaign, settings, address: str) -> dict[str, int]:
    """Live trusted runners per class on the cluster at `address`."""
    head.connect(address)
    fleet = head.nodes(head.trusted_fingerprints(settings))
    return {cls: len(head.eligible(arch.labels, fleet)) for cls, arch in campaign.classes().items()}
