"""Real serving engines LUMA installs and drives on this host: llama.cpp's server through
llama-cpp-python (the `engines` extra; pip builds it from its sdist with CMake and a C++
compiler and keeps the wheel in its own cache), and llama.cpp's model converter, which ships only
inside that sdist (`convert_hf_to_gguf.py`, its `conversion/` package and `gguf-py`): one
download of the sdist serves both.

`luma engine install llama.cpp` does both; `luma engine status` says what is there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
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


#: How pip is run (a test puts a fake in its place).
PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check")


#: Seconds between two "still running" lines of a long pip step.
HEARTBEAT_S = 60.0


def _pip(*args: str, log: Path, progress=None) -> None:
    """Run pip with its output appended to `log`, saying every HEARTBEAT_S through `progress` that
    it still runs; LumaError with pip's last lines when it fails."""
    t = time.monotonic()
    with log.open("a") as fh:
        fh.write(f"\n$ pip {' '.join(args)}\n")
        fh.flush()
        proc = subprocess.Popen([*PIP, *args], stdout=fh, stderr=subprocess.STDOUT)
        while True:
            try:
                code = proc.wait(HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                if progress:
                    progress(f"      … still running, {_elapsed(time.monotonic() - t)} so far")
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise LumaError(f"pip {args[0]} failed (exit {code}): {' | '.join(tail)[:400]} (whole output: {log})")


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


def sdist_path() -> Path:
    """Where the llama-cpp-python sdist is kept: the build's source and the converter's."""
    return cache_dir() / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"


def install_llama_cpp(progress=print) -> dict:
    """Install llama.cpp in three steps, each skipped when its result is there, each said through
    `progress` with its elapsed time (pip's own output goes to `install-llama.cpp.log` in the cache):

    1. download the llama-cpp-python sdist, and only it (`--no-binary` for that package alone: its
       build backend comes as a wheel, never built from source) — seconds;
    2. build and install llama-cpp-python[server] from that very file, with the `engines` pins —
       minutes the first time; pip keeps the built wheel in its cache;
    3. extract llama.cpp's converter from the same file — a second.
    """
    sdist, log = sdist_path(), cache_dir() / "install-llama.cpp.log"
    sdist.parent.mkdir(parents=True, exist_ok=True)
    installed = llama_cpp_version() == LLAMA_CPP_PYTHON
    extracted = (converter_dir() / "convert_hf_to_gguf.py").is_file()
    steps = [  # (what, what else to know while it runs, done already, the step)
        (f"download the llama-cpp-python {LLAMA_CPP_PYTHON} sdist", f"into {sdist.parent}",
         sdist.is_file() or (installed and extracted), lambda: _download(sdist, log, progress)),
        (f"build and install llama-cpp-python[server] {LLAMA_CPP_PYTHON} from it",
         f"CMake and g++, minutes the first time; pip's output: {log}", installed,
         lambda: _pip("install", f"llama-cpp-python[server] @ {sdist.resolve().as_uri()}", *ENGINE_PINS[1:],
                      log=log, progress=progress)),
        ("extract llama.cpp's converter from it", f"into {converter_dir()}", extracted,
         lambda: extract_converter(sdist, converter_dir())),
    ]
    for n, (what, note, done, step) in enumerate(steps, 1):
        if done:
            progress(f"[{n}/{len(steps)}] {what}: already done")
            continue
        progress(f"[{n}/{len(steps)}] {what} ({note}) …")
        t = time.monotonic()
        step()
        progress(f"[{n}/{len(steps)}] done in {_elapsed(time.monotonic() - t)}")
    return status()


def _download(sdist: Path, log: Path, progress) -> None:
    """The sdist alone into its folder: `--no-binary` for llama-cpp-python only, so pip takes its
    build backend (scikit-build-core, needed to read the sdist's metadata) as a wheel instead of
    building it and its own build dependencies from source, as `--no-binary :all:` did."""
    _pip("download", "--no-deps", "--no-binary", "llama-cpp-python", "-d", str(sdist.parent),
         f"llama-cpp-python=={LLAMA_CPP_PYTHON}", log=log, progress=progress)
    if not sdist.is_file():  # an index that spells the file llama-cpp-python-X.tar.gz
        found = sorted(sdist.parent.glob(f"llama[-_]cpp[-_]python-{LLAMA_CPP_PYTHON}.tar.gz"))
        if not found:
            raise LumaError(f"pip download left no llama-cpp-python {LLAMA_CPP_PYTHON} sdist in {sdist.parent} "
                            f"(whole output: {log})")
        os.replace(found[0], sdist)


def _elapsed(seconds: float) -> str:
    """4.2 s, 4 min 52 s."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def status() -> dict:
    """What this environment has of the llama.cpp engine."""
    conv = converter_dir() / "convert_hf_to_gguf.py"
    return {"engine": "llama.cpp", "llama_cpp_python": llama_cpp_version() or "not installed",
            "converter": str(conv) if conv.is_file() else "not installed", "cache": str(cache_dir())}
