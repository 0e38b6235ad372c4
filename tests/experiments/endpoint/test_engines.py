"""Engine installation pieces that run without a network or a build: the `engines` extra matches
what `luma engine install` pins, the converter is extracted from an sdist (and nothing else of
it), and a missing converter names the command that installs it."""

from __future__ import annotations

import io
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
