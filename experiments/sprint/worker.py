"""One trial, in its own process: `python -m luma.experiments.sprint.worker SPEC.json OUT.json`.

Order matters. CPU affinity is set before torch is imported (its thread pool sizes itself from
it); `ATEN_CPU_CAPABILITY` is in the environment the parent started us with. After the imports
and a warm-up of torch's thread pool, the data segment in use is the runtime's footprint; the
memory level is what the service may add on top (RLIMIT_DATA = footprint + level), so the level
means the same thing whatever the runtime costs. Then the service loads its artifact, serves
the load, and computes its quality score. Any failure is written to OUT as telemetry (cause
`oom`, `kv-capacity`, `timeout` or `error`), never raised: a trial that fails is a result.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback

from luma.experiments.sprint import contention
from luma.experiments.sprint.procfs import proc_status

_OOM_TEXT = ("can't allocate memory", "cannot allocate memory", "out of memory", "bad_alloc",
             # oneDNN's word for a failed scratch-pad allocation (seen only under RLIMIT_DATA here)
             "could not create a primitive")


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, OSError)) and any(s in text for s in _OOM_TEXT)


def _serve(loadgen, engine, *args):
    try:
        return loadgen.run(engine, *args)
    finally:
        if hasattr(engine, "close"):
            engine.close()  # replicas' threads stop


def threads_of(spec: dict, cores: int) -> int:
    """Torch threads of a trial or a live server: the spec's, else the cores shared out among the
    engine's replicas (one replica: all of them)."""
    return int(spec.get("threads") or max(1, cores // int(spec.get("replicas") or 1)))


def prepare_runtime(spec: dict):
    """The process set-up a trial's worker and a pilot's live server share, in this order: CPU
    affinity (before torch loads: its thread pool sizes itself from it), torch's threads started,
    NumPy's BLAS buffers allocated, then the data segment in use is the runtime's footprint and
    RLIMIT_DATA = footprint + the state's memory level. Returns (service, what was set, as
    telemetry, footprint bytes)."""
    state = spec["state"]
    cores = state.get("compute")
    if cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    # after the CPU affinity: a service module may load torch, whose thread pool sizes itself from it
    from luma.experiments.services import get

    info: dict = {}
    service = get(spec["service"])
    if getattr(service, "uses_torch", True):
        import torch

        torch.set_num_threads(threads_of(spec, cores or len(os.sched_getaffinity(0))))
        # Start torch's worker threads now, so their stacks are part of the footprint, not the level.
        torch.ones(256, 256) @ torch.ones(256, 256)
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        info["threads"] = torch.get_num_threads()
    if spec.get("replicas"):
        info["replicas"] = int(spec["replicas"])
    import numpy as np

    # NumPy's BLAS allocates its per-thread buffers (~32 MiB) on first use: runtime, not service.
    # 256 x 256: OpenBLAS's SkylakeX kernels (AVX-512 hosts) serve small products (64 x 64) by a
    # buffer-free path, so a smaller warm-up left the buffer to the service's first product.
    np.ones((256, 256), np.float32) @ np.ones((256, 256), np.float32)
    info["cores"] = len(os.sched_getaffinity(0))
    foot = proc_status()["VmData"]
    info["runtime_footprint_bytes"] = foot
    limit = state.get("host_memory")
    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (foot + limit, resource.RLIM_INFINITY))
    return service, info, foot


def run(spec: dict) -> dict:
    if spec["service"] == "openai-endpoint":
        # A served engine: the limits go on the server process, not on this load generator.
        from luma.experiments.endpoint.trial import run as run_endpoint  # httpx and the engines: endpoint trials only

        return run_endpoint(spec)
    t_start = time.perf_counter()
    state = spec["state"]
    tel: dict = {"state": state, "variant": spec["variant"], "phase": "imports"}
    service, info, _ = prepare_runtime(spec)
    tel.update(info)
    tel["import_s"] = time.perf_counter() - t_start
    # after prepare_runtime (CPU affinity, RLIMIT_DATA): what these load counts in the trial's runtime
    from luma.experiments.sprint import load as loadgen
    from luma.experiments.energy import Meter  # after prepare_runtime, as above
    from luma.errors import CapacityError  # after prepare_runtime, as above
    from luma.experiments.services.replicas import make_engine  # after prepare_runtime, as above

    load = spec["load"]
    try:
        tel["phase"] = "load"
        t = time.perf_counter()
        loaded = service.load(spec["artifact"], {**state, "variant": spec["variant"]})
        tel["load_s"] = time.perf_counter() - t
        tel["weight_bytes"] = loaded.weight_bytes
        tel.update({k: v for k, v in loaded.extra.items() if isinstance(v, (int, float, str))})
        payloads = service.requests(spec["requests"] + load["warmup"], spec["seed"], load)
        tel["phase"] = "warm-up"
        if load["warmup"]:
            _serve(loadgen, make_engine(loaded, load["max_batch"], spec.get("replicas")), payloads[: load["warmup"]],
                   "closed", load["concurrency"])
        tel["phase"] = "serve"
        deadline = t_start + spec["timeout_s"]
        meter = Meter()
        meter.start()
        # The host's counters as serving starts and ends (file reads, no thread: a sampling thread
        # here would add its stack to the data segment); CLOCK_MONOTONIC is one clock for every process.
        serve0 = contention.snapshot(os.getpid())
        tel["serve_t0"] = serve0.t
        res = _serve(loadgen, make_engine(loaded, load["max_batch"], spec.get("replicas")), payloads[load["warmup"]:],
                     load["mode"], load["concurrency"], load.get("rate"), spec["seed"], deadline)
        serve1 = contention.snapshot(os.getpid())
        tel["serve_t1"] = serve1.t
        tel["serve_snapshots"] = [contention.to_json(serve0), contention.to_json(serve1)]
        tel.update(meter.stop())
        tel.update(latency=res.latency, ttft=res.ttft, tpot=res.tpot, completed=res.completed,
                   throughput=res.throughput(), token_throughput=res.token_throughput(), makespan_s=res.makespan)
        if res.timed_out:
            tel.update(failure_cause="timeout", error=f"the load test ran past its time-out of {spec['timeout_s']:g} s "
                                                         f"({res.completed} of {len(payloads) - load['warmup']} requests done)")
        else:
            tel["phase"] = "quality"
            tel["quality"] = float(service.quality(loaded, spec["artifact"], load))
    except CapacityError as exc:
        tel.update(failure_cause="kv-capacity", error=str(exc))
    except BaseException as exc:  # noqa: BLE001 - every failure is telemetry
        tel.update(failure_cause="oom" if _is_oom(exc) else "error",
                   error=f"{type(exc).__name__}: {exc}"[:500],
                   **({} if _is_oom(exc) else {"traceback": traceback.format_exc()[-2000:]}))
    st = proc_status()
    tel["peak_rss_bytes"] = st["VmHWM"]
    tel["data_segment_bytes"] = st["VmData"]
    tel["wall_s"] = time.perf_counter() - t_start
    return tel


def main(argv: list[str]) -> int:
    spec_path, out_path = argv
    with open(spec_path) as fh:
        spec = json.load(fh)
    tel = run(spec)
    # Lift the limit first: serialising thousands of samples must not be what fails.
    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(tel, fh)
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
