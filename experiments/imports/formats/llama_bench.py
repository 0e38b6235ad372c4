"""llama.cpp `llama-bench -o json`: a JSON array, one object per test (a prompt-processing test
`n_prompt > 0, n_gen = 0` or a generation test `n_gen > 0`), each with its repetitions.

Defined by ggml-org/llama.cpp `tools/llama-bench/llama-bench.cpp` (`json_printer`,
`test::get_fields`, builds b5000 – b7000): `build_commit`, `build_number`, `cpu_info`,
`gpu_info`, `model_filename`, `model_type`, `n_threads`, `n_batch`, `type_k`, `type_v`,
`n_prompt`, `n_gen`, `avg_ns`, `stddev_ns`, `avg_ts`, `stddev_ts`, `samples_ns`, `samples_ts`.

What its samples support, honestly: each repetition of a generation test is one measured
decode of `n_gen` tokens, so it gives one TPOT sample (samples_ns / n_gen, s per token) and one
token-throughput sample (samples_ts); a prompt test gives one prompt time per repetition (its
TTFT without network or queueing). No request ever waits on another: latency percentiles of a
served load are not in the file. A handful of repetitions makes a percentile clause
INCONCLUSIVE by the request-count rule (p90 needs 29 samples) — that is the honest outcome.
llama-bench's own figures are the mean and standard deviation of the repetitions.
"""

from __future__ import annotations

from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "llama-bench"
MARKS = ("n_prompt", "n_gen", "avg_ns", "samples_ns", "build_commit")


def looks_like(doc) -> tuple[int, list[str]]:
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], dict):
        return 0, ["a JSON array of test objects"]
    return sum(k in doc[0] for k in MARKS), [k for k in MARKS if k not in doc[0]]


def read(path: Path, data: bytes, source) -> list[ToolRun]:
    """One run per file: its generation tests give TPOT and token throughput, its prompt tests
    TTFT (a file with several generation tests, e.g. several thread counts, is refused: one
    file is one state)."""
    doc = checks.load_json(path, data)
    if looks_like(doc)[1]:
        raise checks.refuse(path, "", f"not a llama-bench JSON array (lacks {', '.join(looks_like(doc)[1])})")
    gen = [(i, t) for i, t in enumerate(doc) if isinstance(t, dict) and t.get("n_gen", 0) > 0]
    prompt = [(i, t) for i, t in enumerate(doc) if isinstance(t, dict) and t.get("n_prompt", 0) > 0
              and t.get("n_gen", 0) == 0]
    if len(gen) > 1 or len(prompt) > 1:
        raise checks.refuse(path, "", f"{len(gen)} generation and {len(prompt)} prompt tests: one file is one "
                                      "state (run llama-bench once per setting, or split the array)")
    first = doc[0]
    run = ToolRun(TOOL, [source], version=f"build {first.get('build_number')} ({first.get('build_commit')})",
                  model=first.get("model_filename") or first.get("model_type"),
                  command=[f"{k}={first[k]}" for k in ("n_threads", "n_batch", "n_ubatch", "type_k", "type_v",
                                                       "n_gpu_layers", "flash_attn", "cpu_info", "gpu_info")
                           if k in first],
                  percentile_definition="mean and standard deviation of repetitions (no percentiles)")
    for i, t in gen:
        ns = checks.numbers(path, f"[{i}].samples_ns", checks.field_of(path, t, "samples_ns", list))
        ts = checks.numbers(path, f"[{i}].samples_ts", checks.field_of(path, t, "samples_ts", list), length=len(ns))
        n_gen = t["n_gen"]
        run.output_len, run.concurrency = int(n_gen), 1  # one stream of n_gen tokens
        for k, (a, b) in enumerate(zip(ns, ts)):
            if a > 0:
                checks.agree(path, f"[{i}].samples_ts[{k}]", 1e9 * n_gen / a, b, f"n_gen / samples_ns[{k}]",
                             rounding=1e-5 * b)  # llama-bench writes samples_ts to 6 digits
        checks.agree(path, f"[{i}].avg_ns", checks.mean(ns), checks.field_of(path, t, "avg_ns"), "mean(samples_ns)",
                     rounding=1.0)
        run.samples["tpot"] = [a * 1e-9 / n_gen for a in ns]
        run.completed = len(ns)
        run.token_throughput = checks.mean(ts)
        run.duration_s = sum(ns) * 1e-9
        run.printed["tpot_ms"] = {"mean": t["avg_ns"] / n_gen / 1e6}
        run.printed["output_token_throughput_per_s"] = checks.number(path, f"[{i}].avg_ts", t.get("avg_ts"))
    for i, t in prompt:
        ns = checks.numbers(path, f"[{i}].samples_ns", checks.field_of(path, t, "samples_ns", list))
        run.samples["ttft"] = [a * 1e-9 for a in ns]
        run.printed["ttft_ms"] = {"mean": checks.number(path, f"[{i}].avg_ns", t.get("avg_ns")) / 1e6}
        run.completed = run.completed or len(ns)
    run.printed["completed"] = run.completed
    return [run]
