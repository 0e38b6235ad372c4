"""NVIDIA AIPerf: the per-request export `profile_export.jsonl` (`--export-level records`) and
the summary `profile_export_aiperf.json` beside it.

Checked against AIPerf 0.13.0: `aiperf/post_processors/record_export_jsonl_writer.py` writes one
`MetricRecordInfo` per line (`metadata`, `metrics` {tag: {value, unit}} in display units,
`error` only when the request failed: the writer dumps with exclude_none; warm-up requests are
records too, `metadata.benchmark_phase` "warmup", which the summary leaves out and so does LUMA);
`aiperf/exporters/metrics_json_exporter.py` writes the
summary (`aiperf_version`, `input_config`, and per metric tag {unit, avg, p1 … p99, min, max,
std}); `aiperf/metrics/metric_dicts.py` `metric_result_from_array` computes its percentiles by
linear interpolation between order statistics. AIPerf's `inter_token_latency` of a request is
(request_latency − ttft) / (output_sequence_length − 1): LUMA's TPOT; `inter_chunk_latency` is the
list of gaps between streamed chunks (ITL). A summary without the JSONL is summary only.
"""

from __future__ import annotations

import json
from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "aiperf"
SUMMARY = "profile_export_aiperf.json"
_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
#: AIPerf tag -> LUMA sample kind (per request; inter_chunk_latency is a list per request).
TAGS = {"time_to_first_token": "ttft", "request_latency": "latency", "inter_token_latency": "tpot"}


def looks_like_summary(doc) -> tuple[int, list[str]]:
    marks = ("aiperf_version", "request_latency", "request_throughput", "request_count")
    if not isinstance(doc, dict):
        return 0, ["a JSON object"]
    return sum(k in doc for k in marks), [k for k in marks if k not in doc]


def looks_like_records(first) -> tuple[int, list[str]]:
    marks = ("metadata", "metrics")
    if not isinstance(first, dict):
        return 0, ["one JSON object per line"]
    return sum(k in first for k in marks), [k for k in marks if k not in first]


def read(path: Path, data: bytes, source, read_file) -> list[ToolRun]:
    """One run from the JSONL `path` (its summary read beside it with `read_file`), or from a
    summary file alone (summary only)."""
    run = ToolRun(TOOL, [source], percentile_definition="linear interpolation between order statistics "
                  "(AIPerf metric_result_from_array)")
    path_jsonl = None
    if path.name.endswith(".json"):
        summary, jsonl = checks.load_json(path, data), None
        if (path.parent / "profile_export.jsonl").is_file():
            jsonl_data, jsonl_src = read_file(path.parent / "profile_export.jsonl")
            run.files.append(jsonl_src)
            jsonl, path_jsonl = jsonl_data, path.parent / "profile_export.jsonl"
    else:
        jsonl, path_jsonl, summary = data, path, None
        beside = path.parent / SUMMARY
        if beside.is_file():
            sdata, ssrc = read_file(beside)
            run.files.append(ssrc)
            summary = checks.load_json(beside, sdata)
    if jsonl is not None:
        _records(path_jsonl, jsonl, run)
    else:
        run.summary_reason = "AIPerf summary without its per-request export (profile_export.jsonl, --export-level records)"
    if summary is not None:
        _summary(path.parent / SUMMARY if path.suffix == ".jsonl" else path, summary, run)
    elif run.duration_s is None:
        run.version_reason = "no profile_export_aiperf.json beside the records: the version is not in them"
    return [run]


def _seconds(path: Path, field: str, metric) -> float | list[float]:
    if not isinstance(metric, dict) or "value" not in metric:
        raise checks.refuse(path, field, "expected {value, unit}")
    scale = _UNITS.get(metric.get("unit"))
    if scale is None:
        raise checks.refuse(path, field + ".unit", f"unknown time unit {metric.get('unit')!r}")
    v = metric["value"]
    if isinstance(v, list):
        return [x * scale for x in checks.numbers(path, field + ".value", v)]
    return checks.number(path, field + ".value", v) * scale


def _records(path: Path, data: bytes, run: ToolRun) -> None:
    kinds: dict[str, list[float]] = {k: [] for k in (*TAGS.values(), "itl")}
    outs, ins, starts, ends = [], [], [], []
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise checks.refuse(path, f"line {n}", f"not valid JSON ({exc})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("metrics"), dict):
            raise checks.refuse(path, f"line {n}", "not an AIPerf record (metadata, metrics[, error])")
        if isinstance(rec.get("metadata"), dict) and rec["metadata"].get("benchmark_phase") == "warmup":
            continue  # AIPerf's own summary leaves warm-up requests out
        if rec.get("error"):
            run.failed += 1
            err = rec["error"]
            run.errors.append(str(err.get("message") or err.get("type") or err) if isinstance(err, dict) else str(err))
            continue
        run.completed += 1
        m, where = rec["metrics"], f"line {n}.metrics"
        for tag, kind in TAGS.items():
            if tag in m:
                kinds[kind].append(_seconds(path, f"{where}.{tag}", m[tag]))
        if "inter_chunk_latency" in m:
            kinds["itl"] += _seconds(path, f"{where}.inter_chunk_latency", m["inter_chunk_latency"])
        for tag, out in (("output_sequence_length", outs), ("input_sequence_length", ins)):
            if tag in m:
                out.append(checks.number(path, f"{where}.{tag}.value", m[tag].get("value"), whole=True))
        meta = rec.get("metadata") or {}
        if isinstance(meta.get("request_start_ns"), int) and isinstance(meta.get("request_end_ns"), int):
            starts.append(meta["request_start_ns"])
            ends.append(meta["request_end_ns"])
    if run.completed == 0 and run.failed == 0:
        raise checks.refuse(path, "", "no records")
    for kind, values in kinds.items():
        if values and (kind == "itl" or len(values) == run.completed or kind == "tpot"):
            run.samples[kind] = values
        elif values:
            raise checks.refuse(path, kind, f"{len(values)} of {run.completed} completed records have it")
    run.output_lens, run.input_lens = outs or None, ins or None
    if starts:
        run.duration_s = (max(ends) - min(starts)) * 1e-9


def _summary(path: Path, doc, run: ToolRun) -> None:
    if not isinstance(doc, dict):
        raise checks.refuse(path, "", "not an AIPerf summary (a JSON object is expected)")
    run.version = doc.get("aiperf_version") if isinstance(doc.get("aiperf_version"), str) else None
    _load(doc.get("input_config"), run)
    cmd = _find(doc, "cli_command")
    run.command = cmd.split() if isinstance(cmd, str) else run.command
    has_records = bool(run.samples)
    count = (doc.get("request_count") or {}).get("avg")
    if has_records and count is not None and int(count) != run.completed:
        raise checks.refuse(path, "request_count.avg", f"{count:g} requests, but profile_export.jsonl has "
                                                       f"{run.completed} completed records")
    if not has_records:
        run.completed = int(checks.number(path, "request_count.avg", count or 0))
        run.failed = int(checks.number(path, "error_request_count.avg",
                                       (doc.get("error_request_count") or {}).get("avg") or 0))
    run.printed["completed"] = run.completed
    for tag, key in (("request_throughput", "request_throughput_per_s"),
                     ("output_token_throughput", "output_token_throughput_per_s")):
        v = (doc.get(tag) or {}).get("avg")
        if v is not None:
            run.printed[key] = checks.number(path, f"{tag}.avg", v)
    dur = (doc.get("benchmark_duration") or {}).get("avg")
    if isinstance(dur, (int, float)):
        run.duration_s = checks.number(path, "benchmark_duration.avg", dur)
    run.throughput = run.printed.get("request_throughput_per_s")
    run.token_throughput = run.printed.get("output_token_throughput_per_s")
    for tag, kind in (*TAGS.items(), ("inter_chunk_latency", "itl")):
        block = doc.get(tag)
        if not isinstance(block, dict):
            continue
        scale = _UNITS.get(block.get("unit"), 1e-3) * 1000  # to ms
        figures = {s: checks.number(path, f"{tag}.{s}", block[s]) * scale for s in
                   ("avg", "p50", "p90", "p95", "p99") if isinstance(block.get(s), (int, float))}
        run.printed[f"{kind}_ms"] = {("mean" if s == "avg" else s): v for s, v in figures.items()}
        samples = run.samples.get(kind)
        if samples and not run.failed:  # AIPerf counts failed requests into some percentiles
            for s, v in figures.items():
                mine = (checks.mean(samples) if s == "avg" else checks.linear_percentile(samples, float(s[1:]))) * 1000
                checks.agree(path, f"{tag}.{s}", mine, v, f"{s} {tag}")


def _load(config, run: ToolRun) -> None:
    """The run's concurrency and requested output length from AIPerf's `input_config` (0.13.0:
    `phases[kind=profiling].concurrency`, `datasets[].prompts.osl.mean` when its stddev is 0)."""
    if not isinstance(config, dict):
        return
    for phase in config.get("phases") or []:
        if isinstance(phase, dict) and phase.get("kind") == "profiling" and isinstance(phase.get("concurrency"), int):
            run.concurrency = phase["concurrency"]
    for ds in config.get("datasets") or []:
        osl = ((ds or {}).get("prompts") or {}).get("osl") if isinstance(ds, dict) else None
        if isinstance(osl, dict) and not osl.get("stddev") and isinstance(osl.get("mean"), (int, float)):
            run.output_len = int(osl["mean"])


def _find(doc, key):
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None
