"""GenAI-Perf (the tool AIPerf replaced): `profile_export.json` (perf_analyzer's per-request
timestamps) and the summary `profile_export_genai_perf.json` beside it.

Defined by triton-inference-server/perf_analyzer, `genai-perf/genai_perf/profile_data_parser/
llm_profile_data_parser.py` (GenAI-Perf 0.0.x): `experiments[].requests[]` carry `timestamp`
(ns) and `response_timestamps` (ns, one per streamed response); TTFT = first response − timestamp,
request latency = last response − timestamp, inter-chunk gaps between responses; its summary
(`{metric: {unit, avg, p25 … p99, min, max, std}}`) uses `np.percentile` (linear interpolation).
Tokens are counted by its tokenizer, which LUMA does not run: TPOT here is per streamed chunk,
(last − first response) / (responses − 1), as LUMA's own load generator counts it.
"""

from __future__ import annotations

from pathlib import Path

from luma.experiments.imports import checks
from luma.experiments.imports.run import ToolRun

TOOL = "genai-perf"
SUMMARY = "profile_export_genai_perf.json"


def looks_like(doc) -> tuple[int, list[str]]:
    if not isinstance(doc, dict):
        return 0, ["a JSON object"]
    exps = doc.get("experiments")
    marks = {"experiments": isinstance(exps, list),
             "experiments[].requests": isinstance(exps, list) and bool(exps) and isinstance(exps[0], dict)
             and "requests" in exps[0]}
    return sum(marks.values()), [k for k, ok in marks.items() if not ok]


def read(path: Path, data: bytes, source, read_file) -> list[ToolRun]:
    doc = checks.load_json(path, data)
    if looks_like(doc)[1]:
        raise checks.refuse(path, "experiments", "not a GenAI-Perf profile export (experiments[].requests)")
    run = ToolRun(TOOL, [source], version=doc.get("version") if isinstance(doc.get("version"), str) else None)
    ttft, lat, itl, tpot, starts, ends = [], [], [], [], [], []
    for e, exp in enumerate(doc["experiments"]):
        for r, req in enumerate(exp.get("requests") or []):
            where = f"experiments[{e}].requests[{r}]"
            t0 = checks.number(path, f"{where}.timestamp", req.get("timestamp"), whole=True)
            times = checks.numbers(path, f"{where}.response_timestamps", req.get("response_timestamps"), whole=True)
            if not times:
                run.failed += 1
                run.errors.append(f"{where}: no response")
                continue
            if any(b < a for a, b in zip([t0, *times], times)):
                raise checks.refuse(path, f"{where}.response_timestamps", "not in time order after the request")
            run.completed += 1
            ttft.append((times[0] - t0) * 1e-9)
            lat.append((times[-1] - t0) * 1e-9)
            itl += [(b - a) * 1e-9 for a, b in zip(times, times[1:])]
            if len(times) > 1:
                tpot.append((times[-1] - times[0]) * 1e-9 / (len(times) - 1))
            starts.append(t0)
            ends.append(times[-1])
    run.samples.update(ttft=ttft, latency=lat, itl=itl, tpot=tpot)
    if starts:
        run.duration_s = (max(ends) - min(starts)) * 1e-9
        run.throughput = run.completed / run.duration_s if run.duration_s else None
    beside = path.parent / SUMMARY
    if beside.is_file():
        sdata, ssrc = read_file(beside)
        run.files.append(ssrc)
        summary = checks.load_json(beside, sdata)
        for tag, kind in (("time_to_first_token", "ttft"), ("request_latency", "latency")):
            block = summary.get(tag) if isinstance(summary, dict) else None
            if not isinstance(block, dict):
                continue
            figures = {s: checks.number(beside, f"{tag}.{s}", block[s]) for s in ("avg", "p50", "p90", "p99")
                       if isinstance(block.get(s), (int, float))}
            run.printed[f"{kind}_ms"] = {("mean" if s == "avg" else s): v for s, v in figures.items()}
            for s, v in figures.items():
                samples = run.samples[kind]
                mine = (checks.mean(samples) if s == "avg" else checks.linear_percentile(samples, float(s[1:]))) * 1e3
                checks.agree(beside, f"{tag}.{s}", mine, v, f"{s} {tag}")
    run.printed["completed"] = run.completed
    if run.version is None:
        run.version_reason = "profile_export.json records no GenAI-Perf version"
    return [run]
