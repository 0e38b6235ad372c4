"""Kernel figures as kernel-result records, ingested through the ledger as measured facts.

Every `luma kernels evaluate|bench` run writes its records (JSON Lines) under
`$LUMA_HOME/results/` — the artifact — and ingests them like any other submission, so they carry
the ledger's provenance and can be rebuilt from it. Each record is signed with the project's
runner key (kb/operations/runner_keys.py), made on first use.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from luma.experiments.host import describe
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import project_signer

_ENV_KEYS = ("cpu_model", "isa", "logical_cpus", "usable_cpus", "machine", "python", "numpy", "torch",
             "torch_cpu_capability", "torch_threads")

def environment_block(env: dict, exclude: tuple[str, ...] = ()) -> dict:
    """The benchmark standard's environment block of a record: known values only, never guessed."""
    return {k: env[k] for k in _ENV_KEYS if k not in exclude and env.get(k) not in (None, [])}


WORKLOADS = {
    "digits": {"name": "digits-mlp", "model": "digits-mlp-64-256-128-10", "task": "classification"},
    "minilm": {"name": "minilm-sentence-embedding", "model": "all-MiniLM-L6-v2", "task": "embedding"},
    "linear": {"name": "linear-layer", "model": "nn.Linear", "task": "matmul"},
    "quantize": {"name": "tensor-quantize", "model": "float32-tensor", "task": "quantize"},
}


def record(workload: dict, method: dict, metrics: list[dict], artifact: str, *, env: dict, repetitions: int = 1,
           warmup: int = 0, limitations: list[str] = (), started: datetime | None = None) -> dict:
    """One kernel-result record (the format of luma.kb.records.kernel_result)."""
    return {
        "record_type": "kernel-result",
        "evidence_class": "measured",
        "environment": environment_block(env),
        "workload": workload,
        "method": {k: v for k, v in method.items() if v is not None},
        "metrics": metrics,
        "repetitions": repetitions,
        "warmup": warmup,
        "artifact": artifact,
        **({"git_revision": env["git_revision"]} if env.get("git_revision") else {}),
        "limitations": list(limitations),
        "started": (started or datetime.now(timezone.utc)).replace(microsecond=0).isoformat(),
    }


def _method(row: dict) -> dict:
    if row["method"] == "fp32":
        return {"name": "fp32-baseline", "kind": "software", "bits": 32}
    return {"name": f"int{row['bits']}-{row['mode']}-{row['granularity']}", "kind": "software", "bits": row["bits"],
            "granularity": row["granularity"], "mode": row["mode"], "backend": row.get("backend")}


def evaluation_records(model: str, rows: list[dict], artifact: str, env: dict | None = None) -> list[dict]:
    """Records of `luma kernels evaluate` rows (digits accuracy or MiniLM cosine similarity)."""
    from luma.kernels import minilm  # torch (~2 s): the records of the digits rows need none of it

    env = env or describe()
    out = []
    for row in rows:
        if model == "digits":
            metrics = [{"metric": "accuracy", "value": row["accuracy"], "unit": "dimensionless"},
                       {"metric": "accuracy_change", "value": row["delta_pp"] / 100, "unit": "dimensionless"}]
            limits = ["one training seed; 450 held-out digits, so accuracy moves in steps of 0.22 points"]
        else:
            metrics = [{"metric": "mean_cosine_to_fp32", "value": row["mean_cosine"], "unit": "dimensionless"},
                       {"metric": "min_cosine_to_fp32", "value": row["min_cosine"], "unit": "dimensionless"},
                       {"metric": "throughput", "value": row["sentences_per_s"], "unit": "1/s"}]
            limits = [f"{len(minilm.SENTENCES)} fixed sentences; throughput is sentences per second on this CPU, "
                      "best of 3"]
        metrics.append({"metric": "weight_memory", "value": row["weight_bytes"], "unit": "B"})
        out.append(record(WORKLOADS[model], _method(row), metrics, artifact, env=env, limitations=limits))
    return out


def bench_records(result: dict, artifact: str) -> list[dict]:
    """Records of `luma kernels bench`: one per quantizer and per (M, Linear implementation)."""
    env = {**result["environment"], "torch_threads": result["threads"]}
    noisy = "shared virtual machine; figures are the minimum of the repeats, the median is beside it"
    out = []
    for row in result["quantize"]:
        metrics = [{"metric": "effective_bandwidth", "value": row["gb_per_s"], "unit": "GB/s"},
                   {"metric": "fraction_of_copy_bandwidth", "value": row["fraction_of_copy"], "unit": "dimensionless"},
                   {"metric": "time_min", "value": row["min_s"], "unit": "s"},
                   {"metric": "time_median", "value": row["median_s"], "unit": "s"}]
        method = {"name": row["case"][:200], "kind": "software", "bits": 8}
        out.append(record({**WORKLOADS["quantize"], "name": f"tensor-quantize-{row['values']}"}, method, metrics,
                          artifact, env=env, repetitions=7, warmup=2, limitations=[noisy]))
    for row in result["linear"]:
        metrics = [{"metric": "speedup_vs_fp32", "value": row["speedup_vs_fp32"], "unit": "dimensionless"},
                   {"metric": "relative_error_vs_fp64", "value": row["rel_error_vs_fp64"], "unit": "dimensionless"},
                   {"metric": "time_min", "value": row["min_s"], "unit": "s"},
                   {"metric": "time_median", "value": row["median_s"], "unit": "s"}]
        workload = {"name": f"linear-m{row['m']}-k{row['k']}-n{row['n']}", "model": "nn.Linear", "task": "matmul"}
        method = {"name": row["case"][:200], "kind": "software"}
        out.append(record(workload, method, metrics, artifact, env=env, repetitions=row.get("repeats", 5),
                          warmup=2, limitations=[noisy]))
    return out


def pareto_records(model: str, study, artifact: str, env: dict | None = None) -> list[dict]:
    """Records of the Pareto front's points (mixed-precision configurations)."""
    env = env or describe()
    out = []
    for p in study.front():
        bits = sorted(set(p.layer_bits.values()))
        method = {"name": f"mixed-precision weight-only bits {'/'.join(map(str, bits))} ({p.label})"[:200],
                  "kind": "software", "bits": min(bits), "granularity": "per-channel", "mode": "weight-only"}
        metrics = [{"metric": study.metric, "value": p.score, "unit": "dimensionless"},
                   {"metric": "weight_memory", "value": p.weight_bytes, "unit": "B"},
                   {"metric": "weight_memory_fp32", "value": study.fp32_bytes, "unit": "B"}]
        out.append(record(WORKLOADS[model], method, metrics, artifact, env=env,
                          limitations=["greedy search guided by calibration-set sensitivities; the front is the "
                                       "non-dominated subset of the configurations it visited, not of all 5^layers"]))
    return out


def save_and_ingest(records: list[dict], kind: str, project):
    """Sign the records with the project's runner key, write them as JSON Lines under
    $LUMA_HOME/results/ and ingest them into `project` (Settings); return (path, IngestReport)."""
    settings = project
    signer = project_signer(settings)  # before the KB opens: a first key is trusted through it
    records = [signer.sign(r, f"luma kernels {kind}: record {i}") for i, r in enumerate(records, 1)]
    folder = settings.home / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{stamp}-{kind}.jsonl"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    with KnowledgeBase.open(settings) as kb:
        return path, kb.ingest([path])
