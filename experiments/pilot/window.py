"""Judging one control window of live traffic, and what it cost.

A window's requests are those that *arrived* in it. Their latencies are judged with the sprint's
statistics (nearest-rank percentile, bootstrap interval; too few samples is INCONCLUSIVE); a
request still unanswered at judgement counts with the time it has waited so far (a lower bound),
one unanswered past the contract's request time-out is an error. Quality is the state's measured
quality at qualification (live traffic has no reference answers). Throughput clauses are not
judged here: the trace sets the offered rate. Reliability (error_rate, availability) is measured;
cost per accepted output is projected (measured serving time x prices) and energy per accepted
output is simulated unless the host has energy counters — each figure keeps its class.

An accepted output is an answered request of a window whose verdict is not FAIL: a window in
breach delivers no accepted service, and its requests count as outside the contract.
"""

from __future__ import annotations

import math

import numpy as np

from luma.experiments.sprint import stats
from luma.kb.records import judge as verdict_rules

LATENCY_KINDS = {"latency": "latency", "ttft": "first"}


def samples_of(reqs, now: float, timeout_s: float, kind: str = "latency") -> tuple[list[float], int]:
    """(latency samples in seconds, errors) of a window's requests at time `now`."""
    out, errors = [], 0
    for r in reqs:
        if r.error:
            errors += 1
            continue
        end = r.first if kind == "ttft" else r.done
        if end is None and now - r.at > timeout_s:
            errors += 1
            continue
        out.append((end if end is not None else now) - r.at)
    return out, errors


def judge(contract, reqs, now: float, quality: float | None, cost: float, energy_j: float, seconds: float,
          timeout_s: float, seed: int = 0) -> dict:
    """The window's figures, clause rows and verdict."""
    lat, errors = samples_of(reqs, now, timeout_s)
    n = len(reqs)
    completed = len(lat)
    rows, verdicts = [], []
    fig: dict = {"requests": n, "completed": completed, "errors": errors,
                 "error_rate": errors / n if n else 0.0}
    if lat:
        fig["p95_latency"] = stats.percentile(lat, 0.95)
    for clause in contract.clauses:
        threshold = contract.threshold(clause)
        q = verdict_rules.quantile_of(clause.metric)
        if q is not None:
            kind = clause.metric.split("_", 1)[1]
            s = lat if kind == "latency" else samples_of(reqs, now, timeout_s, kind)[0]
            if not s:
                row = {"metric": clause.metric, "verdict": "INCONCLUSIVE" if n == 0 else "FAIL", "samples": 0}
            else:
                row = {"metric": clause.metric, **stats.percentile_verdict(s, q, clause.op, threshold, seed)}
            row["threshold"] = threshold
            rows.append(row)
            verdicts.append(row["verdict"])
            continue
        value = {"quality": quality, "error_rate": fig["error_rate"], "availability": 1 - fig["error_rate"],
                 "cost_per_accepted": cost / completed if completed else math.inf,
                 "energy_per_accepted": energy_j / completed if completed else math.inf,
                 "power": energy_j / seconds if seconds > 0 else 0.0}.get(clause.metric)
        if value is None:
            continue  # throughput: set by the trace, not judged per window
        if clause.metric in ("error_rate", "availability") and n == 0:
            continue
        row = {"metric": clause.metric, "value": value, "threshold": threshold,
               "verdict": verdict_rules.interval_verdict(value, value, clause.op, threshold)}
        rows.append(row)
        verdicts.append(row["verdict"])
    verdict = verdict_rules.combine(verdicts) if verdicts else "INCONCLUSIVE"
    if n == 0:
        verdict = "INCONCLUSIVE"
    p95_row = next((r for r in rows if r["metric"].endswith("latency") and "ci_low" in r), None)
    if p95_row:
        fig["p95_ci"] = [p95_row["ci_low"], p95_row["ci_high"]]
    accepted = completed if verdict != "FAIL" else 0
    fig.update(verdict=verdict, clauses=rows, accepted=accepted, cost=cost, energy_j=energy_j,
               cost_per_accepted=cost / accepted if accepted else None,
               energy_per_accepted=energy_j / accepted if accepted else None,
               outside_contract=n if verdict == "FAIL" else errors)
    return fig


def ratio_ci(costs: list[float], outputs: list[float], seed: int = 0, resamples: int = 2000,
             confidence: float = stats.CONFIDENCE) -> dict | None:
    """Ratio of sums (cost per accepted output) with a bootstrap interval over windows."""
    c, o = np.asarray(costs, float), np.asarray(outputs, float)
    if c.size == 0 or o.sum() <= 0:
        return None
    value = float(c.sum() / o.sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, c.size, size=(resamples, c.size))
    num, den = c[idx].sum(axis=1), o[idx].sum(axis=1)
    ok = den > 0
    boot = num[ok] / den[ok]
    tail = (1 - confidence) / 2
    return {"value": value, "ci_low": float(np.quantile(boot, tail)), "ci_high": float(np.quantile(boot, 1 - tail))}


def totals(windows: list[dict], exclude_verification: bool = True) -> dict:
    """A segment's totals: requests, accepted, outside the contract (its share outside
    verification windows), cost and energy per accepted output with intervals."""
    ws = windows
    counted = [w for w in ws if not (exclude_verification and w.get("verification"))]

    def n(w: dict, key: str) -> float:  # a verification window's requests served before the switch count too
        return w[key] + w.get("before_switch", {}).get(key, 0)

    out = {"requests": sum(n(w, "requests") for w in ws), "accepted": sum(n(w, "accepted") for w in ws),
           "errors": sum(n(w, "errors") for w in ws),
           "outside_contract": sum(w["outside_contract"] for w in counted),
           "outside_share": (sum(w["outside_contract"] for w in counted) / max(1, sum(w["requests"] for w in counted))),
           "cost": sum(w["cost"] for w in ws), "energy_j": sum(w["energy_j"] for w in ws),
           "duration_s": sum(w["end_s"] - w["start_s"] for w in ws)}
    out["cost_per_accepted"] = ratio_ci([w["cost"] for w in ws], [n(w, "accepted") for w in ws])
    out["energy_per_accepted"] = ratio_ci([w["energy_j"] for w in ws], [n(w, "accepted") for w in ws], seed=1)
    return out
