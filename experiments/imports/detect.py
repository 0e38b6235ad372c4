"""Which format a tool's file is, by its structure (never its name); for a file in none of them,
one line saying which format it looked most like and what it lacked."""

from __future__ import annotations

import json

from luma.experiments.imports.formats import aiperf, genai_perf, llama_bench, mlperf_loadgen, sglang_bench, vllm_bench


def _parsed(data: bytes):
    """(whole document or None, first JSONL object or None, text)."""
    text = data.decode(errors="replace")
    try:
        return json.loads(text), None, text
    except ValueError:
        pass
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        return None, json.loads(first), text
    except ValueError:
        return None, None, text


def scores(data: bytes) -> list[tuple[str, int, list[str]]]:
    """(format, marks found, marks lacking) of every format, best first."""
    doc, line, text = _parsed(data)
    rows = [("vllm-bench", *vllm_bench.looks_like(doc)),
            ("aiperf", *max(aiperf.looks_like_summary(doc), aiperf.looks_like_records(line),
                            genai_perf.looks_like(doc), key=lambda r: r[0])),
            ("sglang-bench", *sglang_bench.looks_like(line if doc is None else doc)),
            ("mlperf-loadgen", *mlperf_loadgen.looks_like(text)),
            ("llama-bench", *llama_bench.looks_like(doc))]
    return sorted(rows, key=lambda r: (-r[1], len(r[2])))


def detect(data: bytes) -> str | None:
    """The format whose marks `data` has all of, else None."""
    best = scores(data)[0]
    return best[0] if best[1] and not best[2] else None


def mismatch(data: bytes, wanted: str) -> str | None:
    """None when `data` has every mark of format `wanted`, else one line: what it looked like most
    and what it lacked."""
    rows = {name: (n, lacks) for name, n, lacks in scores(data)}
    if not rows[wanted][1]:
        return None
    best, n, lacks = scores(data)[0]
    if n == 0:
        return f"not a {wanted} file, nor any format luma import reads (lacks {', '.join(rows[wanted][1])})"
    if best != wanted and not lacks:
        return f"not a {wanted} file: it is a {best} file (`luma import {best}`)"
    target, miss = (best, lacks) if best != wanted else (wanted, rows[wanted][1])
    return f"not a {wanted} file: it looked most like {target} but lacks {', '.join(miss)}"
