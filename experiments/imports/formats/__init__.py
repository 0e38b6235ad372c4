"""The result-file formats `luma import` reads, by name: each module parses one tool's files into
`ToolRun`s and names the tool version it was checked against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from luma.experiments.imports.formats import aiperf, genai_perf, llama_bench, mlperf_loadgen, sglang_bench, vllm_bench


@dataclass(frozen=True)
class Format:
    """One importable format: its reader (path, bytes, SourceFile, read_file) -> [ToolRun]."""

    name: str
    tool: str
    read: Callable
    #: What a FILE argument names (the CLI's help and the docs).
    file: str


def _aiperf(path, data, source, read_file):
    text = data[:4096].lstrip()
    if path.suffix == ".json" and text.startswith(b"{") and b'"experiments"' in data[:1 << 16]:
        return genai_perf.read(path, data, source, read_file)  # GenAI-Perf, which AIPerf replaced
    return aiperf.read(path, data, source, read_file)


FORMATS = {
    "vllm-bench": Format("vllm-bench", vllm_bench.TOOL, lambda p, d, s, r: vllm_bench.read(p, d, s),
                         "the --save-result JSON"),
    "aiperf": Format("aiperf", aiperf.TOOL, _aiperf,
                     "profile_export.jsonl (summary beside it), profile_export_aiperf.json, or GenAI-Perf's "
                     "profile_export.json"),
    "sglang-bench": Format("sglang-bench", sglang_bench.TOOL, lambda p, d, s, r: sglang_bench.read(p, d, s),
                           "the --output-file JSONL (one run per line)"),
    "mlperf-loadgen": Format("mlperf-loadgen", mlperf_loadgen.TOOL, mlperf_loadgen.read,
                             "mlperf_log_summary.txt (detail, trace and accuracy logs beside it)"),
    "llama-bench": Format("llama-bench", llama_bench.TOOL, lambda p, d, s, r: llama_bench.read(p, d, s),
                          "the -o json array"),
}
