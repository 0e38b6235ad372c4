"""Physical trials per qualified boundary: bisection against an exhaustive sweep of the same
levels, both measured in the same run on this machine (`luma sprint bench`)."""

from __future__ import annotations

import math
import time

from luma.experiments.services import get
from luma.experiments.sprint import search
from luma.experiments.sprint.pex import Plan
from luma.experiments.sprint.states import describe
from luma.experiments.sprint.trial import run_trial


def run(plan: Plan, cache, progress=lambda msg: None, start: int | None = None, sweep: bool = True) -> dict:
    """Both searches on `plan` (fp32 variant); the boundaries they find and what each cost.
    `start`: the model's predicted minimum PASS level — a third search, bisection started there
    (`luma sprint bench --model`), on the same levels. `sweep=False` skips the exhaustive sweep."""
    artifact = get(plan.contract.service).prepare("fp32", cache)
    L, reps = len(plan.levels), plan.repetitions

    def probe(i: int, how: str) -> str:
        t = run_trial(plan.contract, plan.state(i), artifact, "fp32", "boundary", seed=i,
                      max_retries=plan.max_retries)
        progress(f"{how}: {describe(plan.levels[i])} -> {t.verdict}")
        return t.verdict

    t0 = time.perf_counter()
    b = search.find(L, lambda i: probe(i, "bisection"), reps)
    bisect_s = time.perf_counter() - t0

    def lv(i):
        return None if i is None else describe(plan.levels[i])

    out = {"contract": plan.contract.name, "dimension": plan.dimension, "levels": L, "repetitions": reps,
           "bisection": {"trials": b.trials, "min_pass": lv(b.min_pass), "adjacent_fail": lv(b.adjacent_fail),
                         "seconds": round(bisect_s, 1), "contradictions": b.contradictions},
           "model": None, "budget": math.ceil(math.log2(L)) + reps,
           "within_budget": b.trials <= math.ceil(math.log2(L)) + reps}
    if start is not None:
        t0 = time.perf_counter()
        g = search.find(L, lambda i: probe(i, "model-guided"), reps, start=start)
        out["model"] = {"trials": g.trials, "start": lv(start), "min_pass": lv(g.min_pass),
                        "adjacent_fail": lv(g.adjacent_fail), "seconds": round(time.perf_counter() - t0, 1),
                        "contradictions": g.contradictions, "same_boundary": g.min_pass == b.min_pass}
    if not sweep:
        return out
    t0 = time.perf_counter()
    sweep = {i: [probe(i, "sweep") for _ in range(reps)] for i in range(L)}
    sweep_s = time.perf_counter() - t0
    passing = [i for i in range(L) if all(v == "PASS" for v in sweep[i])]
    # The sweep's minimum PASS: the lowest level from which every level up passes every time.
    sweep_min = next((i for i in range(L) if all(j in passing for j in range(i, L))), None)
    monotone = passing == list(range(passing[0], L)) if passing else True
    return {
        **out,
        "sweep": {"trials": L * reps, "min_pass": lv(sweep_min), "monotone": monotone,
                  "verdicts": {describe(plan.levels[i]): v for i, v in sweep.items()}, "seconds": round(sweep_s, 1)},
        "same_boundary": b.min_pass == sweep_min,
        "trial_ratio": round(L * reps / b.trials, 2) if b.trials else None,
    }
