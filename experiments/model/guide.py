"""Model-guided PEX: the model's predicted boundary is where a sprint's bisection starts.

`search.find(start=i)` probes level i and its neighbour first; when the prediction is right the
boundary is placed in two trials instead of ⌈log₂(L+1)⌉. A wrong prediction costs at most those
two trials more — the physical trials still decide.
"""

from __future__ import annotations

import numpy as np

from luma.experiments.model import space as space_mod
from luma.experiments.model.evaluate import Evaluator
from luma.experiments.model.services import get

#: Dimensions the model predicts (runtime ISA levels it does not).
MODELLED = ("host_memory", "kv_cache", "compute")


def _raw(level):
    d = level.model_dump(exclude_none=True)
    return d if "unit" in d else d["value"]


def predicted_levels(plan, calibration: dict | None, variant: str = "fp32") -> list[str] | None:
    """The model's verdict at each of the plan's levels (the fp32 service on its base state);
    None when the swept dimension is not one the model predicts."""
    if plan.dimension not in MODELLED:
        return None
    variants = get(plan.contract.service).variants
    axes = {}
    for dim, level in plan.base.levels:
        if dim in space_mod.AXES and dim != "runtime":
            axes[dim] = space_mod.make_axis(dim, [_raw(level)], f"state.{dim}", variants)
    axes["variant"] = space_mod.make_axis("variant", [variant], "variant", variants)
    axes[plan.dimension] = space_mod.make_axis(plan.dimension, [_raw(lv) for lv in plan.levels], "levels", variants)
    sp = space_mod.Space("sprint levels", axes)
    ev = Evaluator(plan.contract, sp, calibration)
    m, _ = ev.evaluate(np.arange(ev.size, dtype=np.int64))
    # The swept axis is the only one with several levels, ascending like the plan's.
    return ["PASS" if p else "FAIL" for p in ev.judge(m).passed]


def predicted_start(plan, calibration: dict | None) -> int | None:
    """Index of the lowest level the model predicts PASS (the predicted minimum PASS); None when
    it predicts no PASS at all or cannot predict this dimension."""
    verdicts = predicted_levels(plan, calibration)
    if not verdicts:
        return None
    return next((i for i, v in enumerate(verdicts) if v == "PASS"), None)
