"""What LUMA knows of MLPerf Inference benchmarks and accelerators beyond what a result's files say.

A benchmark's latency bounds are read from its summary (`ttft_latency (ns)`, `tpot_latency (ns)`,
`target_latency (ns)` under "Test Parameters Used"); the percentile they hold at is not printed
there, so it comes from loadgen's mlperf.conf (`*.Server.target_latency_percentile = 99`), and
when a summary lacks a bound the published rules table gives it. Accelerator names map to the
shipped vendor-claim catalogue (experiments/machines/) so an imported system carries datasheet
figures, each naming the catalogue entry it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The documents the figures below transcribe.
RULES_URL = "https://github.com/mlcommons/inference_policies/blob/master/inference_rules.adoc"
CONF_URL = "https://github.com/mlcommons/inference/blob/master/loadgen/mlperf.conf"
SERVER_PERCENTILE = 99  # mlperf.conf: *.Server.target_latency_percentile = 99


@dataclass(frozen=True)
class Benchmark:
    """One benchmark family (accuracy variants such as -99 / -99.9 share it)."""

    model: str  # the reference model, as the rules name it
    task: str
    llm: bool  # token latencies (TTFT, TPOT) rather than a whole query's latency
    #: Server bounds from the rules table, seconds: (ttft, tpot) for an LLM, (latency,) otherwise.
    server_bounds: tuple[float, ...] = ()
    preset: str | None = None  # the LLM model's preset (experiments/model/llm.py), when it has one


BENCHMARKS: dict[str, Benchmark] = {
    "llama2-70b": Benchmark("Llama-2-70b-chat-hf", "text generation (OpenOrca)", True, (2.0, 0.2), "llama-2-70b"),
    "llama2-70b-interactive": Benchmark("Llama-2-70b-chat-hf", "text generation (OpenOrca), interactive", True,
                                        (0.45, 0.04), "llama-2-70b"),
    "mixtral-8x7b": Benchmark("Mixtral-8x7B-Instruct-v0.1", "text generation (OpenOrca, GSM8K, MBXP)", True,
                              (2.0, 0.2)),
    "llama3.1-405b": Benchmark("Llama-3.1-405B-Instruct", "long-context text generation", True, (6.0, 0.175)),
    "gptj": Benchmark("GPT-J 6B", "summarization (CNN-DailyMail)", False, (20.0,)),
    "resnet50": Benchmark("ResNet-50 v1.5", "image classification (ImageNet)", False, (0.015,)),
    "retinanet": Benchmark("RetinaNet", "object detection (OpenImages)", False, (0.1,)),
    "bert": Benchmark("BERT-large", "question answering (SQuAD v1.1)", False, (0.13,)),
    "dlrm-v2": Benchmark("DLRM v2", "recommendation (Criteo 4TB)", False, (0.06,)),
    "3d-unet": Benchmark("3D U-Net", "medical image segmentation (KiTS19)", False),
    "stable-diffusion-xl": Benchmark("Stable Diffusion XL", "text to image (COCO 2014)", False, (20.0,)),
}
_VARIANT = re.compile(r"-(99|99\.9)$")


def benchmark(name: str) -> Benchmark | None:
    """The benchmark family of a results folder name (`llama2-70b-99.9` -> llama2-70b); None when
    LUMA does not know it."""
    return BENCHMARKS.get(_VARIANT.sub("", name))


#: accelerator_model_name patterns -> the shipped catalogue entry with that device's datasheet.
CATALOGUE = (
    (re.compile(r"\bB200\b", re.I), "nvidia-b200-sxm-180gb"),
    (re.compile(r"\bH200[- ]SXM", re.I), "nvidia-h200-sxm-141gb"),
    (re.compile(r"\bH100[- ]SXM", re.I), "nvidia-h100-sxm5-80gb"),
    (re.compile(r"\bA100[- ]SXM", re.I), "nvidia-a100-sxm4-80gb"),
    (re.compile(r"\bMI300X\b", re.I), "amd-instinct-mi300x"),
)
#: CPU-only systems: host_processor_model_name patterns -> catalogue entry.
CPU_CATALOGUE = (
    (re.compile(r"EPYC\s*9654", re.I), "amd-epyc-9654"),
    (re.compile(r"Platinum\s*8480\+?", re.I), "intel-xeon-platinum-8480p"),
)


def catalogue_name(accelerator: str, table=CATALOGUE) -> str | None:
    """The catalogue entry of an accelerator (or CPU) model name, None when it has none."""
    for pattern, name in table:
        if pattern.search(accelerator):
            return name
    return None


def vendor(model_name: str) -> str:
    """The vendor a model name starts with or names (NVIDIA, AMD, Intel ...)."""
    for v in ("NVIDIA", "AMD", "Intel", "Google", "Qualcomm", "Habana", "Untether"):
        if v.lower() in model_name.lower():
            return "Intel" if v == "Habana" else v
    return model_name.split()[0] if model_name.split() else "unknown"
