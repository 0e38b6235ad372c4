"""`luma sprint`: PEX qualification sprints on this machine (one module per command, loaded when it
runs; the sprints themselves are luma.experiments.sprint's)."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup


sprint = LazyGroup("sprint", help=(
    "Qualify resource boundaries with physical trials on this machine."), lazy={
    "bench": ("luma.cli.sprint.bisection_bench:bench_cmd",
        "Physical trials per boundary: bisection vs an exhaustive sweep of the same levels (same run), and "
        "bisection started at the model's predicted boundary (--model)."),
    "contracts": ("luma.cli.sprint.contracts:contracts_cmd", "List the example contracts shipped with LUMA."),
    "list": ("luma.cli.sprint.list:list_cmd",
        "The sprints run in this project: what each was, when, its trials, its chain or why none, and its folder."),
    "optimize": ("luma.cli.sprint.optimize:optimize_cmd",
        "Highest accepted throughput on a fixed machine state, over precision, batch size, threads and engine "
        "replicas."),
    "plan": ("luma.cli.sprint.plan:plan_cmd",
        "Freeze the experiment matrix of a sprint without running it: the levels, base state, intervention and "
        "repetitions, with the analytical model's verdict at each level."),
    "requalify": ("luma.cli.sprint.requalify:requalify_cmd",
        "Measure stale qualified boundaries again: each CHAIN (a chain IRI or 8+ hex digits of its key), or with "
        "--stale every open stale boundary, re-run as the sprint that measured it (its contract, dimension, "
        "levels, intervention and repetitions)."),
    "run": ("luma.cli.sprint.run:run_cmd",
        "Find the minimum PASS and adjacent FAIL along one dimension, diagnose the binding resource, recover PASS"
        " with an intervention and re-qualify the boundary with it in place (CONTRACT, or the frozen experiment "
        "matrix of --matrix)."),
})
