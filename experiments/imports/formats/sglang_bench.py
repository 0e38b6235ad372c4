"""SGLang `python -m sglang.bench_serving --output-file X [--output-details]`: one JSON object
per run, appended as a line to X.

Defined by sgl-project/sglang `python/sglang/bench_serving.py` (SGLang 0.4.x – 0.5.x): the
result has `duration`, `completed`, `request_throughput`, `output_throughput`, `mean_/median_/
std_/p99_{ttft,tpot,e2e_latency}_ms`, `mean_/median_/std_/p95_/p99_itl_ms` (all `np.percentile`,
linear interpolation) and the settings (`backend`, `dataset_name`, `request_rate`,
`max_concurrency`, `random_input_len`, …); `--output-details` adds per request `input_lens`,
`output_lens`, `ttfts`, `itls`, `generated_texts`, `errors`. There is no per-request latency in
the details: a request's latency here is ttft + the sum of its itls (SGLang's own latency also
counts the stream's tail after the last token), and its TPOT sum(itls) / (output_len − 1). The
file records no SGLang version: `--tool-version` gives it.
"""

from __future__ import annotations

import json
from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "sglang bench_serving"
SETTINGS = ("backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len", "random_input_len",
            "random_output_len", "random_range_ratio", "tag")
MARKS = ("completed", "duration", "mean_e2e_latency_ms", "mean_ttft_ms", "backend")


def looks_like(doc) -> tuple[int, list[str]]:
    if not isinstance(doc, dict):
        return 0, ["a JSON object per line"]
    return sum(k in doc for k in MARKS), [k for k in MARKS if k not in doc]


def read(path: Path, data: bytes, source) -> list[ToolRun]:
    runs = []
    lines = [(n, line) for n, line in enumerate(data.decode(errors="replace").splitlines(), 1) if line.strip()]
    if not lines:
        raise checks.refuse(path, "", "empty: bench_serving writes one JSON object per run")
    for idx, (n, line) in enumerate(lines):
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise checks.refuse(path, f"line {n}", f"not valid JSON ({exc})") from None
        runs.append(_run(path, doc, source, idx, f"line {n}"))
    return runs


def _run(path: Path, doc, source, idx: int, at: str) -> ToolRun:
    if not isinstance(doc, dict) or looks_like(doc)[1]:
        raise checks.refuse(path, at, f"not a bench_serving result (lacks {', '.join(looks_like(doc)[1])})")
    f = lambda key: checks.field_of(path, doc, key)  # noqa: E731 -- a field the format requires
    completed = checks.number(path, f"{at}.completed", f("completed"), whole=True)
    duration = checks.number(path, f"{at}.duration", f("duration"))
    run = ToolRun(TOOL, [source], index=idx, completed=completed, duration_s=duration, model=doc.get("model_id"),
                  command=[f"{k}={doc[k]}" for k in SETTINGS if doc.get(k) is not None],
                  concurrency=doc.get("max_concurrency"))
    if str(doc.get("dataset_name", "")).startswith("random") and isinstance(doc.get("random_output_len"), int):
        run.output_len = doc["random_output_len"]  # the most a request asks for (all of it at range ratio 1)
    if "ttfts" in doc:
        _details(path, doc, run)
    else:
        run.summary_reason = "written without --output-details: no per-request ttfts, itls or errors"
    run.throughput = checks.number(path, "request_throughput", f("request_throughput"))
    run.token_throughput = checks.number(path, "output_throughput", f("output_throughput"))
    if duration > 0:
        checks.agree(path, "request_throughput", completed / duration, run.throughput, "completed / duration")
    run.printed = {"completed": completed, "request_throughput_per_s": run.throughput,
                   "output_token_throughput_per_s": run.token_throughput}
    # SGLang's own latency and TPOT are not what its details let LUMA recompute (see above):
    # only TTFT and ITL are checked against its figures.
    for name, kind, check in (("ttft", "ttft", True), ("itl", "itl", True), ("tpot", "tpot", False),
                              ("e2e_latency", "latency", False)):
        figures = checks.summary_ms(path, doc, name, run.samples.get(kind) if check and not run.failed else None)
        if figures:
            run.printed[f"{kind}_ms"] = figures
    return run


def _details(path: Path, doc: dict, run: ToolRun) -> None:
    errors = doc.get("errors")
    if not isinstance(errors, list):
        raise checks.refuse(path, "errors", "expected a list of error texts, one per request")
    n = len(errors)
    failed = [str(e) for e in errors if e]
    if n - len(failed) != run.completed:
        raise checks.refuse(path, "errors", f"{n - len(failed)} requests without an error, but completed is "
                                            f"{run.completed}")
    run.failed, run.errors = len(failed), failed
    ttfts = checks.numbers(path, "ttfts", doc["ttfts"], length=n)
    outs = checks.numbers(path, "output_lens", checks.field_of(path, doc, "output_lens", list), length=n, whole=True)
    ins = checks.numbers(path, "input_lens", checks.field_of(path, doc, "input_lens", list), length=n, whole=True)
    itls = checks.field_of(path, doc, "itls", list)
    if len(itls) != n:
        raise checks.refuse(path, "itls", f"{len(itls)} values, but the file counts {n} requests")
    ok = [i for i, e in enumerate(errors) if not e]
    flat, lat, tpot = [], [], []
    for i in ok:
        gaps = checks.numbers(path, f"itls[{i}]", itls[i])
        flat += gaps
        lat.append(ttfts[i] + sum(gaps))
        if outs[i] > 1:
            tpot.append(sum(gaps) / (outs[i] - 1))
    run.samples.update(ttft=[ttfts[i] for i in ok], itl=flat, latency=lat, tpot=tpot)
    run.input_lens, run.output_lens = [ins[i] for i in ok], [outs[i] for i in ok]
