"""Calibration: fit the model's efficiency figures to trials measured on this host, and record
how far its predictions are from what was measured.

For each contract a short design of trials runs on this host (`trials`: each variant the
contract names at its load and at a single client, three rounds). Per service it fits:

* memory: need = slope × (weights + activations [+ KV pool]) + overhead, to the measured peak data
  segment above the runtime; the runtime's resident memory = median(peak RSS − need);
* time: p50 = steps × step overhead (one per variant) + roofline(efficiency = 1) / efficiency, by
  non-negative least squares on relative error over p50 latency (decoder: p50 time to first token
  and per output token);
* tails (p95/p50 per kind), quality and weight bytes per variant as measured;
* then, where the ledger holds sprint trials at `host_memory` levels (pex-trial records), the
  memory overhead is raised until no level that ran out of memory is predicted to pass: a limit
  fails a little above the peak the probe sees (an allocation that no longer fits fails whole).

The error per metric is reported in-sample and held out (each trial predicted by a fit without
it). The pex-trial records of past sprints in the ledger are predicted too: how many of their
verdicts the model gets right. The calibration is saved as `$LUMA_HOME/model/calibration.json`;
its error figures are ingested as facts (a Turtle document, evidence class `simulated`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from luma.experiments.model import facts, services, trials as trials_mod

FILE = Path("model") / "calibration.json"
METRICS = ("peak_rss", "memory_need", "p50_latency", "p50_ttft", "p50_tpot")


def path(home: Path) -> Path:
    return Path(home) / FILE


def load(home: Path) -> dict | None:
    """The saved calibration of this project, or None."""
    p = path(home)
    return json.loads(p.read_text()) if p.is_file() else None


def _arrays(svc, rows: list[dict]) -> dict:
    return {"variant": np.array([svc.variants.index(r["variant"]) for r in rows]),
            "compute": np.array([float(r["compute"]) for r in rows]), "host_memory": np.nan, "kv_cache": np.nan,
            "concurrency": np.array([float(r["concurrency"]) for r in rows]),
            "max_batch": np.array([float(r["max_batch"]) for r in rows]),
            "context": np.array([float(r.get("context") or (128 if svc.name == "embedding" else 64)) for r in rows]),
            "new_tokens": np.array([float(r.get("max_new_tokens") or 32) for r in rows]), "rate": np.nan}


def _with(p: services.ServiceParams, **kw) -> services.ServiceParams:
    return services.ServiceParams(**{**asdict(p), **kw})


def fit(service: str, rows: list[dict], host: dict, base: services.ServiceParams | None = None) -> services.ServiceParams:
    svc = services.get(service)
    rows = [r for r in rows if not r.get("failure_cause")]
    p = base or svc.params(None)
    p = _with(p, quality={**p.quality, **_median_by(rows, "quality")},
              weight_bytes={**p.weight_bytes, **_median_by(rows, "weight_bytes")},
              tokens=next((r["tokens"] for r in rows if r.get("tokens")), p.tokens))
    s = _arrays(svc, rows)
    kinds = ("ttft", "tpot") if svc.generative else ("latency",)
    overhead, per_request, eff, bw_eff = _fit_time(svc, p, rows, host, kinds)
    # Memory: need = slope * x + overhead.
    x = services.evaluate(svc, _with(p, memory_slope=1.0, memory_overhead=0.0), host, s)["memory_need"]
    got = [(float(x[i]), r["memory_need"], r.get("peak_rss")) for i, r in enumerate(rows) if r.get("memory_need")]
    slope, over = p.memory_slope, p.memory_overhead
    if got:
        xs, ys = np.array([g[0] for g in got]), np.array([g[1] for g in got])
        slope = 1.0
        if len(got) > 2 and np.ptp(xs) > 0.1 * xs.mean():
            slope = float(np.clip(np.polyfit(xs, ys, 1)[0], 0.5, 2.0))
        over = float(np.median(ys - slope * xs))
    rss = [g[2] - (slope * g[0] + over) for g in got if g[2]]
    tails = {}
    for k in kinds:
        ratios = [r[f"p95_{k}"] / r[f"p50_{k}"] for r in rows if r.get(f"p50_{k}") and r["concurrency"] > 1]
        ratios = ratios or [r[f"p95_{k}"] / r[f"p50_{k}"] for r in rows if r.get(f"p50_{k}")]
        if ratios:
            tails[k] = float(np.median(ratios))
    if svc.generative and "tpot" in tails:
        tails["latency"] = tails["tpot"]
    return _with(p, step_overhead=overhead.get("fp32", p.step_overhead), overhead=overhead, request_overhead=per_request,
                 efficiency=eff, bandwidth_efficiency=bw_eff, memory_slope=slope,
                 memory_overhead=over, rss_runtime=float(np.median(rss)) if rss else p.rss_runtime,
                 tail={**p.tail, **tails}, calibrated=True)


#: Ratios of compute to bandwidth efficiency tried by the fit (a log grid; the rest is linear),
#: nearest 1 first: when the data cannot tell them apart, the two efficiencies stay equal.
RATIOS = sorted(np.geomspace(1 / 32, 32, 31), key=lambda r: abs(np.log(r)))


def _fit_time(svc, p, rows, host, kinds):
    """(overhead per variant, per-request overhead, compute efficiency, bandwidth efficiency).

    value = steps × t0[variant] (+ sequences × per-sequence overhead, decoder only: Python
    bookkeeping per running sequence) + max(FLOP term / e_c, byte term / e_b). For each ratio
    e_c / e_b on a log grid the rest is a non-negative least-squares problem in relative error;
    the best ratio wins."""
    from scipy.optimize import nnls

    s = _arrays(svc, rows)
    n = len(rows)
    base = _with(p, overhead={}, request_overhead=0.0)
    steps = services.evaluate(svc, _with(base, step_overhead=1.0, efficiency=1e12, bandwidth_efficiency=1e12), host, s)
    per_seq = services.evaluate(svc, _with(base, step_overhead=0.0, request_overhead=1.0, efficiency=1e12,
                                           bandwidth_efficiency=1e12), host, s)
    variants = sorted({r["variant"] for r in rows})
    eqs = [(i, k) for k in kinds for i, r in enumerate(rows) if r.get(f"p50_{k}")]
    if not eqs:
        return dict(p.overhead), p.request_overhead, p.efficiency, p.bandwidth_efficiency
    best = None
    for ratio in RATIOS:
        roof = services.evaluate(svc, _with(base, step_overhead=0.0, efficiency=1.0, bandwidth_efficiency=1 / ratio),
                                 host, s)
        A = []
        for i, k in eqs:
            meas = rows[i][f"p50_{k}"]
            col = [np.broadcast_to(steps[k], (n,))[i] / meas if rows[i]["variant"] == v else 0.0 for v in variants]
            if svc.generative:
                col.append(np.broadcast_to(per_seq[k], (n,))[i] / meas)
            A.append(col + [np.broadcast_to(roof[k], (n,))[i] / meas])
        sol, res = nnls(np.array(A), np.ones(len(eqs)))
        if best is None or res < best[0] * (1 - 1e-6) - 1e-12:
            best = (res, ratio, sol)
    _, ratio, sol = best
    overhead = {**p.overhead, **{v: float(t) for v, t in zip(variants, sol)}}
    per_request = float(sol[len(variants)]) if svc.generative else 0.0
    eff = float(1.0 / max(sol[-1], 1e-12))
    return overhead, per_request, eff, float(eff / ratio)


def _median_by(rows, key) -> dict:
    out = {}
    for v in {r["variant"] for r in rows}:
        xs = [r[key] for r in rows if r["variant"] == v and r.get(key) is not None]
        if xs:
            out[v] = float(statistics.median(xs))
    return out


def predict_rows(service: str, p: services.ServiceParams, host: dict, rows: list[dict]) -> list[dict]:
    svc = services.get(service)
    m = services.evaluate(svc, p, host, _arrays(svc, rows))
    n = len(rows)
    out = []
    for i in range(n):
        pred = {"peak_rss": m["peak_rss"], "memory_need": m["memory_need"], "p50_latency": m["latency"]}
        if svc.generative:
            pred.update(p50_ttft=m["ttft"], p50_tpot=m["tpot"])
        out.append({k: float(np.broadcast_to(v, (n,))[i]) for k, v in pred.items()})
    return out


def errors(service: str, rows: list[dict], host: dict) -> dict:
    """Relative error per metric: in-sample (one fit on every trial) and held out (leave one out)."""
    rows = [r for r in rows if not r.get("failure_cause")]
    p = fit(service, rows, host)
    fitted = predict_rows(service, p, host, rows)
    held = [predict_rows(service, fit(service, rows[:i] + rows[i + 1:], host), host, [r])[0] if len(rows) > 2 else None
            for i, r in enumerate(rows)]
    out = {}
    for metric in METRICS:
        ins = [abs(f[metric] - r[metric]) / r[metric] for f, r in zip(fitted, rows) if r.get(metric)]
        ho = [abs(h[metric] - r[metric]) / r[metric] for h, r in zip(held, rows) if h and r.get(metric)]
        # The contract's own load (its concurrency; every variant): what its verdicts hinge on.
        own = [e for e, r in zip(ins, [r for r in rows if r.get(metric)]) if r.get("contract_load")]
        if ins:
            out[metric] = {"n": len(ins), "median": float(np.median(ins)), "max": float(np.max(ins)),
                           "held_out_median": float(np.median(ho)) if ho else None,
                           "held_out_max": float(np.max(ho)) if ho else None,
                           "contract_load_max": float(np.max(own)) if own else None}
    return out


def validate(service: str, p: services.ServiceParams, host: dict, rows: list[dict]) -> dict:
    """Error of an earlier calibration's predictions on new trials (median, max per metric)."""
    rows = [r for r in rows if not r.get("failure_cause")]
    pred = predict_rows(service, p, host, rows)
    out = {}
    for metric in METRICS:
        e = [abs(f[metric] - r[metric]) / r[metric] for f, r in zip(pred, rows) if r.get(metric)]
        if e:
            out[metric] = {"n": len(e), "median": float(np.median(e)), "max": float(np.max(e))}
    return out


def _by_metric(e: dict) -> dict:
    """The error judge.py widens margins by: the held-out maximum (in-sample when too few trials)."""
    out = {}
    for kind, metric in (("memory", "memory_need"), ("latency", "p50_latency"), ("ttft", "p50_ttft"),
                         ("tpot", "p50_tpot")):
        got = e.get(metric) or {}
        value = got.get("held_out_max") if got.get("held_out_max") is not None else got.get("max")
        if value is not None:
            out[kind] = value
    return out


def calibrate(contracts: list, project, *, trials: list[dict] | None = None, progress=lambda m: None,
              host: dict | None = None, repeats: int = 3) -> dict:
    """Run (or take) the calibration trials of `contracts`, fit every service, measure the errors;
    return the calibration (also written to `$LUMA_HOME/model/calibration.json`). A previous
    calibration predicts the new trials first: its error on them is the model's error on trials
    it has never seen, a while later on the same shared host (`validation`)."""
    home = project.home
    previous = load(home)
    host = host or trials_mod.measure_host()
    progress(f"host: {host['flops_per_core'] / 1e9:.1f} GFLOP/s and {host['bandwidth_per_core'] / 1e9:.1f} GB/s per core")
    rows = list(trials or [])
    if trials is None:
        for c in contracts:
            rows += trials_mod.run_trials(c, Path(home) / "artifacts", progress, repeats)
    cal = {"version": 1, "created": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
           "evidence_class": "simulated", "host": host, "services": {}, "errors": {}, "errors_by_metric": {}, "validation": {},
           "previous": previous.get("created") if previous else None,
           "trials": rows}
    for service in sorted({r["service"] for r in rows}):
        mine = [r for r in rows if r["service"] == service]
        p = fit(service, mine, host)
        cal["services"][service] = {k: v for k, v in asdict(p).items() if k != "calibrated"}
        margin = facts.limit_margin(project, service, {"services": cal["services"], "host": host})
        if margin:
            cal["services"][service]["limit_margin"] = margin["bytes"]
            cal.setdefault("limit_margins", {})[service] = margin
        for c in sorted({r["contract"] for r in mine}):
            cal["errors"][c] = errors(service, [r for r in mine if r["contract"] == c], host)
        cal["errors_by_metric"][service] = _by_metric(errors(service, mine, host))
        if previous and service in (previous.get("services") or {}):
            old = services.params_from({**previous["services"][service], "calibrated": True})
            for c in sorted({r["contract"] for r in mine}):
                cal["validation"][c] = validate(service, old, previous["host"], [r for r in mine if r["contract"] == c])
    out = path(home)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=1))
    return cal
