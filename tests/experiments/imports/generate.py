"""Writes the synthetic cases of data/<format>/<case>/ (real: false): seeded request timings
laid out as each tool's own source writes its file, with the tool's own summary figures computed
by its own definition (numpy.percentile; LoadGen's sorted[floor(n q)]). Run once:
`python tests/experiments/imports/generate.py`; the files are committed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"


def timings(n: int, seed: int, out_len: int = 32, ttft_ms: float = 120.0, gap_ms: float = 8.0):
    """Per request: ttft (s), itl gaps (s), latency (s), output length."""
    rng = np.random.default_rng(seed)
    reqs = []
    for _ in range(n):
        ttft = float(rng.lognormal(np.log(ttft_ms / 1000), 0.25))
        gaps = [float(g) for g in rng.lognormal(np.log(gap_ms / 1000), 0.2, out_len - 1)]
        reqs.append({"ttft": ttft, "itl": gaps, "latency": ttft + sum(gaps) + 0.0004, "out": out_len,
                     "in": int(rng.integers(90, 110))})
    return reqs


def stats_ms(values, percentiles=(50, 90, 99)):
    return {"mean": float(np.mean(values) * 1000), "median": float(np.median(values) * 1000),
            **{f"p{p}": float(np.percentile(values, p) * 1000) for p in percentiles}}


def case(fmt: str, name: str, files: dict, meta: dict) -> None:
    folder = DATA / fmt / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for fname, content in files.items():
        (folder / fname).write_text(content if isinstance(content, str) else json.dumps(content))
    (folder / "case.json").write_text(json.dumps({"format": fmt, "real": False, "files": list(files), **meta},
                                                 indent=1) + "\n")


def vllm(name: str, n=60, seed=1, detailed=True, failed=0):
    reqs = timings(n, seed)
    errors = [""] * n
    for i in range(failed):
        errors[i] = "ClientResponseError: 500, message='Internal Server Error'"
    ok = [r for r, e in zip(reqs, errors) if not e]
    ttfts, lats = [r["ttft"] for r in ok], [r["latency"] for r in ok]
    tpots = [(r["latency"] - r["ttft"]) / (r["out"] - 1) for r in ok]
    itls = [g for r in ok for g in r["itl"]]
    dur = sum(lats) + 0.05
    outs = [r["out"] if not e else 0 for r, e in zip(reqs, errors)]
    doc = {"date": "20270105-101500", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": None,
           "model_id": "luma-tinyllama-2l", "tokenizer_id": "luma-tinyllama-2l", "num_prompts": n,
           "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 1, "duration": dur, "completed": len(ok),
           "failed": failed, "total_input_tokens": sum(r["in"] for r in ok), "total_output_tokens": sum(outs),
           "request_throughput": len(ok) / dur, "request_goodput": None, "output_throughput": sum(outs) / dur,
           "total_token_throughput": (sum(r["in"] for r in ok) + sum(outs)) / dur,
           "input_lens": [r["in"] for r in reqs], "output_lens": outs, "ttfts": [r["ttft"] if not e else 0.0
                                                                                 for r, e in zip(reqs, errors)],
           "itls": [r["itl"] if not e else [] for r, e in zip(reqs, errors)],
           "latencies": [r["latency"] if not e else 0.0 for r, e in zip(reqs, errors)],
           "generated_texts": ["x" * 10] * n, "errors": errors}
    printed = {}
    for key, vals, kind in (("ttft", ttfts, "ttft"), ("tpot", tpots, "tpot"), ("itl", itls, "itl"),
                            ("e2el", lats, "latency")):
        s = stats_ms(vals)
        for stat, v in s.items():
            doc[f"{stat}_{key}_ms"] = v
        doc[f"std_{key}_ms"] = float(np.std(vals) * 1000)
        printed[f"{kind}_ms"] = {k if k != "median" else "p50": v for k, v in s.items() if k != "median"} | {
            "p50": s["median"]}
    if not detailed:
        for k in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
            del doc[k]
    printed.update(request_throughput_per_s=doc["request_throughput"],
                   output_token_throughput_per_s=doc["output_throughput"], completed=len(ok))
    case("vllm-bench", name, {"result.json": doc},
         {"tool": "vllm bench serve", "version": "0.32.0",
          "command": ["vllm", "bench", "serve", "--model", "luma-tinyllama-2l", "--num-prompts", str(n),
                      "--max-concurrency", "1", "--percentile-metrics", "ttft,tpot,itl,e2el",
                      "--metric-percentiles", "50,90,99", "--save-result"] + (["--save-detailed"] if detailed else []),
          "source": "vllm/benchmarks/serve.py (vLLM 0.32.0): benchmark() and process_one_metric",
          "printed": printed})


def aiperf(name: str, n=60, seed=2):
    reqs = timings(n, seed)
    lines, t = [], 1_700_000_000_000_000_000
    for i, r in enumerate(reqs):
        start = t + i * 10**9
        tpot = (r["latency"] - r["ttft"]) / (r["out"] - 1)
        lines.append(json.dumps({"metadata": {"session_num": i, "request_start_ns": start,
                                              "request_end_ns": start + int(r["latency"] * 1e9), "worker_id": "w0"},
                                 "metrics": {"time_to_first_token": {"value": r["ttft"] * 1e3, "unit": "ms"},
                                             "request_latency": {"value": r["latency"] * 1e3, "unit": "ms"},
                                             "inter_token_latency": {"value": tpot * 1e3, "unit": "ms"},
                                             "inter_chunk_latency": {"value": [g * 1e3 for g in r["itl"]], "unit": "ms"},
                                             "output_sequence_length": {"value": r["out"], "unit": "tokens"},
                                             "input_sequence_length": {"value": r["in"], "unit": "tokens"}},
                                 "error": None}))
    summary = {"schema_version": "1.1", "aiperf_version": "0.13.0", "input_config": {"cli_command":
               "aiperf profile --model luma-tinyllama-2l --concurrency 1 --request-count 60 --export-level records"},
               "request_count": {"unit": "requests", "avg": float(n)},
               "request_throughput": {"unit": "requests/sec", "avg": n / 70.0},
               "output_token_throughput": {"unit": "tokens/sec", "avg": n * 32 / 70.0},
               "benchmark_duration": {"unit": "sec", "avg": 70.0}}
    printed = {"completed": n, "request_throughput_per_s": n / 70.0, "output_token_throughput_per_s": n * 32 / 70.0}
    for tag, kind, vals in (("time_to_first_token", "ttft", [r["ttft"] for r in reqs]),
                            ("request_latency", "latency", [r["latency"] for r in reqs]),
                            ("inter_token_latency", "tpot", [(r["latency"] - r["ttft"]) / (r["out"] - 1) for r in reqs])):
        ms = [v * 1e3 for v in vals]
        block = {"unit": "ms", "avg": float(np.mean(ms)), **{f"p{p}": float(np.percentile(ms, p))
                                                             for p in (1, 5, 10, 25, 50, 75, 90, 95, 99)}}
        summary[tag] = block
        printed[f"{kind}_ms"] = {"mean": block["avg"], "p50": block["p50"], "p90": block["p90"], "p99": block["p99"]}
    case("aiperf", name, {"profile_export.jsonl": "\n".join(lines) + "\n", "profile_export_aiperf.json": summary},
         {"tool": "aiperf", "version": "0.13.0", "command": summary["input_config"]["cli_command"].split(),
          "source": "aiperf 0.13.0: post_processors/record_export_jsonl_writer.py, exporters/metrics_json_exporter.py",
          "printed": printed})


def sglang(name: str, n=60, seed=3):
    reqs = timings(n, seed)
    ttfts, itls = [r["ttft"] for r in reqs], [g for r in reqs for g in r["itl"]]
    dur = sum(r["latency"] for r in reqs) + 0.05
    doc = {"tag": None, "backend": "sglang-oai", "dataset_name": "random", "request_rate": "inf", "max_concurrency": 1,
           "random_input_len": 100, "random_output_len": 32, "duration": dur, "completed": n,
           "total_input_tokens": sum(r["in"] for r in reqs), "total_output_tokens": 32 * n,
           "request_throughput": n / dur, "input_throughput": sum(r["in"] for r in reqs) / dur,
           "output_throughput": 32 * n / dur}
    for key, vals in (("ttft", ttfts), ("itl", itls), ("e2e_latency", [r["latency"] for r in reqs]),
                      ("tpot", [(r["latency"] - r["ttft"]) / 31 for r in reqs])):
        doc.update({f"mean_{key}_ms": float(np.mean(vals) * 1e3), f"median_{key}_ms": float(np.median(vals) * 1e3),
                    f"std_{key}_ms": float(np.std(vals) * 1e3), f"p99_{key}_ms": float(np.percentile(vals, 99) * 1e3)})
    doc["p95_itl_ms"] = float(np.percentile(itls, 95) * 1e3)
    doc.update(input_lens=[r["in"] for r in reqs], output_lens=[32] * n, ttfts=ttfts, itls=[r["itl"] for r in reqs],
               generated_texts=["x"] * n, errors=[""] * n)
    printed = {"completed": n, "request_throughput_per_s": doc["request_throughput"],
               "output_token_throughput_per_s": doc["output_throughput"],
               "ttft_ms": {"mean": doc["mean_ttft_ms"], "p50": doc["median_ttft_ms"], "p99": doc["p99_ttft_ms"]},
               "itl_ms": {"mean": doc["mean_itl_ms"], "p50": doc["median_itl_ms"], "p99": doc["p99_itl_ms"]}}
    case("sglang-bench", name, {"bench.jsonl": json.dumps(doc) + "\n"},
         {"tool": "sglang bench_serving", "version": "0.5.4",
          "command": ["python", "-m", "sglang.bench_serving", "--backend", "sglang-oai", "--dataset-name", "random",
                      "--num-prompts", str(n), "--max-concurrency", "1", "--output-file", "bench.jsonl",
                      "--output-details"],
          "source": "sgl-project/sglang python/sglang/bench_serving.py (benchmark(): result, output_details)",
          "printed": printed})


def loadgen(name: str, n=400, seed=4, trace=True):
    rng = np.random.default_rng(seed)
    lat = sorted(int(x) for x in rng.lognormal(np.log(50e6), 0.3, n))
    order = [int(x) for x in rng.permutation(lat)]
    pct = {q: lat[int(n * q)] for q in (0.5, 0.9, 0.95, 0.97, 0.99, 0.999)}
    lines = ["================================================", "MLPerf Results Summary",
             "================================================", "SUT name : PySUT", "Scenario : SingleStream",
             "Mode     : PerformanceOnly", f"90.0th percentile latency (ns) : {pct[0.9]}", "Result is : VALID",
             "  Min duration satisfied : Yes", "  Min queries satisfied : Yes", "  Early stopping satisfied: Yes",
             "", "================================================", "Additional Stats",
             "================================================", f"QPS w/ loadgen overhead         : {n / 21.0:.2f}",
             f"QPS w/o loadgen overhead        : {1e9 / np.mean(lat):.2f}", "",
             f"Min latency (ns)                : {lat[0]}", f"Max latency (ns)                : {lat[-1]}",
             f"Mean latency (ns)               : {sum(lat) // n}"]
    lines += [f"{q * 100:.2f} percentile latency (ns)   : {v}" for q, v in pct.items()]
    detail = "\n".join(":::MLLOG " + json.dumps({"key": k, "value": v, "time_ms": 0.0, "namespace": "mlperf::logging",
                                                 "event_type": "POINT_IN_TIME", "metadata": {}})
                       for k, v in (("loadgen_version", "6.0.17 @ b66003e10e"), ("effective_scenario", "SingleStream"),
                                    ("effective_target_latency_ns", 100000000), ("result_validity", "VALID")))
    files = {"mlperf_log_summary.txt": "\n".join(lines) + "\n", "mlperf_log_detail.txt": detail + "\n"}
    if trace:
        events = [{"name": "Sample", "cat": "default", "ph": "b", "pid": 1, "id": i, "ts": i * 60000.0,
                   "args": {"sample_seq": i, "query_seq": i, "sample_idx": i % 10, "issue_start_ns": 1200,
                            "complete_ns": v}} for i, v in enumerate(order)]
        files["mlperf_log_trace.json"] = json.dumps({"traceEvents": events + [{"name": "LastTrace"}],
                                                    "displayTimeUnit": "ns", "otherData": {"version": "MLPerf LoadGen v1.0"}})
    printed = {"latency_ms": {"mean": (sum(lat) // n) / 1e6, "p50": pct[0.5] / 1e6, "p90": pct[0.9] / 1e6,
                              "p99": pct[0.99] / 1e6}, **({"completed": n} if trace else {})}
    case("mlperf-loadgen", name, files,
         {"tool": "mlcommons-loadgen", "version": "6.0.17", "command": ["python", "sut.py", "--scenario", "SingleStream"],
          "source": "mlcommons/inference loadgen/results.cc, loadgen.cc (TraceSample), logging.h (ChromeTracer)",
          "printed": printed})


def llama_bench(name: str, seed=5, reps=5):
    rng = np.random.default_rng(seed)
    base = {"build_commit": "b7e2a1f", "build_number": 6500, "cpu_info": "AMD EPYC", "gpu_info": "",
            "backends": "CPU", "model_filename": "luma-tinyllama-2l-f16.gguf", "model_type": "llama ?B F16",
            "n_batch": 2048, "n_ubatch": 512, "n_threads": 2, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 0,
            "flash_attn": False, "repetitions": reps}
    tests = []
    for n_prompt, n_gen in ((128, 0), (0, 64)):
        ns = [int(x) for x in rng.normal(0.2e9 if n_gen else 0.05e9, 0.005e9, reps)]
        tokens = n_gen or n_prompt
        ts = [1e9 * tokens / x for x in ns]
        tests.append({**base, "n_prompt": n_prompt, "n_gen": n_gen, "test_time": "2027-01-05T10:15:00Z",
                      "avg_ns": int(np.mean(ns)), "stddev_ns": int(np.std(ns, ddof=1)), "avg_ts": float(np.mean(ts)),
                      "stddev_ts": float(np.std(ts, ddof=1)), "samples_ns": ns, "samples_ts": ts})
    printed = {"tpot_ms": {"mean": tests[1]["avg_ns"] / 64 / 1e6}, "ttft_ms": {"mean": tests[0]["avg_ns"] / 1e6},
               "output_token_throughput_per_s": tests[1]["avg_ts"], "completed": reps}
    case("llama-bench", name, {"bench.json": tests},
         {"tool": "llama-bench", "version": "b6500",
          "command": ["llama-bench", "-m", "luma-tinyllama-2l-f16.gguf", "-p", "128", "-n", "64", "-t", "2",
                      "-r", str(reps), "-o", "json"],
          "source": "ggml-org/llama.cpp tools/llama-bench/llama-bench.cpp (json_printer, test::get_fields)",
          "printed": printed})


def genai_perf(name: str, n=40, seed=6):
    reqs = timings(n, seed)
    t0, rows = 1_700_000_000_000_000_000, []
    for i, r in enumerate(reqs):
        start = t0 + i * 10**9
        times, t = [start + int(r["ttft"] * 1e9)], start + int(r["ttft"] * 1e9)
        for g in r["itl"]:
            t += int(g * 1e9)
            times.append(t)
        rows.append({"timestamp": start, "request_inputs": {"payload": "{}"}, "response_timestamps": times,
                     "response_outputs": [{"response": "data: {}"}] * len(times)})
    ttft = [(x["response_timestamps"][0] - x["timestamp"]) * 1e-6 for x in rows]
    lat = [(x["response_timestamps"][-1] - x["timestamp"]) * 1e-6 for x in rows]
    summary = {tag: {"unit": "ms", "avg": float(np.mean(v)), **{f"p{p}": float(np.percentile(v, p))
                                                                 for p in (25, 50, 75, 90, 95, 99)}}
               for tag, v in (("time_to_first_token", ttft), ("request_latency", lat))}
    case("aiperf", name, {"profile_export.json": {"experiments": [{"experiment": {"mode": "concurrency", "value": 1},
                                                                   "requests": rows}], "version": "0.0.16"},
                          "profile_export_genai_perf.json": summary},
         {"tool": "genai-perf", "version": "0.0.16",
          "command": ["genai-perf", "profile", "-m", "luma-tinyllama-2l", "--streaming", "--concurrency", "1"],
          "source": "triton-inference-server/perf_analyzer genai-perf/genai_perf/profile_data_parser/"
                    "llm_profile_data_parser.py", "printed": {
              "ttft_ms": {k if k != "avg" else "mean": v for k, v in summary["time_to_first_token"].items() if k != "unit"},
              "latency_ms": {k if k != "avg" else "mean": v for k, v in summary["request_latency"].items() if k != "unit"},
              "completed": n}})


if __name__ == "__main__":
    vllm("synthetic-detailed")
    vllm("synthetic-summary-only", seed=11, detailed=False)
    vllm("synthetic-failed", seed=12, failed=2)
    aiperf("synthetic-records")
    genai_perf("synthetic-genai-perf")
    sglang("synthetic-details")
    loadgen("synthetic-trace")
    loadgen("synthetic-summary-only", seed=14, trace=False)
    llama_bench("synthetic-5-reps")
