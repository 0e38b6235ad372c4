"""The GPU recipe (docs/endpoint.md): vLLM on an NVIDIA GPU, HBM through
--gpu-memory-utilization, NVML energy per trial. Skipped without a GPU, NVML and vLLM; without a
GPU the contract is refused before any trial, naming why."""

from __future__ import annotations

import importlib.util

import pytest

from luma.errors import ConfigError
from luma.experiments.sprint import contract, pex as sprint, trial
from luma.experiments.endpoint import gpu
from luma.experiments.services import for_contract

HAS_GPU = gpu.count() > 0
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_the_vllm_contract_loads_and_names_its_hooks():
    c = contract.load("vllm-qwen-hbm")
    assert c.generative and c.endpoint.sets("hbm_capacity") and c.endpoint.sets("accelerator_count")
    assert c.endpoint.interventions == {"fp8-weights": "fp8"}


@pytest.mark.skipif(HAS_GPU, reason="this host has a GPU")
def test_without_a_gpu_the_vllm_sprint_is_refused_before_any_trial():
    with pytest.raises(ConfigError, match="no NVIDIA GPU visible to NVML"):
        sprint.plan(contract.load("vllm-qwen-hbm"))


@pytest.mark.slow
@pytest.mark.skipif(not (HAS_GPU and HAS_VLLM), reason="needs an NVIDIA GPU with NVML and vLLM")
def test_one_vllm_trial_at_the_top_hbm_level_passes_with_nvml_energy(tmp_path):
    c = contract.load("vllm-qwen-hbm")
    c = c.model_copy(update={"load": c.load.model_copy(update={"requests": 128, "warmup": 16})})
    plan = sprint.plan(c)
    svc = for_contract(c)
    t = trial.run_trial(c, plan.state(len(plan.levels) - 1), svc.prepare("bf16", tmp_path), "bf16", "boundary",
                        max_retries=0, service_spec=svc.trial_spec(tmp_path))
    assert t.verdict == "PASS", t.telemetry.get("error")
    assert t.telemetry["energy_j"] > 0 and "NVML" in t.telemetry["energy_source"]
    assert any(o["metric"] == "energy" for o in t.observations())
