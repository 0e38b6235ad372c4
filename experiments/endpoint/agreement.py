"""The agreement table of `luma endpoint bench`: per metric each tool's figure per pass, the ratio
of LUMA's mean over its passes to AIPerf's, and whether that ratio is within TOLERANCE of 1.

Only the figures both tools define the same way are judged; the others (think time, the arrival
rate each sent, requests, errors, client CPU) are shown for the reading, with `-` as verdict.
`spread_pct` is the larger of the two tools' pass-to-pass spreads (max / min - 1, in %): a ratio
that misses the band by less than that is within the run's own noise (a shared host, a server
whose speed drifts), not a difference between the tools.
"""

from __future__ import annotations

import numpy as np

#: Ratios of the means within this band of 1 agree.
TOLERANCE = 0.10
TOOLS = ("aiperf", "luma")

#: (key, label, streamed cases only, the load mode it applies to or None, judged)
ROWS = [
    ("ttft_p50", "TTFT p50 (ms)", True, None, True),
    ("ttft_p95", "TTFT p95 (ms)", True, None, True),
    ("lat_p50", "request latency p50 (ms)", False, None, True),
    ("lat_p95", "request latency p95 (ms)", False, None, True),
    ("lat_avg", "request latency mean (ms)", False, None, True),
    ("ttft_sched_p50", "TTFT p50 from the schedule (ms)", True, "poisson", True),
    ("ttft_sched_p95", "TTFT p95 from the schedule (ms)", True, "poisson", True),
    ("lat_sched_p50", "latency p50 from the schedule (ms)", False, "poisson", True),
    ("lat_sched_p95", "latency p95 from the schedule (ms)", False, "poisson", True),
    ("tpot_p50", "TPOT p50 (ms)", True, None, True),
    ("itl_avg", "inter-token gap mean (ms)", True, None, True),
    ("rps", "throughput (requests/s)", False, None, True),
    ("tok_s", "output tokens/s", True, None, True),
    ("osl_avg", "output tokens per request", True, None, True),
    ("offered_rps", "arrival rate sent (requests/s)", False, "poisson", False),
    ("send_lag_p50", "schedule -> send p50 (ms)", False, "poisson", False),
    ("think_p50", "client think time p50 (ms)", False, "closed", False),
    ("think_avg", "client think time mean (ms)", False, "closed", False),
    ("completed", "requests completed", False, None, False),
    ("errors", "errors", False, None, False),
    ("client_cpu_s", "client CPU (s)", False, None, False),
]


def mean(values) -> float | None:
    """The mean of the figures present (None when there is none)."""
    xs = [v for v in values if v is not None]
    return float(np.mean(xs)) if xs else None


def ratio(luma: list, tool: list) -> float | None:
    """LUMA's mean over its passes divided by the tool's (None when either has no figure)."""
    a, b = mean(luma), mean(tool)
    return None if a is None or not b else a / b


def verdict(r: float | None, judged: bool) -> str:
    """`yes` when the ratio is within TOLERANCE of 1, `NO` when not, `-` when not judged."""
    if not judged or r is None:
        return "-"
    return "yes" if abs(r - 1.0) <= TOLERANCE + 1e-9 else "NO"


def spread(values) -> float | None:
    """max / min - 1 of the positive figures present (None with fewer than two)."""
    xs = [v for v in values if v is not None]
    if len(xs) < 2 or min(xs) <= 0:
        return None
    return max(xs) / min(xs) - 1.0


def rows(case_result: dict) -> list[dict]:
    """The table of one case of `bench.run`'s result: case, key, metric, `aiperf_<pass>`...,
    `luma_<pass>`..., `luma/aiperf`, `within_10pct`, `spread_pct`. Metrics neither tool measured
    are left out."""
    runs = case_result["runs"]
    passes = max((r["pass"] for r in runs), default=0)
    out = []
    for key, label, stream_only, mode, judged in ROWS:
        if (stream_only and not case_result["stream"]) or (mode and mode != case_result["mode"]):
            continue
        per = {tool: [next((r.get(key) for r in runs if r["tool"] == tool and r["pass"] == p), None)
                      for p in range(1, passes + 1)] for tool in TOOLS}
        if all(v is None for vs in per.values() for v in vs):
            continue
        row = {"case": case_result["case"], "key": key, "metric": label}
        for tool in TOOLS:
            for p, v in enumerate(per[tool], 1):
                row[f"{tool}_{p}"] = None if v is None else round(float(v), 4)
        r = ratio(per["luma"], per["aiperf"])
        row["luma/aiperf"] = None if r is None else round(r, 3)
        row["within_10pct"] = verdict(r, judged)
        spreads = [x for x in (spread(per[tool]) for tool in TOOLS) if x is not None]
        row["spread_pct"] = round(max(spreads) * 100, 1) if spreads else None
        out.append(row)
    return out


def columns(passes: int) -> list[str]:
    """The table's columns for `passes` passes per tool."""
    return (["metric"] + [f"{tool}_{p}" for tool in TOOLS for p in range(1, passes + 1)]
            + ["luma/aiperf", "within_10pct", "spread_pct"])
