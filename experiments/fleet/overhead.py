"""`luma campaign bench`: what a campaign costs the fleet engine and the head, measured on a
live cluster against a baseline taken in the same run (docs/fleet.md builds its 1,000-machine
estimate on these figures).

* Ray's own floor: an empty task, default options, one at a time (the baseline), and a burst.
* A unit-shaped empty task: the label selector of a machine class plus the trusted-key clause,
  one `luma-runner` slot, no CPU -- with the project's keys, and with 1,000 keys in the clause
  (a large partner network), each against the baseline.
* `ray.nodes()`, which the head polls to notice lost classes.
* The head's ingest of one sprint's records, as this project's campaign heads recorded it.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from luma.experiments.fleet import head, labels
from luma.experiments.fleet.head import saved_states


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _noop() -> int:
    return 0


def run(settings, address: str, n: int = 30, burst: int = 200) -> list[dict]:
    """The bench's rows: measure, value, unit, ratio to the baseline where one applies."""
    import ray

    head.connect(address)
    trusted = sorted(head.trusted_fingerprints(settings))
    fleet = head.nodes(set(trusted))
    runner = next((nd for nd in fleet if nd.trusted), None)
    task = ray.remote(_noop)
    ray.get(task.remote())  # a worker started before the clock runs
    base = _median_ms(lambda: ray.get(task.remote()), n)
    rows = [{"measure": "empty task round trip (baseline: Ray defaults)", "value": round(base, 2), "unit": "ms",
             "vs_baseline": 1.0}]
    t = time.perf_counter()
    ray.get([task.remote() for _ in range(burst)])
    rate = burst / (time.perf_counter() - t)
    rows.append({"measure": f"burst of {burst} empty tasks", "value": round(rate, 1), "unit": "tasks/s",
                 "vs_baseline": None})
    if runner is not None:
        own = {k: v for k, v in runner.labels.items() if not k.startswith(("ray.io/", labels.KEY_LABEL))}
        fake = [f"{i:032x}" for i in range(1000 - len(trusted))]
        for what, keys in (("the project's keys", trusted), ("1,000 keys", trusted + fake)):
            opts = {"label_selector": {**own, labels.KEY_LABEL: f"in({','.join(keys)})"},
                    "resources": {labels.SLOT: 1}, "num_cpus": 0}
            ray.get(task.options(**opts).remote())
            ms = _median_ms(lambda: ray.get(task.options(**opts).remote()), n)
            rows.append({"measure": f"unit-shaped task round trip ({what} in the selector)", "value": round(ms, 2),
                         "unit": "ms", "vs_baseline": round(ms / base, 2)})
    else:
        rows.append({"measure": "unit-shaped task round trip", "value": None, "unit": "ms", "vs_baseline": None,
                     "note": "no trusted runner on the cluster"})
    ms = _median_ms(ray.nodes, n)
    rows.append({"measure": f"ray.nodes() ({len(ray.nodes())} nodes)", "value": round(ms, 2), "unit": "ms",
                 "vs_baseline": round(ms / base, 2)})
    rows += ingest_rows(settings.home)
    return rows


def ingest_rows(home: Path) -> list[dict]:
    """The head's per-sprint ingest, from this project's campaign states."""
    seconds, records = [], []
    for state in saved_states(home):
        for u in state.get("units", []):
            if u.get("ingest_s") is not None and u.get("records"):
                seconds.append(u["ingest_s"])
                records.append(u["records"])
    if not seconds:
        return [{"measure": "head ingest of one sprint", "value": None, "unit": "s", "vs_baseline": None,
                 "note": "no campaign has run in this project yet"}]
    med = statistics.median(seconds)
    return [{"measure": f"head ingest of one sprint ({statistics.median(records):g} records, "
                        f"median of {len(seconds)} sprints)", "value": round(med, 3), "unit": "s", "vs_baseline": None},
            {"measure": "head ingest rate", "value": round(sum(records) / sum(seconds), 1), "unit": "records/s",
             "vs_baseline": None}]
