"""The `luma import` group: one command per outside format (cli/imports.py) and, per command,
where it lives and its one-line help, so that `luma import --help` imports no parser (cli/lazy.py;
tests/cli/test_lazy.py keeps each entry equal to its command). Kept out of cli/groups.py, which
the other groups fill to its size limit."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup

importer = LazyGroup("import", help=(
    "Import what other tools measured: serving benchmarks' result files as trials, published MLPerf results as "
    "third-party evidence."), lazy={
    "aiperf": ("luma.cli.imports:aiperf_cmd",
        "Import NVIDIA AIPerf / GenAI-Perf results as pex-trial records judged by LUMA."),
    "llama-bench": ("luma.cli.imports:llama_bench_cmd",
        "Import llama.cpp `llama-bench` results as pex-trial records judged by LUMA."),
    "mlperf-results": ("luma.cli.import_mlperf:mlperf_cmd",
        "Read an MLPerf Inference results checkout: each system becomes a machine record, each valid result a "
        "vendor-claim trial, PASS at the system's state against the benchmark's latency bounds."),
    "mlperf-loadgen": ("luma.cli.imports:mlperf_loadgen_cmd",
        "Import MLPerf LoadGen results as pex-trial records judged by LUMA."),
    "sglang-bench": ("luma.cli.imports:sglang_bench_cmd",
        "Import SGLang `bench_serving` results as pex-trial records judged by LUMA."),
    "vllm-bench": ("luma.cli.imports:vllm_bench_cmd",
        "Import vLLM `vllm bench serve` results as pex-trial records judged by LUMA."),
})
