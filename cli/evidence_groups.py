"""The command groups that bring evidence in from outside this project's own sprints: `luma import`
(other tools' result files, published MLPerf results), `luma chain` (chains assembled from trial
records), `luma record` (records written by hand) and `luma evidence` (the evidence set shipped with
LUMA). Per command: where it lives and its one-line help, so that `luma GROUP --help` imports no
command module (cli/lazy.py; tests/cli/test_lazy.py keeps each entry equal to its command). Kept
apart from cli/groups.py, which the other groups fill to the size limit of a CLI module."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup

chain = LazyGroup("chain", help=(
    "PEX chains assembled from trial records already in the ledger (imported or measured)."), lazy={
    "assemble": ("luma.cli.chain:assemble_cmd",
        "Build a pex-chain from pex-trial records in the ledger (imported or measured)."),
})

evidence = LazyGroup("evidence", help=(
    "The evidence set shipped with LUMA: signed measured records from every machine the project's own sprints "
    "ran on."), lazy={
    "list": ("luma.cli.evidence:list_cmd", "Machines and contracts of the shipped evidence set."),
    "load": ("luma.cli.evidence:load_cmd", "Load the shipped evidence set, each machine's key trusted for its records only."),
    "record": ("luma.cli.evidence:record_cmd", "Run the shipped contracts here and add this machine to an evidence folder."),
    "verify": ("luma.cli.evidence:verify_cmd", "Check the evidence set's signatures, hashes and manifest; one line per problem."),
})

importer = LazyGroup("import", help=(
    "Import what other tools measured: serving benchmarks' result files as trials, published MLPerf results as "
    "third-party evidence."), lazy={
    "aiperf": ("luma.cli.imports:aiperf_cmd",
        "Import NVIDIA AIPerf / GenAI-Perf results as pex-trial records judged by LUMA."),
    "llama-bench": ("luma.cli.imports:llama_bench_cmd",
        "Import llama.cpp `llama-bench` results as pex-trial records judged by LUMA."),
    "mlperf-loadgen": ("luma.cli.imports:mlperf_loadgen_cmd",
        "Import MLPerf LoadGen results as pex-trial records judged by LUMA."),
    "mlperf-results": ("luma.cli.import_mlperf:mlperf_cmd",
        "Read an MLPerf Inference results checkout: each system becomes a machine record, each valid result a "
        "vendor-claim trial, PASS at the system's state against the benchmark's latency bounds."),
    "sglang-bench": ("luma.cli.imports:sglang_bench_cmd",
        "Import SGLang `bench_serving` results as pex-trial records judged by LUMA."),
    "vllm-bench": ("luma.cli.imports:vllm_bench_cmd",
        "Import vLLM `vllm bench serve` results as pex-trial records judged by LUMA."),
})

record = LazyGroup("record", help=(
    "Write records by hand: complete, commented skeletons of each record kind."), lazy={
    "template": ("luma.cli.record:template_cmd", "Print a complete, valid, commented skeleton of a KIND record."),
})
