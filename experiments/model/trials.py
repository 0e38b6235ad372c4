"""Calibration trials: a short design per contract, measured on this host in separate processes
(`probe`: the sprint worker's trial with no memory limit, plus the peak data segment), and the
host's own figures (FLOP/s, DRAM and cache bandwidth per core, last-level cache size).

The design, per contract: each variant it names (fp32 and its intervention) at the contract's
load and at a single client; fp32 on every core when the contract's sprint sweeps cores. Each
point runs `repeats` rounds (interleaved, so a burst of load from a neighbour does not hit one
point only); its figures are the median of its rounds, with their spread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from luma.experiments.sprint import states
from luma.experiments.model import probe
from luma.experiments.services import get


def measure_host() -> dict:
    """FLOP/s of one core (fp32 matrix multiply), DRAM and last-level-cache bandwidth of one core
    (copies of 64 MiB and of 2 MiB), measured in a fresh single-threaded process; the LLC size."""
    code = ("import numpy as np,time,json,os\n"
            "a=np.ones((512,512),np.float32);a@a\n"
            "t=time.perf_counter();n=0\n"
            "while time.perf_counter()-t<0.5: a@a;n+=1\n"
            "f=2*512**3*n/(time.perf_counter()-t)\n"
            "x=np.ones(16*2**20,np.float32);y=np.empty_like(x);np.copyto(y,x)\n"
            "t=time.perf_counter();n=0\n"
            "while time.perf_counter()-t<0.5: np.copyto(y,x);n+=1\n"
            "b=2*x.nbytes*n/(time.perf_counter()-t)\n"
            "x=np.ones(2**19,np.float32);y=np.empty_like(x);np.copyto(y,x)\n"
            "t=time.perf_counter();n=0\n"
            "while time.perf_counter()-t<0.3: np.copyto(y,x);n+=1\n"
            "c=2*x.nbytes*n/(time.perf_counter()-t)\n"
            "print(json.dumps({'flops_per_core':f,'bandwidth_per_core':b,'cache_bandwidth_per_core':c,"
            "'cores':len(os.sched_getaffinity(0))}))")
    env = {**os.environ, **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    out = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout)
    out["bandwidth"] = out["bandwidth_per_core"] * out["cores"]
    out["llc_bytes"] = _llc_bytes()
    return out


def _llc_bytes() -> int:
    """Size of the last-level cache (Linux sysfs), 0 when unknown."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            size = (d / "size").read_text().strip()
            value = int(size.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1)
        except (OSError, ValueError):
            continue
        best = max(best, value)
    return best


def design(contract) -> list[dict]:
    """The calibration trials of a contract: {variant, compute, concurrency, max_batch}."""
    svc = get(contract.service)
    variants = ["fp32"]
    if contract.sprint and contract.sprint.intervention:
        variants.append(svc.interventions[contract.sprint.intervention])
    cores = states.base_value("compute", states.parse_level("compute", contract.state.get("compute", "1 core")))
    load = contract.load
    rows = []
    for v in variants:
        rows.append({"variant": v, "compute": cores, "concurrency": load.concurrency, "max_batch": load.max_batch,
                     "contract_load": True})
        if load.concurrency > 1:
            rows.append({"variant": v, "compute": cores, "concurrency": 1, "max_batch": load.max_batch})
    full = len(states.usable_cpus())
    # Every core only where the contract's sprint sweeps cores: elsewhere cores are not the question,
    # and on a shared host a second core's timing says more about its neighbours than the service.
    if full > cores and contract.sprint and contract.sprint.dimension == "compute":
        rows.append({"variant": "fp32", "compute": full, "concurrency": load.concurrency, "max_batch": load.max_batch})
    return rows


def run_trials(contract, cache: Path, progress=lambda m: None, repeats: int = 3) -> list[dict]:
    """Measure the design of `contract`, `repeats` rounds of one probe trial per point (rounds
    interleaved, so a burst of load from a neighbour does not hit one point only); one row per
    point with the median of its rounds and their spread."""
    rounds = [_round(contract, cache, progress, r) for r in range(repeats)]
    return [_median_row(list(same)) for same in zip(*rounds)]


def _median_row(rows: list[dict]) -> dict:
    ok = [r for r in rows if not r.get("failure_cause")] or rows
    out = dict(ok[0])
    for k, v in ok[0].items():
        if isinstance(v, float):
            out[k] = float(np.median([r[k] for r in ok if isinstance(r.get(k), float)]))
    out["repeats"] = len(ok)
    if out.get("p50_latency"):
        xs = [r["p50_latency"] for r in ok]
        out["p50_latency_spread"] = float((max(xs) - min(xs)) / np.median(xs))
    return out


def _round(contract, cache: Path, progress, round_no: int) -> list[dict]:
    svc, out = get(contract.service), []
    tokens = padded_tokens(contract)
    for i, d in enumerate(design(contract)):
        artifact = svc.prepare(d["variant"], cache)
        load = {**contract.load.model_dump(), "concurrency": d["concurrency"], "max_batch": d["max_batch"]}
        state = {"compute": d["compute"]}
        if contract.state.get("runtime"):
            state["runtime"] = states.base_value("runtime", states.parse_level("runtime", contract.state["runtime"]))
        spec = {"service": contract.service, "artifact": str(artifact), "variant": d["variant"], "state": state,
                "load": load, "requests": max(contract.requests_needed() if d["concurrency"] > 1 else 60, 60),
                "seed": 1000 + 100 * round_no + i, "timeout_s": float(contract.load.timeout_s), "threads": None}
        tel = probe.run(spec, contract.load.timeout_s + 60)
        row = measured(contract, d, tel)
        if tokens:
            row["tokens"] = tokens
        progress(f"{contract.name}: {d['variant']} x{d['concurrency']} on {d['compute']} core -> "
                 + (f"p50 {row['p50_latency'] * 1e3:.2f} ms, peak RSS {row['peak_rss'] / 2**20:.1f} MiB"
                    if row.get("p50_latency") else f"failed ({tel.get('failure_cause')})"))
        out.append(row)
    return out


def padded_tokens(contract, sizes=(1, 2, 4, 8, 16, 32)) -> dict | None:
    """Embedding only: the mean length each request is padded to, by batch size, over the
    contract's own request texts (the service's tokenizer, capped at the contract's context)."""
    if contract.service != "embedding":
        return None
    import random

    from luma.experiments.services import minilm_encoder as me  # imports torch
    from luma.experiments.services.embedding import EmbeddingService  # imports torch

    reqs = EmbeddingService().requests(512, 0, contract.load.model_dump())
    tok = me.Tokenizer(me.read_config()["max_seq_length"])
    lengths = [int(tok([r["text"]], [r["context"]])[1].sum()) for r in reqs]
    rng = random.Random(0)
    return {str(b): float(np.mean([max(rng.sample(lengths, b)) for _ in range(200)])) for b in sizes}


def measured(contract, d: dict, tel: dict) -> dict:
    load = contract.load
    row = {"contract": contract.name, "service": contract.service, **d, "context": load.context,
           "max_new_tokens": load.max_new_tokens, "failure_cause": tel.get("failure_cause")}
    for kind in ("latency", "ttft", "tpot"):
        xs = tel.get(kind) or []
        if xs:
            row[f"p50_{kind}"] = float(np.percentile(xs, 50))
            row[f"p95_{kind}"] = float(np.percentile(xs, 95))
    for k, src in (("peak_rss", "peak_rss_bytes"), ("memory_need", "peak_data_bytes"), ("weight_bytes", "weight_bytes"),
                   ("quality", "quality"), ("throughput", "throughput")):
        if isinstance(tel.get(src), (int, float)):
            row[k] = float(tel[src])
    return row


# -- fitting -------------------------------------------------------------------------------
