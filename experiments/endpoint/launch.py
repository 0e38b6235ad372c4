"""Start a serving engine at a machine state, wait until it serves, and stop it.

The state reaches the server through the contract's hooks (`spec.EndpointSpec`): placeholders in
the command, `CUDA_VISIBLE_DEVICES` for the accelerator count, and limits set on the server
process between fork and exec (CPU affinity to the first `compute` cores, RLIMIT_DATA =
`host_memory`: the whole server's data segment, since a foreign engine's own footprint cannot be
measured apart from what it loads). The server runs in the trial worker's process group, so a
worker killed for its time-out takes its server with it. Its output goes to a log file whose
tail explains a failed launch.
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from luma.errors import ConfigError, KVBudgetError, LaunchError
from luma.experiments.endpoint import vllm_cpu
from luma.experiments.endpoint.gpu import memory_per_gpu
from luma.experiments.endpoint.spec import EndpointSpec, placeholders

#: Bytes of the server log kept in a failure's telemetry.
LOG_TAIL = 1500


_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception)\b|terminate called|error:|fatal:).*", re.I | re.M)


def last_error_line(log: str) -> str:
    """The last line of a server log that names an error (a Python exception, a C++ abort), so a
    launch failure's one-line message says why, e.g. "MemoryError: Unable to allocate 59.6 MiB"."""
    found = _ERROR_LINE.findall(log)
    return found[-1].strip()[:200] if found else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cores(state: dict) -> list[int] | None:
    """The cores the server is pinned to: the first `compute` of those the runner may use."""
    cores = state.get("compute")
    return sorted(os.sched_getaffinity(0))[: int(cores)] if cores else None


def values(spec: EndpointSpec, state: dict, model: str, variant: str, port: int, units: dict | None = None) -> dict:
    """What each placeholder holds at `state` (base units: cores, bytes, tokens, watts; `units`
    says which a kv_cache level is in)."""
    out = {"python": sys.executable, "model": model, "variant": variant, "host": "127.0.0.1", "port": port}
    if spec.uses("vllm_python"):
        out["vllm_python"] = str(vllm_cpu.python())
    if state.get("compute"):
        out["threads"] = out["compute"] = int(state["compute"])
        out["cores"] = ",".join(str(c) for c in server_cores(state))
    for dim in ("host_memory", "kv_cache", "accelerator_count", "hbm_capacity", "power"):
        if dim in state:
            out[dim] = state[dim]
    if "kv_cache" in state:
        if (units or {}).get("kv_cache", "byte") == "token":
            out["kv_tokens"] = int(state["kv_cache"])
        elif spec.variants[variant].kv_bytes_per_token:
            per, block = spec.variants[variant].kv_bytes_per_token, spec.kv_token_block
            out["kv_tokens"] = (int(state["kv_cache"] // per) // block - spec.kv_reserved_blocks) * block
            if out["kv_tokens"] < 1:
                # An engine reads 0 as "the model's own window": the state would not be enforced.
                kept = f" beyond the {spec.kv_reserved_blocks} the engine keeps" if spec.kv_reserved_blocks else ""
                raise KVBudgetError(f"a KV cache of {state['kv_cache']} bytes holds no whole block of {block} tokens "
                                    f"at {per:g} bytes per token{kept} ({variant})")
    if "hbm_capacity" in state:
        out["hbm_fraction"] = f"{min(1.0, state['hbm_capacity'] / memory_per_gpu()):.4f}"
    return out


def render(parts: list[str], vals: dict) -> list[str]:
    """The command with its placeholders filled; one a state does not define is a ValueError."""
    try:
        return [p.format_map(vals) for p in parts]
    except KeyError as exc:
        raise ValueError(f"the command uses {{{exc.args[0]}}} but this state has no level for it") from None


def engine_version(spec: EndpointSpec) -> str | None:
    """First line of the engine's version command (None when the contract gives none or it fails)."""
    if not spec.version:
        return None
    try:
        vals = {"python": sys.executable}
        if any("vllm_python" in placeholders(p) for p in spec.version):
            vals["vllm_python"] = str(vllm_cpu.python())
        done = subprocess.run(render(spec.version, vals), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired, ValueError, ConfigError):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0][:200] if done.returncode == 0 and lines else None


@dataclass
class Server:
    """A launched server: its process, base URL, exact command and log."""

    proc: subprocess.Popen
    base_url: str
    command: list[str]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[-LOG_TAIL:].decode(errors="replace").strip()

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the server and every process it started: it runs in a session of its own, so an
        engine's worker processes (vLLM's EngineCore, holding its KV cache or HBM) never outlive
        it into the next trial, where they would hold its memory and read as another tenant."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()
        self._signal(signal.SIGKILL)  # whatever of its session is left

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the session leader's pid is its process group's id
        except (ProcessLookupError, PermissionError):
            pass


def _limits(cores: list[int] | None, data_bytes: int | None):
    def apply():  # in the child, between fork and exec
        if cores:
            os.sched_setaffinity(0, cores)
        if data_bytes:
            resource.setrlimit(resource.RLIMIT_DATA, (int(data_bytes), resource.RLIM_INFINITY))
    return apply


def start(spec: EndpointSpec, state: dict, model: str, variant: str, log: Path, units: dict | None = None) -> Server:
    """Launch the server at `state` and wait until `spec.ready` answers 200; LaunchError (with the
    log's tail) when it exits first or does not answer within `startup_timeout_s`."""
    import httpx

    port = free_port()
    vals = values(spec, state, model, variant, port, units)
    env = {**os.environ, **{k: v.format_map(vals) for k, v in spec.env.items()}}
    env.setdefault("MALLOC_ARENA_MAX", "2")  # as for the trial worker: fewer per-thread arenas
    if "accelerator_count" in state:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(int(state["accelerator_count"])))
    for hook in spec.pre_launch:
        done = subprocess.run(render(hook, vals), capture_output=True, text=True, env=env, timeout=120)
        if done.returncode != 0:
            raise LaunchError(f"pre-launch hook {shlex.join(render(hook, vals))} exited with {done.returncode}",
                              (done.stderr or done.stdout)[-LOG_TAIL:])
    args = list(spec.variants[variant].args)
    command = render(spec.launch, vals) + render(args, vals)
    fh = open(log, "wb")
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True,
                                preexec_fn=_limits(server_cores(state), state.get("host_memory")))
    except OSError as exc:
        raise LaunchError(f"cannot run {command[0]!r}: {exc}", "") from None
    finally:
        fh.close()
    server = Server(proc, f"http://127.0.0.1:{port}", command, log)
    deadline = time.monotonic() + spec.startup_timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            if not server.alive():
                tail = server.log_tail()
                said = last_error_line(tail)
                raise LaunchError(f"the server exited with code {proc.returncode} before it was ready"
                                  + (f": {said}" if said else ""), tail)
            try:
                if client.get(server.base_url + spec.ready).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise LaunchError(f"the server did not answer {spec.ready} within {spec.startup_timeout_s:g} s",
                                  server.log_tail())
            time.sleep(0.1)
