"""`luma campaign plan`: what a campaign will ask of each machine class, before anything runs.

Per class: its sprints, the most trials they may run (`sprint.max_trials`), how many machines
take them (the file's `machines`, or the live trusted runners of a cluster), and the wall time
if every trial takes the campaign's `trial_seconds`: sprints are placed whole, one per machine
at a time, longest first (Graham's LPT). Classes run side by side on their own machines, so the
campaign's wall time is the longest class's.
"""

from __future__ import annotations

from dataclasses import replace

from luma.experiments.fleet import head
from luma.experiments.fleet.campaign import Campaign, lpt_makespan


def plan(campaign: Campaign, machines: dict[str, int] | None = None, untrusted: dict[str, int] | None = None) -> dict:
    """The plan of `campaign`; `machines`: trusted machines per class as a cluster reports them
    (else the file's); `untrusted`: the cluster's machines of a class whose key this project
    does not trust (they get no work)."""
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
                     "note": _note(n, (untrusted or {}).get(cls, 0))})
        if untrusted is not None:
            rows[-1]["untrusted"] = untrusted.get(cls, 0)
    walls = [r["wall_s"] for r in rows]
    total = {"sprints": len(campaign.units), "max_trials": campaign.max_trials(),
             "trial_budget": campaign.spec.trial_budget, "machines": sum(r["machines"] or 0 for r in rows),
             "serial_s": round(sum(r["serial_s"] for r in rows), 1),
             "wall_s": max(walls) if walls and all(w is not None for w in walls) else None,
             "trial_seconds": campaign.spec.trial_seconds}
    return {"campaign": campaign.id, "file": campaign.source, "classes": rows, "total": total}


def _note(machines: int | None, untrusted: int) -> str:
    if machines is None:
        return "machines unknown: give `machines` or --cluster"
    if untrusted:
        runners = "runner" if untrusted == 1 else "runners"
        more = "" if machines == 0 else " more"
        return (f"{untrusted}{more} {runners} of this class not trusted here (their keys: `luma runner trust "
                "KEY.pub --name NAME`)")
    return "no machine of this class" if machines == 0 else ""


def cluster_machines(campaign: Campaign, settings, address: str) -> tuple[dict[str, int], dict[str, int]]:
    """Live runners per class on the cluster at `address`: those this project trusts, and
    those it does not (their key is unknown here or revoked)."""
    head.connect(address)
    fleet = head.nodes(head.trusted_fingerprints(settings))
    everyone = [replace(n, trusted=True) for n in fleet]
    classes = campaign.classes().items()
    trusted = {cls: len(head.eligible(arch.labels, fleet)) for cls, arch in classes}
    return trusted, {cls: len(head.eligible(arch.labels, everyone)) - trusted[cls] for cls, arch in classes}
