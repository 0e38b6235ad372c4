"""MLPerf Inference LoadGen's logs: `mlperf_log_summary.txt` + `mlperf_log_detail.txt`
(`:::MLLOG {json}` lines), with `mlperf_log_trace.json` and `mlperf_log_accuracy.json` when present.

Checked against mlcommons/inference `loadgen/` (LoadGen 6.0.17, commit b66003e): `results.cc`
writes the summary (`Scenario`, `Mode`, `Result is`, `Completed samples per second`, `N
percentile latency (ns)`, for token latencies `N percentile first token latency (ns)` and `N
percentile time to output token (ns)`), and takes a percentile as `sorted[floor(n · q)]` (an order
statistic, one rank above LUMA's nearest rank ⌈n · q⌉ − 1 when n · q is whole). The summary and
detail logs hold no per-sample latency. With `log_settings.enable_trace`, `loadgen.cc` writes
`mlperf_log_trace.json` (Chrome trace events): one async `Sample` event per sample whose
`args.complete_ns` is the sample's latency from its scheduled time, and with token latencies one
`Token_Latency` counter per sample whose `args.issue_delay + args.issue_to_done` is its first-token
latency (both checked on real 6.0.17 traces: they give the summary's figures exactly). The trace
is not strict JSON (doubled quotes in some `LogDetail` args): its timing events are read line by
line. With that trace the run is
measured (latency, and TTFT where traced); without it, summary only (vendor-claim). TPOT is
never per sample in any file LoadGen writes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "mlcommons-loadgen"  # its package name (PyPI, mlcommons/inference loadgen/)
DETAIL, TRACE, ACCURACY = "mlperf_log_detail.txt", "mlperf_log_trace.json", "mlperf_log_accuracy.json"
_PCT = re.compile(r"^(\d+(?:\.\d+)?) percentile (latency|first token latency|time to output token) \(ns\)$")
_KIND = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}
_MEAN = {"Mean latency (ns)": "latency", "Mean First Token latency (ns)": "ttft",
         "Mean Time per Output Token (ns)": "tpot"}


def looks_like(text: str) -> tuple[int, list[str]]:
    marks = ("MLPerf Results Summary", "Scenario :", "Result is :")
    return sum(m in text for m in marks), [m for m in marks if m not in text]


def parse_summary(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and value.strip():
            out.setdefault(" ".join(key.split()), value.strip())
    return out


def read(path: Path, data: bytes, source, read_file) -> list[ToolRun]:
    text = data.decode(errors="replace")
    if looks_like(text)[1]:
        raise checks.refuse(path, "", f"not a LoadGen summary (lacks {', '.join(looks_like(text)[1])})")
    s = parse_summary(text)
    run = ToolRun(TOOL, [source], percentile_definition="sorted[floor(n*q)] (LoadGen results.cc)")
    detail = _detail(path.parent / DETAIL, read_file, run)
    run.version = str(detail.get("loadgen_version", "")).split(" ")[0] or None
    if run.version is None:
        run.version_reason = f"no {DETAIL} beside the summary: its loadgen_version names the version"
    run.command = [f"{k}={v}" for k, v in detail.items() if k.startswith(("effective_", "requested_"))][:200]
    run.command = [f"scenario={s.get('Scenario')}", f"mode={s.get('Mode')}", *run.command]
    for key, field in (("Completed samples per second", "throughput"), ("Samples per second", "throughput"),
                       ("Completed tokens per second", "token_throughput"), ("Tokens per second", "token_throughput")):
        if key in s and getattr(run, field) is None:
            setattr(run, field, checks.number(path, key, _float(path, key, s[key])))
    run.printed = {"result": s.get("Result is"), "scenario": s.get("Scenario")}
    if run.throughput is not None:
        run.printed["request_throughput_per_s"] = run.throughput
    if run.token_throughput is not None:
        run.printed["output_token_throughput_per_s"] = run.token_throughput
    figures: dict[str, dict] = {}
    for key, value in s.items():
        m = _PCT.match(key)
        if m:
            figures.setdefault(_KIND[m.group(2)], {})[f"p{float(m.group(1)):g}"] = _float(path, key, value) / 1e6
        elif key in _MEAN:
            figures.setdefault(_MEAN[key], {})["mean"] = _float(path, key, value) / 1e6
    trace = path.parent / TRACE
    if trace.is_file() and trace.stat().st_size == 0:
        run.files.append(read_file(trace)[1])
        run.summary_reason = (f"{TRACE} is empty (LoadGen writes per-sample latencies only with "
                              "log_settings.enable_trace): summary and detail logs hold percentiles only")
        run.completed = int(detail.get("result_query_count") or detail.get("generated_query_count") or 0)
    elif trace.is_file():
        tdata, tsrc = read_file(trace)
        run.files.append(tsrc)
        _trace(trace, tdata, run)
    else:
        run.summary_reason = (f"no {TRACE} (LoadGen writes per-sample latencies only with "
                              "log_settings.enable_trace): summary and detail logs hold percentiles only")
        run.completed = int(detail.get("result_query_count") or detail.get("generated_query_count") or 0)
    for kind, fig in figures.items():
        run.printed[f"{kind}_ms"] = fig
        samples = run.samples.get(kind)
        for stat, v in fig.items() if samples else ():
            mine = checks.mean(samples) if stat == "mean" else _loadgen_percentile(samples, float(stat[1:]) / 100)
            checks.agree(path, f"{stat} {kind}", mine * 1e3, v, f"{stat} {kind} (ms)", rounding=1e-6)
    if (path.parent / ACCURACY).is_file():
        run.files.append(read_file(path.parent / ACCURACY)[1])
    run.printed["completed"] = run.completed
    return [run]


def _loadgen_percentile(values: list[float], q: float) -> float:
    x = sorted(values)
    return x[min(len(x) - 1, int(len(x) * q))]


def _float(path: Path, key: str, value: str) -> float:
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        raise checks.refuse(path, key, f"{value!r} is not a number") from None


def _detail(path: Path, read_file, run: ToolRun) -> dict:
    if not path.is_file():
        return {}
    data, src = read_file(path)
    run.files.append(src)
    out = {}
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        if not line.startswith(":::MLLOG "):
            continue
        try:
            ev = json.loads(line[len(":::MLLOG "):])
        except ValueError as exc:
            raise checks.refuse(path, f"line {n}", f"not valid :::MLLOG JSON ({exc})") from None
        if isinstance(ev, dict) and isinstance(ev.get("key"), str):
            out.setdefault(ev["key"], ev.get("value"))
    return out


#: The trace events that carry per-sample timing (LoadGen 6.0.17 `loadgen.cc`): `Sample` (async
#: begin, `args.complete_ns`: the sample's latency from its scheduled time) and `Token_Latency`
#: (a counter per sample, `args.issue_delay` + `args.issue_to_done`: its first-token latency).
_TIMED = ("Sample", "Token_Latency", "Token")


def _events(path: Path, data: bytes) -> list:
    """The trace's timing events. LoadGen writes one event per line, and some `args` of other
    events with doubled quotes (`"key":""loadgen_version""`), so the file as a whole is often not
    JSON: then each line of a timing event is read alone (and must be JSON)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise checks.refuse(path, "traceEvents", "missing: not a LoadGen trace")
        return [e for e in events if isinstance(e, dict) and e.get("name") in _TIMED]
    text = data.decode(errors="replace")
    if not text.lstrip().startswith('{"traceEvents"'):
        raise checks.refuse(path, "traceEvents", "missing: not a LoadGen trace")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip().rstrip(",")
        if not any(line.startswith(f'{{"name":"{name}"') for name in _TIMED):
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise checks.refuse(path, f"line {n}", f"not a valid trace event ({exc})") from None
    return out


def _trace(path: Path, data: bytes, run: ToolRun) -> None:
    lat, ttft = [], []
    for i, ev in enumerate(_events(path, data)):
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if ev.get("name") in ("Sample", "Token") and ev.get("ph") == "b":
            ns = checks.number(path, f"{ev['name']} event {i}.args.complete_ns", args.get("complete_ns"))
            (lat if ev["name"] == "Sample" else ttft).append(ns * 1e-9)
        elif ev.get("name") == "Token_Latency":
            at = f"Token_Latency event {i}.args"
            ns = checks.number(path, f"{at}.issue_delay", args.get("issue_delay")) + \
                checks.number(path, f"{at}.issue_to_done", args.get("issue_to_done"))
            ttft.append(ns * 1e-9)
    if not lat:
        raise checks.refuse(path, "traceEvents", "no Sample events: the trace holds no per-sample latency")
    run.samples["latency"] = lat
    if ttft:
        if len(ttft) != len(lat):
            raise checks.refuse(path, "traceEvents", f"{len(ttft)} first-token events for {len(lat)} Sample events")
        run.samples["ttft"] = ttft
    run.completed = len(lat)
