"""One trial of an endpoint service, inside the trial worker (`luma.experiments.sprint.worker`):
launch the server at the state, warm it up, drive the contract's load through the HTTP client,
score quality through the same server, stop it. The telemetry has the worker's form, so the
sprint judges it with the same statistics.

Failure causes: `launch` (the server exited or never answered ready; its log tail is kept),
`oom` (requests failed and the memory-limited server's log says an allocation failed), `error`
(any request failed otherwise — the server died mid-trial, answered 5xx, or broke a stream: a
trial whose failed requests were left out of its percentiles would flatter the state), `timeout`.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from luma.experiments.endpoint import client, launch
from luma.experiments.endpoint.service import texts
from luma.experiments.endpoint.spec import EndpointSpec
from luma.experiments.energy import Meter
from luma.experiments.sprint import contention
from luma.experiments.sprint.procfs import proc_status

#: What an engine says when the data-segment limit refuses it memory (a thread's stack included:
#: Python's "can't start new thread" under RLIMIT_DATA is a refused stack mapping).
_OOM_TEXT = ("failed to allocate", "cannot allocate memory", "out of memory", "bad_alloc", "memoryerror",
             "unable to allocate", "can't start new thread")


def _proc_status(pid: int) -> dict[str, int]:
    """The server's memory figures ({} once it is gone)."""
    try:
        return proc_status(pid)
    except OSError:
        return {}


def quality(ep: client.Endpoint, reference: str) -> float:
    """Mean cosine of the served embeddings of the reference sentences to LUMA's fp32 ones."""
    import httpx
    import numpy as np

    ref = np.load(reference)
    got = []
    with httpx.Client(timeout=ep.timeout_s) as http:
        for text in ref["sentences"].tolist():
            r = http.post(ep.url, json=ep.body(text), headers=ep.headers)
            r.raise_for_status()
            got.append(r.json()["data"][0]["embedding"])
    a, b = np.asarray(got, dtype=np.float64), ref["embeddings"].astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.mean())


def _declared(causes: dict, said: str) -> str | None:
    """The first of the contract's causes whose words the server's text contains."""
    said = said.lower()
    return next((cause for cause, words in causes.items() if any(w.lower() in said for w in words)), None)


def _classify(tel: dict, res: client.EndpointResult, server, state: dict, phase: str,
              causes: dict | None = None) -> None:
    """Set the failure cause of a load phase whose requests failed (`causes`: the contract's
    {cause: [what the server says]}, checked first)."""
    causes = causes or {}
    errors = dict(res.errors)
    tel.setdefault("errors", {})
    for k, v in errors.items():
        tel["errors"][k] = tel["errors"].get(k, 0) + v
    if not errors:
        return
    details = "; ".join(res.error_details[:3])
    tail = server.log_tail() if server is not None else ""
    said = (tail + " " + " ".join(res.error_details)).lower()
    declared = [c for c in [_declared(causes, said)] if c]
    # Out of memory under the state's own data limit, whether the server answered 5xx or died of
    # it (an uncaught std::bad_alloc aborts it): the log says which.
    oom = bool(state.get("host_memory")) and any(s in said for s in _OOM_TEXT)
    cause = declared[0] if declared else "oom" if oom else "error"
    if server is not None and not server.alive():
        code = server.proc.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tel.update(failure_cause=cause, error=f"the server died during the {phase} phase ({how}); "
                                              f"{sum(errors.values())} request(s) failed: {details}"[:500],
                   log_tail=tail)
        return
    tel.update(failure_cause=cause,
               error=f"{sum(errors.values())} request(s) failed in the {phase} phase: {details}"[:500])
    if tail:
        tel["log_tail"] = tail


def run(spec: dict) -> dict:
    """Telemetry of one endpoint trial (`spec`: the worker's trial spec plus `endpoint`)."""
    t_start = time.perf_counter()
    state, load = spec["state"], spec["load"]
    ep_spec = EndpointSpec.model_validate(spec["endpoint"])
    tel: dict = {"state": state, "variant": spec["variant"], "phase": "launch"}
    cores = launch.server_cores(state)
    if cores:
        # The load generator keeps off the server's cores when the host has others to give it.
        rest = [c for c in sorted(os.sched_getaffinity(0)) if c not in cores]
        if rest:
            os.sched_setaffinity(0, rest)
        tel["cores"] = len(cores)
    tel["client_cores"] = len(os.sched_getaffinity(0))
    server = None
    with tempfile.TemporaryDirectory(prefix="luma-endpoint-") as tmp:
        try:
            if ep_spec.launch:
                t = time.perf_counter()
                try:
                    server = launch.start(ep_spec, state, str(spec["artifact"]), spec["variant"],
                                          Path(tmp) / "server.log", spec.get("units"))
                except launch.LaunchError as exc:
                    # An engine that refuses to start for want of a resource says so in its log
                    # (vLLM: a KV cache too small for one sequence), often well above the tail its
                    # shutdown tracebacks leave: the contract's words, found in the whole log, name the cause.
                    log = Path(tmp) / "server.log"
                    said = log.read_text(errors="replace") if log.is_file() else exc.log_tail
                    tel.update(failure_cause=_declared(ep_spec.causes, f"{exc} {said}") or "launch",
                               error=str(exc)[:500], log_tail=exc.log_tail)
                    return tel
                except launch.KVBudgetError as exc:
                    tel.update(failure_cause="kv-capacity", error=str(exc)[:500])
                    return tel
                except ValueError as exc:  # a placeholder this state has no level for
                    tel.update(failure_cause="launch", error=str(exc)[:500])
                    return tel
                tel["load_s"] = time.perf_counter() - t
                tel["engine_command"] = server.command
                base_url = server.base_url
            else:
                base_url = ep_spec.base_url
            st = _proc_status(server.proc.pid) if server else {}
            if "VmData" in st:
                tel["ready_data_segment_bytes"] = st["VmData"]  # the server's, once it answers ready
            # RLIMIT_DATA = the level itself on the whole server (launch.py): no part of its memory
            # sits outside the budget, so a deployment needs the level in all (summary, reports).
            tel["runtime_footprint_bytes"] = 0
            served = ep_spec.served_model or ep_spec.variants[spec["variant"]].model  # vLLM answers to its model
            ep = client.Endpoint(base_url, ep_spec.api, served, ep_spec.stream,
                                 int(load.get("max_new_tokens") or 16),
                                 float(min(ep_spec.request_timeout_s, load["timeout_s"])), extra=dict(ep_spec.request),
                                 exact_tokens=ep_spec.exact_tokens)
            payloads = texts(spec["requests"] + load["warmup"], spec["seed"])
            tel["phase"] = "warm-up"
            if load["warmup"]:
                warm = client.run(ep, payloads[: load["warmup"]], "closed", load["concurrency"],
                                  deadline=t_start + spec["timeout_s"])
                _classify(tel, warm, server, state, "warm-up", ep_spec.causes)
                if tel.get("failure_cause"):
                    return tel
            tel["phase"] = "serve"
            meter = Meter()
            meter.start()
            serve0 = contention.snapshot(os.getpid())  # the server is our child: its CPU time is the trial's
            tel["serve_t0"] = serve0.t
            res = client.run(ep, payloads[load["warmup"]:], load["mode"], load["concurrency"], load.get("rate"),
                             spec["seed"], t_start + spec["timeout_s"])
            serve1 = contention.snapshot(os.getpid())
            tel["serve_t1"] = serve1.t
            tel["serve_snapshots"] = [contention.to_json(serve0), contention.to_json(serve1)]
            tel.update(meter.stop())
            tel.update(latency=res.latency, ttft=res.ttft, tpot=res.tpot, completed=res.completed,
                       throughput=res.throughput(), token_throughput=res.token_throughput(), makespan_s=res.makespan)
            if res.itl:
                tel["itl_mean_s"] = sum(res.itl) / len(res.itl)
            _classify(tel, res, server, state, "serve", ep_spec.causes)
            if tel.get("failure_cause"):
                return tel
            if res.timed_out:
                tel.update(failure_cause="timeout",
                           error=f"the serve phase ran past the trial's time-out of {spec['timeout_s']:g} s: "
                                 f"{res.completed} of {spec['requests']} request(s) completed")
                return tel
            if ep_spec.quality == "minilm-cosine":
                tel["phase"] = "quality"
                tel["quality"] = quality(ep, spec["reference"])
        except Exception as exc:  # noqa: BLE001 - a failed trial is a result, never a crash of the sprint
            tel.update(failure_cause="error", error=f"{type(exc).__name__}: {exc}"[:500])
            if server is not None:
                tel["log_tail"] = server.log_tail()
        finally:
            if server is not None:
                st = _proc_status(server.proc.pid)
                if "VmHWM" in st:
                    tel["peak_rss_bytes"] = st["VmHWM"]
                    tel["data_segment_bytes"] = st["VmData"]
                server.stop()
            tel["wall_s"] = time.perf_counter() - t_start
    return tel
