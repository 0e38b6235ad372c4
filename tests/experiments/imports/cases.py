"""The cases of data/<format>/<case>/: each folder holds a tool's file(s) and case.json (format,
tool, version, command, real, source, files, printed: the figures the tool itself printed)."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"


def folders() -> list[Path]:
    return sorted(p.parent for p in DATA.glob("*/*/case.json"))


def meta(folder: Path) -> dict:
    return json.loads((folder / "case.json").read_text())


#: The file `luma import` is given, by format, first present in the case's files: real cases list
#: their files alphabetically, console text and the tool's companions included.
MAIN = {"aiperf": ("profile_export.jsonl", "profile_export_aiperf.json", "profile_export.json"),
        "vllm-bench": ("result.json",), "sglang-bench": ("result.jsonl", "bench.jsonl"),
        "mlperf-loadgen": ("mlperf_log_summary.txt",), "llama-bench": ("result.json", "bench.json")}


def main_file(folder: Path) -> Path:
    m = meta(folder)
    names = m["files"]
    return folder / next((n for n in MAIN.get(m["format"], ()) if n in names), names[0])
