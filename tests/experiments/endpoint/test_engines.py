"""Engine installation pieces that run without a network or a build: the `engines` extra matches
what `luma engine install` pins, the converter is extracted from an sdist (and nothing else of
it), a missing converter names the command that installs it, and `install_llama_cpp`'s steps
driven through a fake pip (one download, of the sdist alone, reused by the build and the
converter; each step said with its time)."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.errors import ConfigError, LumaError
from luma.experiments.endpoint import engines, gguf

ROOT = Path(__file__).resolve().parents[3]


def test_the_engines_extra_is_what_engine_install_pins():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert tuple(extras["engines"]) == engines.ENGINE_PINS


def _sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_converter_is_extracted_from_the_sdist_and_nothing_else(tmp_path):
    root = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
    sdist = _sdist(tmp_path / "s.tar.gz", {
        root + "convert_hf_to_gguf.py": b"print('convert')", root + "conversion/bert.py": b"x = 1",
        root + "gguf-py/gguf/__init__.py": b"", root + "LICENSE": b"MIT", root + "ggml/src/ggml.c": b"int x;",
        "llama_cpp_python-0.3.36/llama_cpp/llama.py": b"", root + "../../evil.py": b"no"})
    dest = engines.extract_converter(sdist, tmp_path / "conv")
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["LICENSE", "conversion/bert.py", "convert_hf_to_gguf.py", "gguf-py/gguf/__init__.py"]


def test_an_sdist_without_the_converter_is_refused(tmp_path):
    sdist = _sdist(tmp_path / "s.tar.gz", {"llama_cpp_python-0.3.36/README.md": b"hi"})
    with pytest.raises(LumaError, match="holds no vendor/llama.cpp/convert_hf_to_gguf.py"):
        engines.extract_converter(sdist, tmp_path / "conv")
    assert not (tmp_path / "conv").exists()


def test_a_missing_converter_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="luma engine install llama.cpp"):
        gguf.convert("minilm", "q8_0", tmp_path / "x.gguf")
    with pytest.raises(ConfigError, match="unknown GGUF type 'q2'"):
        gguf.convert("minilm", "q2", tmp_path / "x.gguf")
    assert gguf.main(["minilm", "q8_0", str(tmp_path / "x.gguf")]) == 1


def test_engine_status_says_what_is_missing(tmp_path, monkeypatch):
    from luma.cli.main import cli

    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    out = CliRunner().invoke(cli, ["engine", "status", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert '"converter": "not installed"' in out.output and str(tmp_path) in out.output


FAKE_PIP = """
import io, json, os, sys, tarfile, time
calls = os.environ["FAKE_PIP_CALLS"]
with open(calls, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
print("pip says hello")
time.sleep(float(os.environ.get("FAKE_PIP_SLEEP", "0")))
if os.environ.get("FAKE_PIP_FAIL"):
    print("ERROR: No matching distribution found for llama-cpp-python==0.3.36")
    sys.exit(1)
if sys.argv[1] == "download":
    folder = sys.argv[sys.argv.index("-d") + 1]
    root = "llama_cpp_python-0.3.36/vendor/llama.cpp/"
    with tarfile.open(os.path.join(folder, os.environ.get("FAKE_PIP_NAME", "llama_cpp_python-0.3.36.tar.gz")), "w:gz") as tar:
        for name in ("convert_hf_to_gguf.py", "LICENSE"):
            info = tarfile.TarInfo(root + name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
"""


@pytest.fixture
def fake_pip(tmp_path, monkeypatch):
    """pip replaced by a script that logs its arguments (returns the calls so far) and, for
    `download`, writes a small sdist with the converter; llama-cpp-python not installed."""
    script, calls = tmp_path / "fake_pip.py", tmp_path / "calls.jsonl"
    script.write_text(FAKE_PIP)
    monkeypatch.setattr(engines, "PIP", (sys.executable, str(script)))
    monkeypatch.setenv("FAKE_PIP_CALLS", str(calls))
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(engines, "llama_cpp_version", lambda: None)
    return lambda: [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def test_install_downloads_the_sdist_alone_once_and_builds_and_extracts_from_it(fake_pip, monkeypatch, tmp_path):
    said = []
    out = engines.install_llama_cpp(progress=said.append)
    download, install = fake_pip()
    # Issue 32: `--no-binary :all:` built the build backend (and its build dependencies) from source.
    assert download[:4] == ["download", "--no-deps", "--no-binary", "llama-cpp-python"] and ":all:" not in download
    sdist = tmp_path / "cache" / "sdist" / "llama_cpp_python-0.3.36.tar.gz"
    assert install[:2] == ["install", f"llama-cpp-python[server] @ {sdist.as_uri()}"]  # the file step 1 fetched
    assert install[2:] == list(engines.ENGINE_PINS[1:])
    assert out["converter"] == str(tmp_path / "cache" / "llama.cpp-converter-0.3.36" / "convert_hf_to_gguf.py")
    assert [line.split(" ", 1)[0] for line in said] == ["[1/3]", "[1/3]", "[2/3]", "[2/3]", "[3/3]", "[3/3]"]
    assert said[0].startswith("[1/3] download the llama-cpp-python 0.3.36 sdist (into ")
    assert "pip's output: " in said[2] and said[1].startswith("[1/3] done in ") and said[1].endswith(" s")
    assert "pip says hello" in (tmp_path / "cache" / "install-llama.cpp.log").read_text()

    monkeypatch.setattr(engines, "llama_cpp_version", lambda: engines.LLAMA_CPP_PYTHON)
    said.clear()
    engines.install_llama_cpp(progress=said.append)
    assert len(fake_pip()) == 2 and all(line.endswith(": already done") for line in said) and len(said) == 3


def test_an_sdist_the_index_spells_with_dashes_is_found(fake_pip, monkeypatch):
    monkeypatch.setenv("FAKE_PIP_NAME", "llama-cpp-python-0.3.36.tar.gz")
    engines.install_llama_cpp(progress=lambda m: None)
    assert engines.sdist_path().is_file() and fake_pip()[1][1].endswith("/llama_cpp_python-0.3.36.tar.gz")


def test_a_failed_pip_step_names_its_output(fake_pip, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    with pytest.raises(LumaError, match=r"pip download failed \(exit 1\): .*No matching distribution.*"
                                        r"install-llama.cpp.log"):
        engines.install_llama_cpp(progress=lambda m: None)
    assert not (tmp_path / "cache" / "llama.cpp-converter-0.3.36").exists()


def test_a_long_step_says_it_still_runs(fake_pip, monkeypatch):
    monkeypatch.setattr(engines, "HEARTBEAT_S", 0.05)
    monkeypatch.setenv("FAKE_PIP_SLEEP", "0.4")
    said = []
    engines.install_llama_cpp(progress=said.append)
    assert any("… still running, " in line and line.endswith(" s so far") for line in said)
