"""The simulator: the model over a whole state space, vectorised and chunked.

For every demand point (the load axes: concurrency, context, new tokens) it finds the
**minimum-cost PASS state** (ties: the larger margin); the frontier is these states. Per region
(the categorical machine axes: accelerator type, precision or variant) it counts the binding
resources of the FAIL states. It proposes the states whose *physical* verdict would change a
decision: each frontier state with its neighbours one level down an ordered machine axis
(count, memory, bandwidth, link, cores, batch) that the model predicts FAIL — the adjacent-FAIL
states a PEX sprint would qualify — and the states whose predicted margin is within the model's
calibrated error.

Everything here is simulated (this host, calibrated) or projected (other hardware) evidence: it
narrows the search and never qualifies a boundary.
"""

from __future__ import annotations

import time

import numpy as np

from luma.experiments.model import judge as judge_mod, llm_calibrate
from luma.experiments.model.evaluate import Evaluator, figures_row
from luma.experiments.model.space import DEMAND, ORDERED, Space

CHUNK = 1 << 18
_CATEGORICAL = ("accelerator_type", "precision", "variant")


def explore(contract, space: Space, calibration: dict | None = None, *, chunk: int = CHUNK, propose: int = 10,
            effects=None) -> dict:
    ev = Evaluator(contract, space, calibration, effects)
    demand = [n for n in DEMAND if n in ev.names]
    region = [n for n in _CATEGORICAL if n in ev.names]
    dshape = tuple(len(space.axes[n]) for n in demand)
    rshape = tuple(len(space.axes[n]) for n in region)
    n_demand, n_region, R = int(np.prod(dshape)), int(np.prod(rshape)), len(judge_mod.RESOURCES)
    best_cost = np.full(n_demand, np.inf)
    best_margin = np.full(n_demand, -np.inf)
    best_idx = np.full(n_demand, -1, dtype=np.int64)
    bind_counts = np.zeros(n_region * R, dtype=np.int64)
    states_per_region = np.zeros(n_region, dtype=np.int64)
    pass_per_region = np.zeros(n_region, dtype=np.int64)
    near_idx, near_val = np.empty(0, dtype=np.int64), np.empty(0)
    passed_total, spent = 0, 0.0
    for start in range(0, ev.size, chunk):
        t0 = time.perf_counter()
        flat = np.arange(start, min(start + chunk, ev.size), dtype=np.int64)
        m, cost = ev.evaluate(flat)
        j = ev.judge(m)
        idx = ev.indices(flat)
        did = np.ravel_multi_index([idx[n] for n in demand], dshape) if demand else np.zeros(len(flat), dtype=np.int64)
        rid = np.ravel_multi_index([idx[n] for n in region], rshape) if region else np.zeros(len(flat), dtype=np.int64)
        margin = j.margins.min(axis=0)
        # Frontier: the cheapest PASS per demand point (larger margin on ties).
        cost_p = np.where(j.passed, cost, np.inf)
        order = np.lexsort((-margin, cost_p, did))
        groups, first = np.unique(did[order], return_index=True)
        cand = order[first]
        better = (cost_p[cand] < best_cost[groups]) | ((cost_p[cand] == best_cost[groups]) &
                                                       (margin[cand] > best_margin[groups]))
        better &= np.isfinite(cost_p[cand])
        g = groups[better]
        best_cost[g], best_margin[g], best_idx[g] = cost_p[cand][better], margin[cand][better], flat[cand][better]
        fails = ~j.passed
        bind_counts += np.bincount(rid[fails] * R + j.binding[fails], minlength=n_region * R)
        states_per_region += np.bincount(rid, minlength=n_region)
        pass_per_region += np.bincount(rid[j.passed], minlength=n_region)
        passed_total += int(j.passed.sum())
        # States the model cannot call apart from its own error.
        keep = min(propose, len(flat))
        close = np.where(np.broadcast_to(m["supported"], flat.shape), j.closeness, np.inf)
        part = np.argpartition(close, keep - 1)[:keep]
        near_idx, near_val = np.concatenate([near_idx, flat[part]]), np.concatenate([near_val, close[part]])
        top = np.argsort(near_val, kind="stable")[:propose]
        near_idx, near_val = near_idx[top], near_val[top]
        spent += time.perf_counter() - t0
    frontier = _frontier(ev, demand, dshape, best_idx)
    return {
        "contract": contract.name, "space": space.name, "model": space.model.name if space.model else contract.service,
        "evidence_class": ev.evidence_class,
        "calibrated": bool(not ev.overridden if space.is_llm else ev.params.calibrated),
        "errors": ev.errors, **(_llm_error(ev) if space.is_llm else {}), "states": ev.size, "seconds": round(spent, 4),
        "states_per_second": round(ev.size / spent) if spent > 0 else None, "pass_states": passed_total,
        "cost_unit": ev.cost_unit, "cost_source": ev.cost_source, "demand_axes": demand, "frontier": frontier,
        "regions": _regions(ev, region, rshape, bind_counts, states_per_region, pass_per_region),
        "proposals": _proposals(ev, frontier, near_idx, near_val, propose),
    }


def _llm_error(ev: Evaluator) -> dict:
    """An LLM space's projection error on held-out published measurements, and its basis."""
    out = {"error_detail": ev.llm_cal.get("errors", {}).get("held-out", {}),
           "error_summary": llm_calibrate.summary_line(ev.llm_cal), "error_basis": llm_calibrate.basis(ev.llm_cal)}
    if ev.overridden:
        out["error_note"] = (f"the space's [efficiency] sets {', '.join(ev.overridden)}: the stated error was measured "
                             "with the fitted figures, not these")
    return out


def _describe(ev: Evaluator, flat: np.ndarray) -> list[dict]:
    """Figures, verdict, margin and binding/tightest resource of a few states."""
    if len(flat) == 0:
        return []
    m, cost = ev.evaluate(flat)
    j = ev.judge(m)
    out = []
    for i, f in enumerate(flat):
        fig = figures_row(m, i)
        row = {"index": int(f), "state": ev.label(int(f)), "verdict": "PASS" if j.passed[i] else "FAIL",
               "cost": float(cost[i]), "margin": float(j.margins[:, i].min()), "resource": j.resource(i),
               "closeness": float(j.closeness[i]), **_margins(j, i)}
        for k in ("latency", "ttft", "tpot", "memory_need", "peak_rss", "throughput", "energy_per_token", "slots"):
            if k in fig:
                row[k] = fig[k]
        out.append(row)
    return out


def _margins(j, i: int) -> dict:
    """The margin of the check behind the named (binding or tightest) resource, and the smallest
    margin of any check with its name (a quality clause may be the closest call without being a
    resource): `margin` alone mixes the two."""
    margins = j.margins[:, i]
    mine = [float(margins[k]) for k in range(len(j.checks)) if int(j.codes[k][i]) == int(j.binding[i])
            and not np.isnan(margins[k])]
    ranked = np.where(np.isnan(margins), np.inf, margins)
    k = int(np.argmin(ranked))
    return {"resource_margin": min(mine) if mine else float("nan"),
            "closest_check": j.checks[k].name if np.isfinite(ranked[k]) else None,
            "closest_margin": float(margins[k]) if np.isfinite(ranked[k]) else float("nan")}


def _frontier(ev: Evaluator, demand: list[str], dshape: tuple, best_idx: np.ndarray) -> list[dict]:
    rows = []
    described = {r["index"]: r for r in _describe(ev, best_idx[best_idx >= 0])}
    for d in range(len(best_idx)):
        point = dict(zip(demand, (ev.space.axes[n].labels[int(i)] for n, i in
                                  zip(demand, np.unravel_index(d, dshape))))) if demand else {}
        if best_idx[d] < 0:
            rows.append({"demand": point, "verdict": "FAIL", "state": None, "note": "no state in the space passes"})
            continue
        r = described[int(best_idx[d])]
        machine = {k: v for k, v in r["state"].items() if k not in demand}
        rows.append({"demand": point, **r, "state": machine})
    return rows


def _regions(ev, region, rshape, counts, states, passes) -> list[dict]:
    R = len(judge_mod.RESOURCES)
    rows = []
    for r in range(len(states)):
        labels = dict(zip(region, (ev.space.axes[n].labels[int(i)] for n, i in zip(region, np.unravel_index(r, rshape)))))
        c = counts[r * R:(r + 1) * R]
        binding = {judge_mod.RESOURCES[k]: int(c[k]) for k in np.argsort(-c) if c[k]}
        rows.append({"region": labels, "states": int(states[r]), "pass": int(passes[r]),
                     "binding": next(iter(binding), None), "fail_bindings": binding})
    return rows


def _proposals(ev: Evaluator, frontier: list[dict], near_idx, near_val, limit: int) -> list[dict]:
    """Adjacent FAIL states of the frontier (one ordered machine axis one level down), then the
    states within the model's error; closest calls first."""
    pairs = []
    shape = ev.shape
    for row in frontier:
        if row.get("index") is None:
            continue
        pos = list(np.unravel_index(row["index"], shape))
        for axis in ORDERED:
            if axis in ev.names and pos[ev.names.index(axis)] > 0:
                down = list(pos)
                down[ev.names.index(axis)] -= 1
                pairs.append((row, axis, int(np.ravel_multi_index(down, shape))))
    below = {r["index"]: r for r in _describe(ev, np.array(sorted({p[2] for p in pairs}), dtype=np.int64))}
    out = []
    for row, axis, idx in sorted(pairs, key=lambda p: abs(p[0]["margin"])):
        nb = below[idx]
        if nb["verdict"] == "FAIL" and nb["resource"] != "unsupported":
            out.append({**nb, "reason": f"adjacent FAIL of a frontier state along {axis} (binding: {nb['resource']})",
                        "pass_state": row["state"], "pass_margin": row["margin"]})
    seen = {p["index"] for p in out}
    for r in _describe(ev, near_idx[np.isfinite(near_val)]):
        if r["index"] not in seen and r["resource"] != "unsupported":
            out.append({**r, "reason": f"margin within the model's error ({r['closeness']:.2f} error widths)"})
            seen.add(r["index"])
    return out[:limit]


def bench(contract, space: Space, calibration: dict | None = None, repeat: int = 3) -> dict:
    """States per second of the model alone (evaluation + verdicts, no bookkeeping), best of `repeat`."""
    ev = Evaluator(contract, space, calibration)
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for start in range(0, ev.size, CHUNK):
            m, _ = ev.evaluate(np.arange(start, min(start + CHUNK, ev.size), dtype=np.int64))
            ev.judge(m)
        best = min(best, time.perf_counter() - t0)
    return {"space": space.name, "states": ev.size, "seconds": round(best, 4), "states_per_second": round(ev.size / best)}
