"""`luma model`: the analytical model's predictions, explorations and calibration (one module per
command, loaded when it runs)."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup


model = LazyGroup("model", help=(
    "Predict PASS/FAIL and binding resources analytically; explore state spaces (simulated or projected evidence:"
    " it narrows the search, PEX trials qualify)."), lazy={
    "bench": ("luma.cli.model.throughput_bench:bench_cmd",
        "States per second of the model over a space (evaluation and verdicts, best of 3)."),
    "calibrate": ("luma.cli.model.calibrate:calibrate_cmd",
        "Measure a short design of trials per contract (default: every shipped contract), fit the model's "
        "efficiency figures, and report its error per metric."),
    "explore": ("luma.cli.model.explore:explore_cmd",
        "Sweep a state space: the minimum-cost PASS frontier, the binding resource per region and the states a "
        "PEX sprint should measure."),
    "predict": ("luma.cli.model.predict:predict_cmd",
        "Predict PASS/FAIL per clause of CONTRACT on one machine state, and the binding resource."),
})
