"""`luma endpoint bench`: LUMA's endpoint load generator against NVIDIA AIPerf on the same
llama.cpp servers (experiments/endpoint/aiperf_comparison.py), figures and ratios from the same run."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import Tracker
from luma.cli.project import WRITE, project, settings
from luma.experiments.endpoint import agreement, aiperf, aiperf_comparison as bench
from luma.experiments.endpoint.aiperf_comparison import CASES


def _cases(ctx, param, value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown or not names:
        raise click.BadParameter(f"known cases: {', '.join(CASES)} (comma-separated)")
    return names


@click.command("bench")
@click.option("--aiperf", "aiperf_path", metavar="PATH",
              help="The AIPerf executable (default: `aiperf` on PATH). Install: python3 -m venv /tmp/aiperf-venv "
                   "&& /tmp/aiperf-venv/bin/pip install aiperf==0.13.0")
@click.option("--cases", default="embeddings,completions,completions-open", show_default=True, callback=_cases,
              help="Cases to run: embeddings (closed loop, 4 clients), completions (streamed, closed loop, "
                   "2 clients, 64 tokens), completions-open (Poisson arrivals at 65% of the closed-loop capacity).")
@click.option("--passes", type=click.IntRange(1, 10), default=2, show_default=True,
              help="Passes per tool, alternating aiperf, luma, aiperf, luma ...")
@click.option("--requests", type=click.IntRange(10, 100_000), default=None,
              help="Requests per pass in every case (default: 240 embeddings, 300 completions).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Arrival rate of completions-open in requests/s (default: 65% of the closed-loop "
                   "completions throughput measured in the same run).")
@click.option("--arrivals", type=click.Choice(["same", "own"]), default="same", show_default=True,
              help="completions-open: `same` = AIPerf replays LUMA's seeded Poisson arrivals "
                   "(--fixed-schedule); `own` = each tool draws its own (AIPerf --request-rate).")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep AIPerf's exports and the server logs in this folder.")
@format_option()
@project(WRITE)
def bench_cmd(aiperf_path, cases, passes, requests, rate, arrivals, keep, fmt) -> None:
    """LUMA's endpoint load generator against NVIDIA AIPerf on the same llama.cpp servers (one
    core each): same texts, body fields and load; per metric each tool's figure per pass, the
    ratio of LUMA's mean to AIPerf's and whether it is within 10 %. The artifacts of the
    contracts llamacpp-minilm-memory (q8_0) and llamacpp-tinyllama-kv (f16) are made under the
    project the first time."""

    binary = aiperf.find(aiperf_path)  # before anything slow: a missing tool is one line
    cache = settings().home / "artifacts"
    err = console(stderr=True)
    targets = {}
    for name in dict.fromkeys(bench.CASES[c].target for c in cases):
        contract_name, variant = bench.TARGETS[name]
        targets[name] = bench.contract_target(contract_name, variant, cache,
                                              lambda m: err.print(f"  {name}: {m}", highlight=False, soft_wrap=True))
    plan = [(tool, float(requests or bench.CASES[c].requests)) for c in cases for _ in range(passes)
            for tool in ("aiperf", "luma")]
    with Tracker("endpoint bench", plan, unit="run", console=err) as progress:
        out = bench.run(cases, binary, targets, passes, requests, rate, arrivals, keep, progress)
    rows = [r for c in out["cases"] for r in agreement.rows(c)]
    if fmt != "table":
        for r in rows:
            case = next(c for c in out["cases"] if c["case"] == r["case"])
            r.update(load=case["load"], requests=case["requests"], target=case["target"], aiperf=out["aiperf"])
        print_rows(rows, ["case", "key"] + agreement.columns(passes) + ["load", "requests", "target", "aiperf"], fmt)
        return
    for case in out["cases"]:
        print_rows([r for r in rows if r["case"] == case["case"]], agreement.columns(passes), "table",
                   title=f"{case['case']}: {case['target']}, {case['load']}, {case['requests']} requests, "
                         f"server on {out.get('server_cores', 1)} core, clients on {out.get('client_cores', 1)}; "
                         f"AIPerf {out['aiperf']}")
