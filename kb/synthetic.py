"""Synthetic PEX-chain records for benchmarks and scale tests (deterministic for a seed).

The mix follows what a fleet of runners would submit: tens of workloads, a handful of
architectures, three to five dimensions per state, mostly measured evidence, and a share of
chains that fail qualification (too few repetitions, no recovery, or a second dimension
changed between PASS and FAIL).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

_ARCHS = [
    ("AMD EPYC 9654 (Zen 4)", "cpu", "AMD"), ("Intel Xeon 8480+ (Sapphire Rapids)", "cpu", "Intel"),
    ("AWS Graviton4 (Neoverse V2)", "cpu", "AWS"), ("NVIDIA H100 SXM", "gpu", "NVIDIA"),
    ("NVIDIA H200", "gpu", "NVIDIA"), ("AMD MI300X", "gpu", "AMD"),
    ("Tenstorrent Wormhole n300", "accelerator", "Tenstorrent"), ("DGX H100 (8x H100)", "system", "NVIDIA"),
]
_TASKS = ["embedding", "classification", "generation", "reranking", "speech-to-text"]
_INTERVENTIONS = [
    ("int8-weights", "software"), ("int8-dynamic-activations", "software"), ("int8-kv-cache", "software"),
    ("kv-cache-compression", "partner"), ("cxl-memory-expander", "hardware"), ("batch-size-tuning", "software"),
]
# dimension -> (unit, levels ordered small to large)
_LEVELS = {
    "compute": ("core", [1, 2, 4, 8, 16, 32, 64]),
    "host_memory": ("GiB", [1, 2, 4, 8, 16, 32, 64, 128]),
    "hbm_capacity": ("GiB", [16, 24, 40, 48, 80, 96, 141, 192]),
    "memory_bandwidth": ("GB/s", [50, 100, 200, 400, 800, 1600, 3350, 4800]),
    "kv_cache": ("block", [64, 128, 256, 512, 1024, 2048]),
    "accelerator_count": ("accelerator", [1, 2, 4, 8]),
    "interconnect": ("GB/s", [25, 50, 100, 450, 900]),
    "power": ("W", [150, 300, 450, 700, 1000]),
}
_EVIDENCE = ["measured"] * 7 + ["simulated", "projected", "vendor-claim"]


def records(n: int, seed: int = 7) -> Iterator[dict]:
    """Yield `n` distinct, valid PEX-chain records."""
    rnd = random.Random(seed)
    workloads = [(f"workload-{i:03d}", f"model-{i % 17:02d}", _TASKS[i % len(_TASKS)]) for i in range(60)]
    contracts = [
        {"name": f"contract-{i:02d}", "clauses": [
            {"metric": "p99_latency", "op": "<=", "value": rnd.choice([50, 100, 200, 500]), "unit": "ms"},
            {"metric": "throughput", "op": ">=", "value": rnd.choice([10, 50, 100]), "unit": "request/s"},
            {"metric": "quality", "op": ">=", "value": rnd.choice([0.98, 0.99, 0.995]), "unit": "dimensionless"},
        ]}
        for i in range(12)
    ]
    dims = list(_LEVELS)
    for i in range(n):
        wl = rnd.choice(workloads)
        arch = rnd.choice(_ARCHS)
        chosen = rnd.sample(dims, rnd.randint(3, 5))
        crossed = chosen[0]
        unit, levels = _LEVELS[crossed]
        k = rnd.randrange(1, len(levels))
        pass_dims = {d: {"value": rnd.choice(_LEVELS[d][1]), "unit": _LEVELS[d][0]} for d in chosen}
        pass_dims[crossed] = {"value": levels[k], "unit": unit}
        fail_dims = {**pass_dims, crossed: {"value": levels[k - 1], "unit": unit}}
        if rnd.random() < 0.1:  # a confounded chain: a second dimension also moved
            other = chosen[1]
            fail_dims[other] = {"value": _LEVELS[other][1][0], "unit": _LEVELS[other][0]}
        binding = crossed if rnd.random() < 0.9 else rnd.choice(chosen)
        iv = rnd.choice(_INTERVENTIONS)
        yield {
            "record_type": "pex-chain",
            "evidence_class": rnd.choice(_EVIDENCE),
            "workload": {"name": wl[0], "model": wl[1], "task": wl[2]},
            "architecture": {"name": arch[0], "kind": arch[1], "vendor": arch[2]},
            "contract": rnd.choice(contracts),
            "pass_state": {"dimensions": pass_dims},
            "fail_state": {"dimensions": fail_dims},
            "crossed_dimension": crossed,
            "binding_resource": binding,
            "intervention": {"name": iv[0], "kind": iv[1]},
            "recovered": rnd.random() < 0.85,
            "repetitions": rnd.randint(1, 6),
            # The run id makes every record distinct, as real runs are.
            "provenance": {"tool": "luma-synthetic", "git_revision": f"run-{seed}-{i}", "host": f"runner-{i % 16:02d}"},
        }


def write_jsonl(path: Path, n: int, seed: int = 7) -> Path:
    """Write `n` records as JSON Lines (the bulk interchange form)."""
    with open(path, "w") as fh:
        for rec in records(n, seed):
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return path
