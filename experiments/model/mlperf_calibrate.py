"""The LLM serving model calibrated on imported MLPerf results, leave one submitter out.

Each imported vendor-claim trial of an LLM benchmark whose model LUMA has a preset for (llama2-70b)
on a catalogued accelerator becomes one published figure in the format of
`published/llm-serving.json`: the token throughput per device the result states. For each
submitter in turn, the model's engine figures are fitted (llm_calibrate.fit, refined from the shipped
calibration, which no MLPerf result informed) on the shipped published calibration set plus every
other submitter's results, and its relative error is stated on the held-out submitter's: an honest
error for a vendor the fit has not seen.

What the result files do not state is assumed, and each assumption is in the output (ASSUMED):
the precision (fp8 weights and KV cache, as the closed llama2-70b submissions of v4.x quantized),
the tensor parallelism (the fewest devices whose HBM holds the fp8 weights in three quarters of it;
the rest are data-parallel replicas), and the prompt length (the dataset's mean is not in the files).
Output tokens per query are read from the summary: tokens/s divided by samples/s.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from luma.experiments.imports import mlperf_benchmarks as bench
from luma.experiments.imports.mlperf_records import SOURCE_TOOL
from luma.experiments.model import llm_calibrate, llm_config, llm_published
from luma.kb.records.machine_catalog import catalog
from luma.kb.records.pex_trial import PexTrial
from luma.kb.store.ledger_read import payloads_of_kind

FILE = "model/mlperf-calibration.json"
PROMPT_TOKENS = 512
ASSUMED = {
    "precision": "fp8 weights and fp8 KV cache (not in the result files)",
    "tp": "fewest devices (1, 2, 4, 8) whose HBM holds the fp8 weights in 3/4 of it; the others are replicas",
    "context": f"{PROMPT_TOKENS} prompt tokens per query (the OpenOrca subset's mean is not in the result files)",
    "scenario": "Offline -> max-throughput at the KV cache's capacity; Server -> closed-loop at the queries in "
                "flight (samples/s x p50 latency, Little's law)",
}


def trials_from_kb(settings) -> list[PexTrial]:
    """The imported MLPerf trials in the project's ledger (oldest first)."""
    out = []
    for _, payload in payloads_of_kind(settings, "pex-trial"):
        t = PexTrial.model_validate_json(payload)
        if t.provenance.source is not None and t.provenance.source.tool == SOURCE_TOOL:
            out.append(t)
    return out


def _obs(t: PexTrial, metric: str) -> float | None:
    return next((float(o.value) for o in t.observations if o.metric == metric), None)


def _tp(machine: str, count: int, weights: float) -> int:
    hbm = llm_published.machine(machine).memory_capacity("hbm")
    return next((tp for tp in (1, 2, 4, 8) if tp <= count and weights <= 0.75 * hbm * tp), count)


def records(trials: list[PexTrial]) -> list[dict]:
    """The trials the model can describe, as published figures (llm_calibrate's record format)."""
    known = catalog()
    out = []
    for t in trials:
        b = bench.benchmark(t.workload.name)
        dims = t.state.dimensions
        machine = str(dims["accelerator_type"].value) if "accelerator_type" in dims else None
        tokens, samples = _obs(t, "token_throughput"), _obs(t, "throughput")
        if b is None or b.preset is None or machine not in known or not tokens or not samples:
            continue
        cfg = llm_config.PRESETS[b.preset]
        count = int(dims["accelerator_count"].value)
        tp = _tp(machine, count, cfg.weight_bytes("fp8"))
        replicas = max(count // tp, 1)
        server = t.contract.name.endswith("-server")
        p50 = _obs(t, "p50_latency")
        in_flight = samples * p50 * 1e-9 if server and p50 else 4096.0 * count
        src = t.provenance.source
        out.append({"id": src.citation, "source": src.citation.split(",")[0].strip(), "model": b.preset,
                    "machine": machine, "count": tp, "tp": tp, "precision": "fp8", "kv_precision": "fp8",
                    "scenario": "closed-loop" if server else "max-throughput",
                    "concurrency": max(int(round(in_flight / replicas)), 1), "context": PROMPT_TOKENS,
                    "new_tokens": max(int(round(tokens / samples)), 1), "metric": "token_throughput_per_device",
                    "statistic": "value", "value": tokens / count, "unit": "token/s", "set": "calibration"})
    return out


def _summary(errors: list[float]) -> dict:
    a = np.abs(np.array(errors))
    return {"n": len(errors), "median": round(float(np.median(a)), 4), "p90": round(float(np.quantile(a, 0.9)), 4),
            "max": round(float(a.max()), 4), "bias": round(float(np.median(errors)), 4)}


def leave_one_source_out(figures: list[dict], with_published: bool = True) -> dict:
    """Fit on every submitter but one (plus the shipped published calibration set), state the
    relative error on the one held out; the error per held-out submitter and pooled."""
    submitters = sorted({r["source"] for r in figures})
    if len(submitters) < 2:
        raise llm_calibrate.ContractError(
            f"leave-one-source-out needs results of 2 submitters or more, got {len(submitters)} "
            "(import more with `luma import mlperf-results`)", field="submitters")
    doc = llm_published.read_shipped() if with_published else {"records": [], "sources": {}}
    sources = doc["sources"]
    base = [r for r in doc["records"] if not llm_published.held_out(r, sources)]
    # Each fold refines the shipped calibration (the fit on `base` alone, which no MLPerf result
    # informed, so no fold starts from its held-out submitter) instead of six fresh starts: one
    # refinement, ~1/5 of the time.
    start = llm_calibrate.shipped()["fitted"] if with_published else None
    folds, pooled, rows = {}, [], []
    # The folds' fits advance together (llm_calibrate.fit_many): the same figures, one at a time or not.
    fitted = llm_calibrate.fit_many([(base + [r for r in figures if r["source"] != held], sources, None, start)
                                     for held in submitters])
    for held, params in zip(submitters, fitted):
        test = [r for r in figures if r["source"] == held]
        pred = llm_calibrate.predict(test, params, sources)
        errs = [float((p - r["value"]) / r["value"]) for p, r in zip(pred, test)]
        folds[held] = {**_summary(errs), "fitted": params}
        pooled += errs
        rows += [{"id": r["id"], "held_out": held, "machine": r["machine"], "scenario": r["scenario"],
                  "measured": round(r["value"], 2), "predicted": round(float(p), 2), "error": round(e, 4)}
                 for r, p, e in zip(test, pred, errs)]
    return {"version": 1, "kind": "mlperf-loso", "evidence_class": "projected", "metric": "token_throughput_per_device",
            "submitters": submitters, "figures": len(figures), "with_published": with_published,
            "assumed": ASSUMED, "held_out": folds, "pooled": _summary(pooled), "predictions": rows}


def summary_line(cal: dict) -> str:
    p = cal["pooled"]
    return (f"token throughput per device, each submitter held out in turn ({len(cal['submitters'])} submitters, "
            f"{cal['figures']} results): median {p['median']:.0%}, p90 {p['p90']:.0%}, max {p['max']:.0%} relative "
            f"error (bias {p['bias']:+.0%}; + = the model predicts more than the submitter reported)")


def run(home: Path, trials: list[PexTrial], with_published: bool = True) -> dict:
    """Calibrate on `trials`, write `$LUMA_HOME/model/mlperf-calibration.json`, return it."""
    cal = leave_one_source_out(records(trials), with_published)
    out = Path(home) / FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=1) + "\n")
    return cal

