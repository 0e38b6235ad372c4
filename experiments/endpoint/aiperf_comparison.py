"""`luma endpoint bench`: LUMA's endpoint load generator (`client`) against NVIDIA AIPerf on the
same llama.cpp server, same texts in the same order, same body fields, same load.

Each case starts the server of a shipped contract at the state `{"compute": 1}` (pinned to the
first core; this process, LUMA's client and AIPerf keep to the other cores when there are any),
warms it up, then alternates the tools pass by pass (aiperf, luma, aiperf, luma ...). The figures
are each tool's own; the comparison (`agreement`) is the ratio of LUMA's mean over the passes to
AIPerf's.

Cases: `embeddings` (closed loop, 4 clients), `completions` (streamed, closed loop, 2 clients,
64 tokens) and `completions-open` (the same requests as Poisson arrivals at ~65 % of the
closed-loop capacity measured in the same run; by default AIPerf replays exactly the arrivals
LUMA's client draws). In a closed loop each client's think time — end of a response to its next
request — lightens the load by itself (N = X (R + Z)): AIPerf's is several milliseconds, LUMA's
about one on the wire, so there the tools do not offer the same load. Think time is shown as each
tool's own records leave it out: in time order, the start of request k+N minus the end of request
k (N clients); LUMA stamps a request before it builds and sends it, so its sending overhead is
inside its latency and its think time reads near zero. In the open loop arrivals do not wait for
responses: the like-for-like comparison of TTFT and latency, counted from the schedule for both
(AIPerf's own figures start when its worker sends, after its credit -> send lag).
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from luma.errors import ConfigError, ContractError, LumaError
from luma.experiments import services
from luma.experiments.sprint import contract
from luma.experiments.endpoint import aiperf, client, engines, launch
from luma.experiments.endpoint.client import schedule  # the arrivals both tools send
from luma.kernels.sentences import CALIBRATION, SENTENCES

#: The targets a case runs against: a shipped contract and the variant it serves.
TARGETS = {"embeddings": ("llamacpp-minilm-memory", "q8_0"), "completions": ("llamacpp-tinyllama-kv", "f16")}
#: The server's state: one core, one llama.cpp thread (plus KV_TOKENS of KV cache where the
#: contract's launch command sizes it).
STATE = {"compute": 1}
#: Context window of a generation server: the longest prompt and 64 tokens fit many times over.
KV_TOKENS = 1024
#: Seconds either tool waits for one answer.
REQUEST_TIMEOUT_S = 60.0
#: The open-loop rate as a share of the closed-loop capacity (queueing shows, the server keeps up).
OPEN_LOAD = 0.65
WARMUP = 5
#: How the open loop's arrivals are drawn (see `run`).
ARRIVALS = ("same", "own")


@dataclass(frozen=True)
class Case:
    """One load: the target it runs against, closed loop of `concurrency` clients or Poisson
    arrivals (`mode="poisson"`, rate chosen per run), requests, tokens to generate."""

    name: str
    target: str
    mode: str
    concurrency: int
    requests: int
    max_tokens: int | None = None

    @property
    def stream(self) -> bool:
        return self.target == "completions"


CASES = {c.name: c for c in (
    Case("embeddings", "embeddings", "closed", 4, 240),
    Case("completions", "completions", "closed", 2, 300, 64),
    Case("completions-open", "completions", "poisson", 0, 300, 64),
)}


@dataclass
class Target:
    """A server to launch: the contract's [service] table, the variant, its artifact and the
    tokenizer folder AIPerf counts tokens with."""

    label: str
    spec: object  # EndpointSpec
    variant: str
    artifact: Path
    tokenizer: Path


def contract_target(name: str, variant: str, cache: Path, note: Callable[[str], None] = lambda m: None) -> Target:
    """The target of shipped contract `name` serving `variant`, its artifact prepared under
    `cache` (llama.cpp's converter makes it the first time; `note` hears of it)."""
    c = contract.load(name)
    if c.endpoint is None:
        raise ContractError(f"contract {name!r} does not describe an openai-endpoint service", field="service")
    spec = c.endpoint
    if variant not in spec.variants:
        raise ContractError(f"contract {name!r} has no variant {variant!r} (it has: {', '.join(spec.variants)})",
                          field="variant")
    if spec.engine == "llama.cpp" and engines.llama_cpp_version() is None:
        raise ConfigError("llama.cpp's server is not installed: run `luma engine install llama.cpp`", field="engine")
    prepare = spec.variants[variant].prepare or []
    # The bench needs the artifact only; the quality reference (torch) is the sprint's business.
    svc = services.for_contract(c.model_copy(update={"endpoint": spec.model_copy(update={"quality": "none"})}))
    target = Path(svc.model_path(variant, Path(cache)))
    if not target.exists():
        if "luma.experiments.endpoint.gguf" in prepare:
            engines.converter()  # a ConfigError naming the install command, before a conversion fails on it
        note(f"making {target} (once)")
    artifact = Path(svc.prepare(variant, Path(cache)))
    tokenizer = tokenizer_dir(prepare, artifact)
    if not tokenizer.is_dir():
        raise ConfigError(f"{tokenizer} is missing (AIPerf counts tokens with it); delete {artifact} so that "
                          f"its prepare command makes both again", field="tokenizer")
    return Target(f"{name} {variant}", spec, variant, artifact, tokenizer)


def tokenizer_dir(prepare: list[str], artifact: Path) -> Path:
    """The Hugging Face folder of the model a `luma.experiments.endpoint.gguf` prepare converted."""
    tool = "luma.experiments.endpoint.gguf"
    model = prepare[prepare.index(tool) + 1] if tool in prepare[:-1] else None
    if model == "minilm":
        from luma.experiments.services.minilm_encoder import model_dir  # imports torch

        return model_dir()
    if model == "tinyllama":
        return artifact.parent / "tinyllama-hf"  # trained there by the variant's prepare
    raise ConfigError(f"no tokenizer folder is known for {artifact.name} (AIPerf counts tokens with one)",
                      field="tokenizer")


def texts(case: Case, n: int) -> list[str]:
    """The request texts in order: the shipped sentences; for embeddings eight in a row per input
    (~110 tokens, ~50 ms of one core), so the server's work dominates each client's overhead."""
    pool = [*SENTENCES, *CALIBRATION]
    if case.target == "embeddings":
        pool = [" ".join(pool[(i + j) % len(pool)] for j in range(8)) for i in range(len(pool))]
    return [pool[i % len(pool)] for i in range(n)]


# --------------------------------------------------------------------------- figures

def _pct(xs, q) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if len(xs) else None


def think_times(starts: list[float], ends: list[float], clients: int) -> list[float]:
    """A closed loop's think times: in time order, start of request k+N minus end of request k
    (each end frees the client that starts the next request)."""
    s, e = sorted(starts), sorted(ends)
    return [s[k + clients] - e[k] for k in range(len(s) - clients)] if clients else []


def timing(case: Case, starts: list[float], ends: list[float], scheduled: list[float]) -> dict:
    """Figures of the per-request times common to both tools (ms, requests/s)."""
    out = {}
    if case.mode == "closed":
        z = [x * 1e3 for x in think_times(starts, ends, case.concurrency)]
        out.update(think_p50=_pct(z, 50), think_avg=float(np.mean(z)) if z else None)
    elif len(scheduled) > 1:
        out["offered_rps"] = (len(scheduled) - 1) / (max(scheduled) - min(scheduled))
    return out


def luma_run(case: Case, ep, payloads: list[str], rate: float | None, seed: int = 0) -> dict:
    """Run the case with LUMA's client; its figures in the bench's names and units."""
    c0, w0 = time.process_time(), time.perf_counter()
    # _drive, not run: the bench needs the per-request samples for the think time.
    samples, t0, timed_out = asyncio.run(client._drive(ep, payloads, case.mode, case.concurrency, rate, seed, None))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    r = client.summarize(samples, t0, timed_out)
    ms = [x * 1e3 for x in r.latency]
    out = {"completed": float(r.completed), "errors": float(sum(r.errors.values())), "duration_s": r.makespan,
           "rps": r.throughput(), "lat_p50": _pct(ms, 50), "lat_p95": _pct(ms, 95),
           "lat_avg": float(np.mean(ms)) if ms else None, "client_cpu_s": cpu, "wall_s": wall}
    if case.stream:
        ttft = [x * 1e3 for x in r.ttft]
        out.update(ttft_p50=_pct(ttft, 50), ttft_p95=_pct(ttft, 95), tpot_p50=_pct([x * 1e3 for x in r.tpot], 50),
                   itl_avg=float(np.mean(r.itl)) * 1e3 if r.itl else None, tok_s=r.token_throughput(),
                   osl_avg=r.tokens / max(r.completed, 1))
    if r.error_details:
        out["error_details"] = r.error_details
    done = [s for s in samples if s.end is not None]
    out.update(timing(case, [s.arrival for s in done], [s.end for s in done], [s.arrival for s in done]))
    if case.mode == "poisson":  # LUMA counts from the scheduled arrival: its figures are already so
        out.update(lat_sched_p50=out["lat_p50"], lat_sched_p95=out["lat_p95"], ttft_sched_p50=out.get("ttft_p50"),
                   ttft_sched_p95=out.get("ttft_p95"))
    return out


def aiperf_run(case: Case, binary: str, load: aiperf.Load, base_url: str, outdir: Path) -> dict:
    """Run the case with AIPerf; its figures in the bench's names and units. In the open loop
    also its TTFT and latency counted from the schedule (its credit), as LUMA counts them:
    AIPerf's own start when the request is sent."""
    out = aiperf.run(binary, load, base_url, outdir)
    starts, ends, credits = out.pop("starts"), out.pop("ends"), out.pop("credits")
    latency, ttft = out.pop("latency"), out.pop("ttft")
    out.update(timing(case, starts, ends, credits))
    if case.mode == "poisson" and starts:
        lag = [(s - c) * 1e3 for s, c in zip(starts, credits)]
        out["send_lag_p50"] = _pct(lag, 50)
        lat = [g + x for g, x in zip(lag, latency) if x is not None]
        first = [g + x for g, x in zip(lag, ttft) if x is not None]
        out.update(lat_sched_p50=_pct(lat, 50), lat_sched_p95=_pct(lat, 95), ttft_sched_p50=_pct(first, 50),
                   ttft_sched_p95=_pct(first, 95))
    return out


# --------------------------------------------------------------------------- the run

def _endpoint(case: Case, target: Target, base_url: str, model: str):
    extra = dict(target.spec.request)
    if case.stream:
        # AIPerf's streamed body carries stream_options.include_usage: the same fields in LUMA's.
        extra["stream_options"] = {"include_usage": True}
    return client.Endpoint(base_url, target.spec.api, model, case.stream, case.max_tokens or 16, REQUEST_TIMEOUT_S,
                           extra=extra)


def run(cases: list[str], binary: str, targets: dict[str, Target], passes: int = 2, requests: int | None = None,
        rate: float | None = None, arrivals: str = "same", workdir: Path | None = None,
        progress: Callable[[str], None] = lambda m: None) -> dict:
    """Run `cases` with AIPerf (`binary`) and LUMA's client, alternating pass by pass; the
    servers are always stopped. `rate` fixes the open-loop rate (default OPEN_LOAD x the
    closed-loop capacity measured in this run); `arrivals`: `same` = AIPerf replays LUMA's
    seeded Poisson arrivals (--fixed-schedule), `own` = each tool draws its own at that rate.
    `progress` hears of each run as it starts."""
    if arrivals not in ARRIVALS:
        raise ContractError(f"unknown arrivals {arrivals!r} (known: {', '.join(ARRIVALS)})", field="arrivals")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise ContractError(f"unknown case {unknown[0]!r} (known: {', '.join(CASES)})", field="cases")
    version = aiperf.version(binary)
    ordered = [CASES[c] for c in CASES if c in cases]  # closed-loop completions measure the open rate
    result = {"aiperf": version, "cases": []}
    all_cores = os.sched_getaffinity(0)
    previous = _on_sigterm(_interrupt)  # a terminated bench still stops its servers
    tmp = None if workdir else tempfile.TemporaryDirectory(prefix="luma-endpoint-bench-")
    try:
        work = Path(workdir or tmp.name)
        work.mkdir(parents=True, exist_ok=True)
        for target_name in dict.fromkeys(c.target for c in ordered):
            target = targets[target_name]
            server = launch_server(target, work / f"server-{target_name}.log")
            try:
                server_cores = launch.server_cores(STATE) or []
                rest = all_cores - set(server_cores)
                if rest:
                    os.sched_setaffinity(0, rest)  # AIPerf, a child, inherits it
                result["server_cores"], result["client_cores"] = len(server_cores), len(rest or all_cores)
                model = target.spec.served_model or target.spec.variants[target.variant].model or str(target.artifact)
                for case in (c for c in ordered if c.target == target_name):
                    ep = _endpoint(case, target, server.base_url, model)
                    _warm_up(ep, texts(case, WARMUP), server)
                    case_rate = None
                    if case.mode == "poisson":
                        case_rate = rate or _open_rate(result, target, server.base_url, model)
                    result["cases"].append(_case(case, target, binary, server, ep, model, requests or case.requests,
                                                 passes, case_rate, arrivals, work, progress))
            finally:
                os.sched_setaffinity(0, all_cores)
                server.stop()
    finally:
        _on_sigterm(previous)
        if tmp is not None:
            tmp.cleanup()
    return result


def _on_sigterm(handler):
    """Install `handler` for SIGTERM and return the previous one (None off the main thread)."""
    if handler is None:
        return None
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: the caller handles signals
        return None


def _case(case, target, binary, server, ep, model, n, passes, rate, arrivals, work, progress) -> dict:
    payloads = texts(case, n)
    replay = schedule(rate, n) if rate and arrivals == "same" else None
    load = aiperf.Load(target.spec.api, model, str(target.tokenizer), payloads, n, case.stream,
                       case.concurrency or None, rate, case.max_tokens, dict(target.spec.request), ep.timeout_s,
                       schedule=replay)
    runs = []
    for p in range(1, passes + 1):
        for tool in ("aiperf", "luma"):
            progress(f"{case.name}: {tool} pass {p}/{passes}")
            if tool == "aiperf":
                r = aiperf_run(case, binary, load, server.base_url, work / f"{case.name}-aiperf-{p}")
            else:
                r = luma_run(case, ep, payloads, rate)
            if not server.alive():
                raise LumaError(f"the server died during {case.name} ({tool} pass {p}): {server.log_tail()[-300:]}")
            runs.append({"tool": tool, "pass": p, **r})
    if case.mode == "closed":
        load_text = f"closed loop, {case.concurrency} clients"
    else:  # the draw's own rate: a few hundred arrivals of one seed miss the nominal rate by several %
        drawn = (n - 1) / schedule(rate, n)[-1] if n > 1 else rate
        load_text = (f"Poisson arrivals at {rate:g} requests/s ({drawn:.1f} as drawn with seed 0), "
                     + ("the same for both tools" if replay else "each tool its own draw"))
    return {"case": case.name, "mode": case.mode, "stream": case.stream, "target": target.label,
            "state": state(target), "requests": n, "rate": rate, "load": load_text, "max_tokens": case.max_tokens,
            "runs": runs}


def state(target: Target) -> dict:
    """STATE, plus a KV cache of KV_TOKENS tokens (in bytes, through the variant's bytes per
    token) when the launch command sizes the context window from the state."""
    out = dict(STATE)
    per_token = getattr(target.spec.variants[target.variant], "kv_bytes_per_token", None)
    if per_token and target.spec.uses("kv_tokens"):
        out["kv_cache"] = int(KV_TOKENS * per_token)
    return out


def launch_server(target: Target, log: Path):
    """Start the target's server at its `state` (LumaError with the log's tail when it does not
    come up)."""
    try:
        return launch.start(target.spec, state(target), str(target.artifact), target.variant, log)
    except launch.LaunchError as exc:
        raise LumaError(f"{target.label}: {exc}: {exc.log_tail[-300:]}") from None
    except ValueError as exc:  # a placeholder the state has no level for
        raise ConfigError(f"{target.label}: {exc}", field="service.launch") from None


def _warm_up(ep, payloads: list[str], server) -> None:
    r = client.run(ep, payloads, "closed", 1)
    if r.completed != len(payloads):
        raise LumaError(f"warm-up failed: {'; '.join(r.error_details[:2])}; server log: {server.log_tail()[-300:]}")


def _open_rate(result: dict, target: Target, base_url: str, model: str) -> float:
    """OPEN_LOAD x the closed-loop capacity: the closed-loop completions case's mean throughput
    in this run, else a short closed-loop probe with LUMA's client."""
    done = next((c for c in result["cases"] if c["case"] == "completions"), None)
    if done:
        capacity = float(np.mean([r["rps"] for r in done["runs"]]))
    else:
        closed = CASES["completions"]
        probe = luma_run(closed, _endpoint(closed, target, base_url, model), texts(closed, 60), None)
        capacity = probe["rps"]
    if not capacity:
        raise LumaError("could not measure the closed-loop capacity for the open-loop rate")
    return round(OPEN_LOAD * capacity, 1)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
