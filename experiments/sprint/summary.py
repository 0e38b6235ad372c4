"""A sprint's result as plain data (what `--format json` prints and `sprint.json` keeps)."""

from __future__ import annotations

import math

from luma.experiments.sprint.pex import Result
from luma.experiments.sprint.states import describe
from luma.experiments.sprint.trial import Trial
from luma.kb.records import units
from luma.kb.records.pex_chain import Level


def _level(plan, index):
    return None if index is None else describe(plan.levels[index])


def trial_row(t: Trial, plan=None) -> dict:
    tel = t.telemetry
    row = {"trial": t.index, "phase": t.phase, "state": t.state.label(), "variant": t.variant, "verdict": t.verdict,
           "cause": t.cause, "requests": t.requests, "attempts": t.attempts,
           "peak_rss_mib": round(tel["peak_rss_bytes"] / 2**20, 1) if tel.get("peak_rss_bytes") else None,
           "runtime_footprint_mib": (round(tel["runtime_footprint_bytes"] / 2**20, 1)
                                     if tel.get("runtime_footprint_bytes") else None),
           "quality": tel.get("quality"), "throughput": tel.get("throughput")}
    for c in t.clauses:
        if "ci_low" in c:
            row[c["metric"]] = c["value"]
            row[c["metric"] + "_ci"] = [c["ci_low"], c["ci_high"]]
    c = tel.get("contention") or {}
    row["steal_pct"], row["cotenant_pct"] = c.get("steal_pct"), c.get("cotenant_pct")
    if tel.get("contended_attempts"):
        row["contended_attempts"] = len(tel["contended_attempts"])
    if tel.get("error"):
        row["error"] = tel["error"]
    if plan is not None:  # the swept level, and any other dimension a diagnosis restored
        levels, base = t.state.as_dict(), plan.base.as_dict()
        row["level"] = describe(levels[plan.dimension])
        row["restored"] = ", ".join(f"{d}={describe(v)}" for d, v in levels.items()
                                    if d != plan.dimension and base.get(d) != v) or None
    return row


def summarize(result: Result) -> dict:
    """Everything a user or a later tool needs: boundary, diagnosis, recovery, frontier, trials."""
    p, b = result.plan, result.boundary
    L = len(p.levels)
    out = {
        "sprint": result.sprint_id, "contract": p.contract.name, "service": p.contract.service,
        "dimension": p.dimension, "levels": [describe(x) for x in p.levels], "base_state": p.base.label(),
        "repetitions": p.repetitions, "intervention": p.intervention,
        "min_pass": _level(p, b.min_pass) if b else None, "adjacent_fail": _level(p, b.adjacent_fail) if b else None,
        "boundary_trials": b.trials if b else 0,
        "trial_budget": math.ceil(math.log2(L)) + p.repetitions, "exhaustive_trials": L * p.repetitions,
        "contradictions": b.contradictions if b else [],
        "binding": result.binding(), "diagnosis": _plain(result.diagnosis),
        "recovered": result.recovered if result.recovery else None,
        "recovery_verdicts": [t.verdict for t in result.recovery],
        "requalified_min_pass": _level(p, result.requalified.min_pass) if result.requalified else None,
        "requalified_adjacent_fail": _level(p, result.requalified.adjacent_fail) if result.requalified else None,
        "frontier": _plain(result.frontier), "next_binding": _plain(result.next_binding),
        "physical_trials": len(result.trials), "problems": result.problems,
        "ab": result.ab, "host_contended": result.contended or None,
        "trials": [trial_row(t, p) for t in result.trials],
        # The whole contract, so that `luma sprint requalify` can run this sprint again.
        "contract_spec": p.contract.model_dump(mode="json"),
    }
    if p.dimension in BUDGETS and b:
        out["deployment"] = _deployment(result)
    return out


#: Dimensions whose level is a budget on top of the runtime's own footprint (worker.py:
#: RLIMIT_DATA = footprint + level), so a deployment needs level + footprint in all.
BUDGETS = ("host_memory",)


def _deployment(result: Result) -> dict:
    """What the boundary's budget levels need in all: level + the largest runtime footprint
    measured for that variant at the sprint's base state (diagnosis restorations left out)."""
    p = result.plan
    base = {d: v for d, v in p.base.as_dict().items() if d != p.dimension}

    def foot(variant: str) -> float | None:
        seen = [t.telemetry["runtime_footprint_bytes"] for t in result.trials if t.variant == variant
                and {d: v for d, v in t.state.as_dict().items() if d != p.dimension} == base
                and isinstance(t.telemetry.get("runtime_footprint_bytes"), (int, float))]
        return float(max(seen)) if seen else None

    def entry(index, variant: str) -> dict | None:
        if index is None:
            return None
        level = p.levels[index]
        level_bytes = units.normalise(level.value, level.unit)[0]
        f = foot(variant)
        return {"variant": variant, "level": describe(level), "level_bytes": level_bytes, "runtime_footprint_bytes": f,
                "total_bytes": None if f is None else level_bytes + f}

    baseline = next((t.variant for t in result.trials if t.phase == "boundary"), "baseline")
    out = {"meaning": f"{p.dimension} is a budget on top of the runtime's own footprint: a deployment needs "
                      "level + footprint in all",
           "min_pass": entry(result.boundary.min_pass, baseline)}
    if result.requalified is not None:
        out["requalified_min_pass"] = entry(result.requalified.min_pass, p.variant or p.intervention or "")
    return out


def _plain(value):
    """Levels and nested structures as JSON-ready values."""
    if isinstance(value, Level):
        return describe(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
