"""NVIDIA AIPerf as a reference load generator for `luma endpoint bench`: find the binary, run one
load with it against a running server, and read back its figures in the units and names the
bench compares (milliseconds, requests/s).

AIPerf lives in its own virtual environment (its pins clash with LUMA's); the bench was written
against aiperf 0.13.0. Two of its behaviours shape the command line:

* Pure `--concurrency` mode busy-polls a whole core in its timing manager (0.13.0); on a small
  host that core is taken from the server or from AIPerf's own worker. A closed loop therefore
  runs as `--concurrency N --request-rate 1000 --arrival-pattern constant`: the pacer issues at
  most one credit per millisecond, still capped by the N in flight.
* With HF_HUB_OFFLINE set it treats a local tokenizer folder as a hub repository id and fails, so
  that variable is removed from its environment (a local folder needs no network either way).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import ConfigError, ContractError, LumaError

#: The version the bench was written and measured against.
VERSION = "0.13.0"
INSTALL = f"python3 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf=={VERSION}"
#: Seconds one AIPerf run may take beyond its own start-up before it is stopped.
RUN_TIMEOUT_S = 900


def find(path: str | None = None) -> str:
    """The AIPerf executable: `path`, else `aiperf` on PATH; ConfigError naming how to install it."""
    if path:
        p = Path(path).expanduser()
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ConfigError(f"{path} is not an executable AIPerf; install it: {INSTALL}", field="aiperf")
        return str(p)
    found = shutil.which("aiperf")
    if not found:
        raise ConfigError(f"AIPerf is not installed (no `aiperf` on PATH): {INSTALL}, then "
                          f"`luma endpoint bench --aiperf /tmp/aiperf-venv/bin/aiperf`", field="aiperf")
    return found


def version(binary: str) -> str:
    """`aiperf --version`'s answer (ConfigError when the binary does not run)."""
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{binary} does not run: {exc}; install it: {INSTALL}", field="aiperf") from None
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ConfigError(f"{binary} did not say its version (exit {done.returncode}); install it: {INSTALL}",
                          field="aiperf")
    return lines[-1].strip()


@dataclass
class Load:
    """One load as AIPerf runs it: the API, the texts in order, closed loop (`concurrency`),
    its own Poisson arrivals at `rate`, or a given `schedule` (seconds after the first request,
    replayed with `--fixed-schedule`), and the body fields."""

    api: str
    model: str
    tokenizer: str
    texts: list[str]
    requests: int
    stream: bool = False
    concurrency: int | None = None
    rate: float | None = None
    max_tokens: int | None = None
    extra: dict = field(default_factory=dict)
    timeout_s: float = 60.0
    seed: int = 0
    schedule: list[float] | None = None


def command(binary: str, load: Load, base_url: str, outdir: Path) -> list[str]:
    """The `aiperf profile` command line of `load` (inputs in outdir/inputs.jsonl)."""
    cmd = [binary, "profile", "--model", load.model, "--url", base_url, "--endpoint-type", load.api,
           "--input-file", str(outdir / "inputs.jsonl"), "--custom-dataset-type", "single_turn",
           "--dataset-sampling-strategy", "sequential", "--tokenizer", load.tokenizer,
           "--request-count", str(load.requests), "--request-timeout-seconds", f"{load.timeout_s:g}",
           "--random-seed", str(load.seed), "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
           "--artifact-dir", str(outdir), "--export-level", "records"]
    if load.concurrency:  # closed loop, paced (see the module docstring)
        cmd += ["--concurrency", str(load.concurrency), "--request-rate", "1000", "--arrival-pattern", "constant"]
    elif load.schedule:
        cmd += ["--fixed-schedule"]
    elif load.rate:
        cmd += ["--request-rate", f"{load.rate:g}", "--arrival-pattern", "poisson"]
    else:
        raise ContractError("an AIPerf load needs a concurrency (closed loop), a rate or a schedule (open loop)",
                          field="load")
    if load.stream:
        cmd += ["--streaming"]
    if load.max_tokens:
        cmd += ["--osl", str(load.max_tokens), "--osl-stddev", "0", "--use-legacy-max-tokens"]
    extra = dict(load.extra)
    if load.api != "embeddings":
        extra.setdefault("temperature", 0)  # LUMA's body always has it
    extra.pop("stream_options", None)  # AIPerf adds stream_options.include_usage itself when streaming
    if extra:
        cmd += ["--extra-inputs", json.dumps(extra)]
    return cmd


def run(binary: str, load: Load, base_url: str, outdir: Path) -> dict:
    """Run `load` with AIPerf and return its figures (`parse`) plus `client_cpu_s` (AIPerf and
    every service it reaped) and `wall_s` (start-up included)."""
    outdir.mkdir(parents=True, exist_ok=True)
    with open(outdir / "inputs.jsonl", "w") as fh:
        for i, text in enumerate(load.texts):
            line = {"text": text}
            if load.schedule:
                line["timestamp"] = round(load.schedule[i] * 1e3, 3)  # ms; AIPerf schedules to the ms
            fh.write(json.dumps(line) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    # AIPerf leaves folders in the temporary directory (aiperf_mmap_<id>, its IPC sockets' mkdtemp):
    # a short one of its own (socket paths are limited to 108 bytes), removed after the run.
    scratch = tempfile.mkdtemp(prefix="luma-aiperf-")
    env.update(HF_HUB_DISABLE_TELEMETRY="1", TOKENIZERS_PARALLELISM="false", COLUMNS="160", TMPDIR=scratch)
    t0 = time.perf_counter()
    try:
        with open(outdir / "aiperf.log", "wb") as log:
            proc = subprocess.Popen(command(binary, load, base_url, outdir), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                status, usage = _wait(proc, RUN_TIMEOUT_S)
            except BaseException:
                _kill(proc)  # its own session: AIPerf and the services it spawned, nothing else
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    wall = time.perf_counter() - t0
    if status != 0:
        tail = (outdir / "aiperf.log").read_bytes()[-400:].decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise LumaError(f"aiperf exited with {status} (log: {outdir / 'aiperf.log'}): {tail[0][:200]}")
    out = parse(outdir)
    out.update(client_cpu_s=usage.ru_utime + usage.ru_stime, wall_s=wall)
    return out


def _wait(proc: subprocess.Popen, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            raise LumaError(f"aiperf did not finish within {timeout_s} s")
        time.sleep(0.05)


def _kill(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except (ProcessLookupError, ChildProcessError):
            return


def parse(outdir: Path) -> dict:
    """AIPerf's summary (`profile_export_aiperf.json`) as the bench's figures, plus its
    per-request records (`profile_export.jsonl`) as `starts`, `ends` and `credits` (seconds)."""
    path = Path(outdir) / "profile_export_aiperf.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LumaError(f"cannot read AIPerf's export {path}: {exc}") from None

    def g(metric: str, stat: str) -> float | None:
        return (doc.get(metric) or {}).get(stat)

    out = {"version": doc.get("aiperf_version"), "completed": g("request_count", "avg") or 0.0,
           "errors": float(sum(e.get("count", 0) for e in doc.get("error_summary") or [])),
           "duration_s": g("benchmark_duration", "avg"), "rps": g("request_throughput", "avg"),
           "lat_p50": g("request_latency", "p50"), "lat_p95": g("request_latency", "p95"),
           "lat_avg": g("request_latency", "avg")}
    if doc.get("time_to_first_token"):
        out.update(ttft_p50=g("time_to_first_token", "p50"), ttft_p95=g("time_to_first_token", "p95"),
                   tpot_p50=g("inter_token_latency", "p50"), itl_avg=g("inter_chunk_latency", "avg"),
                   tok_s=g("output_token_throughput", "avg"), osl_avg=g("output_sequence_length", "avg"))
    out.update(records(Path(outdir) / "profile_export.jsonl"))
    return out


def records(path: Path) -> dict:
    """Per-request times of the profiling phase: when the timing manager issued the request's
    credit, when the worker sent it, when it ended (`credits`, `starts`, `ends`: seconds on
    AIPerf's clock), and its own latency and TTFT (`latency`, `ttft`: ms, None where it has
    none). Empty lists when the export has no records."""
    out = {"starts": [], "ends": [], "credits": [], "latency": [], "ttft": []}
    if not path.is_file():
        return out
    with open(path) as fh:
        for line in fh:
            doc = json.loads(line) if line.strip() else {}
            meta, metrics = doc.get("metadata") or {}, doc.get("metrics") or {}
            if meta.get("benchmark_phase", "profiling") != "profiling" or meta.get("was_cancelled"):
                continue
            if meta.get("request_start_ns") is None or meta.get("request_end_ns") is None:
                continue
            out["starts"].append(meta["request_start_ns"] / 1e9)
            out["ends"].append(meta["request_end_ns"] / 1e9)
            out["credits"].append((meta.get("credit_issued_ns") or meta["request_start_ns"]) / 1e9)
            for key, metric in (("latency", "request_latency"), ("ttft", "time_to_first_token")):
                out[key].append((metrics.get(metric) or {}).get("value"))
    return out
