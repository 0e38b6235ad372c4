"""Write a real-file case's `case.json`: what produced the files, and the figures the tool itself
printed (read from the console text it left in `console.txt`, or loadgen's own summary and detail logs,
so a test can compare an import's percentiles with the tool's own). A figure the tool did not
print is absent, and latencies are in ms, throughputs per second.

    python case_json.py CASE_DIR FORMAT TOOL VERSION SECONDS ARGV_JSON
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from pathlib import Path

HOST = "AMD EPYC, AVX2, 2 vCPUs (shared)"
SERVER = ("llama.cpp server (llama-cpp-python 0.3.36), tinyllama f16 (LUMA's 2-layer Llama trained here, "
          "GGUF by llama.cpp's converter), --n_threads 1 --n_ctx 1024 --flash_attn true, pinned to core 0 "
          "(taskset -c 0), 127.0.0.1")
IN_PROCESS = ("none: llama-bench runs llama.cpp in-process (the llama.cpp vendored in the llama-cpp-python 0.3.36 "
              "sdist, commit 0c1e570, built here: Release, GGML_NATIVE=ON), tinyllama f16 GGUF, -t 1, pinned to core 0")
NUM = r"(-?[\d,]+(?:\.\d+)?|N/A)"


def num(text: str) -> float | None:
    return None if text == "N/A" else float(text.replace(",", ""))


def aiperf(console: str) -> dict:
    """AIPerf's 'LLM Metrics' table: avg, min, max, p99, p90, p50, std per row."""
    table = console[console.rindex("NVIDIA AIPerf | LLM Metrics\n") if "NVIDIA AIPerf | LLM Metrics\n" in console
                    else console.rindex("LLM Metrics"):]

    def row(label: str) -> dict:
        m = re.search(r"│\s*" + re.escape(label) + r"\s*│" + r"\s*│".join([r"\s*" + NUM] * 7), table)
        if not m:
            return {}
        avg, _mn, _mx, p99, p90, p50, _sd = (num(g) for g in m.groups())
        return {"p50": p50, "p90": p90, "p99": p99, "mean": avg}

    return {"ttft_ms": row("Time to First Token (ms)"), "tpot_ms": row("Inter Token Latency (ms)"),
            "itl_ms": None, "latency_ms": row("Request Latency (ms)"),
            "request_throughput_per_s": row("Request Throughput (requests/sec)").get("mean"),
            "output_token_throughput_per_s": row("Output Token Throughput (tokens/sec)").get("mean"),
            "completed": row("Request Count (requests)").get("mean")}


def serving(console: str) -> dict:
    """vLLM's `bench serve` / SGLang's bench_serving result block: 'Mean TTFT (ms): x' lines."""
    def val(label: str) -> float | None:
        m = re.search(r"^" + re.escape(label) + r":?\s+" + NUM + r"\s*$", console, re.M)
        return num(m.group(1)) if m else None

    def stat(name: str, long: str | None = None) -> dict:
        out = {}
        for key, label in (("p50", "Median"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99"), ("mean", "Mean")):
            v = val(f"{label} {name} (ms)")
            if v is None and long:
                v = val(f"{label} {long} (ms)")
            if v is not None:
                out[key] = v
        return out or None

    completed = val("Successful requests")
    return {"ttft_ms": stat("TTFT"), "tpot_ms": stat("TPOT"), "itl_ms": stat("ITL"),
            "latency_ms": stat("E2EL", "E2E Latency"),
            "request_throughput_per_s": val("Request throughput (req/s)"),
            "output_token_throughput_per_s": val("Output token throughput (tok/s)"),
            "completed": completed}


def mlperf(console: str, case: Path) -> dict:
    """Loadgen's own mlperf_log_summary.txt (its console copy): latencies in ns, shown here in ms."""
    text = (case / "mlperf_log_summary.txt").read_text()

    def val(label: str) -> float | None:
        m = re.search(r"^" + re.escape(label) + r"\s*:\s*" + NUM + r"\s*$", text, re.M)
        return num(m.group(1)) if m else None

    def stat(percentile: str, mean: str) -> dict | None:
        out = {}
        for key, pct in (("p50", "50.00"), ("p90", "90.00"), ("p95", "95.00"), ("p99", "99.00")):
            v = val(f"{pct} percentile {percentile} (ns)")
            if v is not None:
                out[key] = v / 1e6
        m = val(f"Mean {mean} (ns)")
        if m is not None:
            out["mean"] = m / 1e6
        return out or None

    result = re.search(r"^Result is\s*:\s*(\S+)", text, re.M)
    detail = (case / "mlperf_log_detail.txt").read_text()

    def key(name: str) -> int | None:
        m = re.search(r'"key": "' + name + r'", "value": (\d+)', detail)
        return int(m.group(1)) if m else None

    queries, per_query = key("result_query_count"), key("effective_samples_per_query")
    return {"ttft_ms": stat("first token latency", "First Token latency"),
            "tpot_ms": stat("time to output token", "Time per Output Token"), "itl_ms": None,
            "latency_ms": stat("latency", "latency"),
            "request_throughput_per_s": val("Completed samples per second") or val("Samples per second"),
            "output_token_throughput_per_s": val("Completed tokens per second") or val("Tokens per second"),
            "completed": queries * per_query if queries and per_query else None, "scenario": re.search(r"^Scenario\s*:\s*(\S+)", text, re.M).group(1),
            "result": result.group(1) if result else None}


def llama_bench(console: str) -> dict:
    """llama-bench's markdown table on the console: one row per test, 't/s' as 'mean ± std'."""
    tests = {}
    for m in re.finditer(r"^\|.*\|\s*(pp\d+|tg\d+|pp\d+\+tg\d+)\s*\|\s*([\d.]+) ± ([\d.]+)\s*\|\s*$", console, re.M):
        tests[m.group(1)] = {"tokens_per_s_mean": float(m.group(2)), "tokens_per_s_std": float(m.group(3))}
    return {"tests": tests}


def main(argv: list[str]) -> int:
    case, fmt, tool, version, seconds, argv_json = argv
    case = Path(case)
    console = (case / "console.txt").read_text()
    printed = {"aiperf": aiperf, "vllm-bench": serving, "sglang-bench": serving,
               "llama-bench": llama_bench}.get(fmt)
    printed = printed(console) if printed else mlperf(console, case)
    # a figure the tool did not print is left out, not written as null
    printed = {k: v for k, v in printed.items() if v is not None}
    files = sorted(p.name for p in case.iterdir() if p.name != "case.json")
    doc = {"format": fmt, "tool": tool, "version": version, "command": json.loads(argv_json), "real": True,
           "produced": datetime.date.today().isoformat(), "host": HOST, "server": IN_PROCESS if fmt == "llama-bench" else SERVER,
           "files": files, "seconds": float(seconds), "printed": printed}
    (case / "case.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
