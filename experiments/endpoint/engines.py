"""Real serving engines LUMA installs and drives on this host: llama.cpp's server through
llama-cpp-python (the `engines` extra; pip builds it from its sdist with CMake and a C++
compiler and keeps the wheel in its own cache), and llama.cpp's model converter, which ships only
inside that sdist (`convert_hf_to_gguf.py`, its `conversion/` package and `gguf-py`).

`luma engine install llama.cpp` does both; `luma engine status` says what is there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from luma.errors import ConfigError, LumaError
from luma.settings import engine_cache

LLAMA_CPP_PYTHON = "0.3.36"
#: The `engines` extra (pyproject.toml says the same; a test keeps them equal): llama-cpp-python's
#: server and the versions of its server dependencies measured here.
ENGINE_PINS = (f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON}", "uvicorn==0.55.0", "fastapi==0.165.0",
               "sse-starlette==3.7.1", "starlette-context==0.3.6", "pydantic-settings==2.16.3", "diskcache==5.6.3")
#: What the sdist holds of llama.cpp's converter (relative to its vendor/llama.cpp/).
CONVERTER_PARTS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/", "LICENSE")


def cache_dir() -> Path:
    """Where engine sources and the converter are kept (LUMA_ENGINE_CACHE, else ~/.cache/luma/engines)."""
    return engine_cache()


def converter_dir() -> Path:
    return cache_dir() / f"llama.cpp-converter-{LLAMA_CPP_PYTHON}"


def llama_cpp_version() -> str | None:
    """The installed llama-cpp-python's version (None when it is not installed)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("llama_cpp_python")
    except PackageNotFoundError:
        return None


def converter() -> Path:
    """llama.cpp's `convert_hf_to_gguf.py`; ConfigError naming the command that installs it."""
    path = converter_dir() / "convert_hf_to_gguf.py"
    if not path.is_file():
        raise ConfigError(f"llama.cpp's converter is not installed ({path} is missing): run "
                          f"`luma engine install llama.cpp`", field="engine")
    return path


def _pip(*args: str, log=None) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        tail = (done.stdout or "").strip().splitlines()[-3:]
        raise LumaError(f"pip {args[0]} failed (exit {done.returncode}): {' | '.join(tail)[:400]}")


def extract_converter(sdist: Path, dest: Path) -> Path:
    """Copy the converter's parts out of the llama-cpp-python sdist into `dest` (atomically:
    written aside, then renamed)."""
    tmp = dest.with_name(dest.name + f".{os.getpid()}.tmp")
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            parts = m.name.split("/", 3)
            if len(parts) < 4 or parts[1:3] != ["vendor", "llama.cpp"]:
                continue
            rel = parts[3]
            if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in CONVERTER_PARTS):
                if m.isfile() or m.isdir():
                    m.name = rel
                    members.append(m)
        if not any(m.name == "convert_hf_to_gguf.py" for m in members):
            raise LumaError(f"{sdist} holds no vendor/llama.cpp/convert_hf_to_gguf.py")
        tar.extractall(tmp, members=members, filter="data")
    if dest.exists():
        import shutil

        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def install_llama_cpp(progress=print) -> dict:
    """pip-install llama-cpp-python[server] (built from its sdist; pip caches the wheel) and
    extract the converter from the same sdist. Returns what was installed, and where."""
    cache = cache_dir()
    sdists = cache / "sdist"
    sdists.mkdir(parents=True, exist_ok=True)
    if llama_cpp_version() != LLAMA_CPP_PYTHON:
        progress(f"building and installing llama-cpp-python {LLAMA_CPP_PYTHON} (several minutes the first time)")
        _pip("install", *ENGINE_PINS)
    sdist = sdists / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not sdist.is_file():
        progress("downloading the llama-cpp-python sdist (for llama.cpp's converter)")
        _pip("download", "--no-deps", "--no-binary", ":all:", "-d", str(sdists), f"llama-cpp-python=={LLAMA_CPP_PYTHON}")
    if not (converter_dir() / "convert_hf_to_gguf.py").is_file():
        progress(f"extracting llama.cpp's converter into {converter_dir()}")
        extract_converter(sdist, converter_dir())
    return status()


def status() -> dict:
    """What this environment has of the llama.cpp engine."""
    conv = converter_dir() / "convert_hf_to_gguf.py"
    return {"engine": "llama.cpp", "llama_cpp_python": llama_cpp_version() or "not installed",
            "converter": str(conv) if conv.is_file() else "not installed", "cache": str(cache_dir())}
