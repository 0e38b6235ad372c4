"""The LLM serving model calibrated on published measurements, and its error on figures it never saw.

`published/llm-serving*.json` (llm_published.py) hold measured figures that vendors, engine
projects and benchmark suites published (vendor-claim evidence: LUMA did not reproduce them), each
with its source and setting, and a frozen split: whole `holdout` sources and every third record
of each (source, metric) of the others are never fitted. Calibration fits the figures a datasheet
cannot give -- the compute and memory-bandwidth efficiency serving reaches, per-step and
per-sequence overheads, the prefill queueing factor, tensor-parallel launch cost, AMD's and Intel's
stack factors -- on the rest (a Huber loss on log ratios, each source and metric weighted alike),
then per engine with enough records its own profile (factors on those figures, its own step
overhead; a ridge keeps a thin engine near the global figures). It states the relative error per
metric on the held-out records and the frozen sources, and, refitting once per source, engine and
machine left out, the error bands every prediction states (llm_error.py). The p95/p50 tails come
from published median and p99 pairs.

The fit is deterministic: `published/llm-calibration.json` is its output on the shipped data
(a slow test recomputes it); `luma model calibrate --llm [--published FILE] [--quick]` refits, with
a user's own published figures added, into `$LUMA_HOME/model/llm-calibration.json`, which then wins.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from luma.errors import ContractError
from luma.experiments.model import hardware, judge, llm, llm_config, llm_error, llm_published, nelder_mead

FILE = "model/llm-calibration.json"
METRICS = llm_published.METRICS
#: What calibration fits: (start, low, high). Efficiencies are shares of the datasheet figures:
#: compute, bandwidth (weight reads), kv_bandwidth (attention's KV reads); step_overhead seconds
#: per engine step, seq_overhead seconds per sequence per step (sampling, bookkeeping);
#: queue_factor scales the prefill queueing wait (bounded at 5: past that the fit explains waits for
#: KV room or a start-up burst, which other terms model, by making every prefill queue absurd);
#: layer_overhead seconds per layer per step (kernel launches); prefill: a factor on the compute
#: efficiency for prompt tokens (large GEMMs, attention over the prompt); low_precision: a factor on
#: it for 8-bit weights (fp8/int8 GEMMs reach their own share of their doubled peak, at most the
#: 16-bit share: 8-bit tensor cores double the peak, not the share of it a GEMM reaches); tp_overhead
#: seconds per all-reduce per doubling of the tensor-parallel group (launch and synchronisation
#: beyond the link); gemm_half: the token rows at which a GEMM reaches half its compute share (M / (M +
#: gemm_half)); amd_* and intel_*:
#: the share of the compute and bandwidth efficiencies AMD's and Intel's software stacks reach
#: (the figures are vendor-neutral otherwise; a factor no record informs is not fitted: it stays 1).
PARAMS = {"compute": (0.6, 0.1, 1.0), "bandwidth": (0.8, 0.2, 1.0), "kv_bandwidth": (0.8, 0.05, 1.0),
          "step_overhead": (2e-3, 0.0, 0.02), "seq_overhead": (0.0, 0.0, 1e-4), "queue_factor": (1.0, 0.0, 5.0),
          "tp_overhead": (0.0, 0.0, 2e-5), "layer_overhead": (0.0, 0.0, 1e-4), "prefill": (1.0, 0.3, 1.5),
          "low_precision": (1.0, 0.3, 1.0), "gemm_half": (64.0, 0.0, 1024.0), "amd_compute": (1.0, 0.2, 1.5),
          "amd_bandwidth": (1.0, 0.2, 1.5), "intel_compute": (1.0, 0.2, 1.5), "intel_bandwidth": (1.0, 0.2, 1.5)}
#: Per engine (second stage, the global figures held): factors on the compute and bandwidth
#: efficiencies and the queueing factor, and its own per-step overhead. Each is pulled toward the
#: global figure (a ridge on the log factor) so an engine with few records stays near it.
ENGINE_PARAMS = {"compute": (1.0, 0.5, 1.6), "bandwidth": (1.0, 0.5, 1.6), "queue": (1.0, 0.2, 3.0),
                 "step_overhead": (2e-3, 0.0, 0.02)}
#: Records an engine needs in the calibration set for its own profile.
ENGINE_MIN_RECORDS = 6
RIDGE = 0.02
#: The log error beyond which a figure's pull on the fit grows linearly, not quadratically (Huber).
HUBER = 0.1
#: Held fixed: the link efficiency (NCCL, see evaluate.py), the runtime's own memory, and the
#: share of the memory left after weights that the engine gives the KV cache (TensorRT-LLM's
#: kv_cache_free_gpu_mem_fraction and vLLM's gpu_memory_utilization default to 0.90).
FIXED = {"interconnect": 0.8, "runtime_memory": 2.0 * 2**30, "kv_fraction": 0.9}
QUANTILE = {"value": None, "mean": None, "median": None, "p90": 0.90, "p95": 0.95, "p99": 0.99}
#: The probability level of a statistic (a mean has none).
LEVEL = {"median": 0.5, "p90": 0.90, "p95": 0.95, "p99": 0.99}
#: Tails used while fitting when the data has no pairs of its own (the shipped figures').
DEFAULT_TAIL = {"ttft": 1.84, "tpot": 1.23, "latency": 1.23}


#: Vendors whose software stack gets its own efficiency factors (NVIDIA's is the reference).
VENDORS = ("amd", "intel")


def shipped_path() -> Path:
    return Path(str(importlib.resources.files("luma.experiments.model.published") / "llm-calibration.json"))


def engine(params: dict, vendors: list[str], engines: list[str | None] | None = None) -> dict:
    """The serve() keys of calibrated engine figures, per state's accelerator vendor and engine
    (an engine without its own profile gets the global figures)."""
    profiles = params.get("engines") or {}
    engines = engines if engines is not None else [None] * len(vendors)
    vc = np.array([params.get(f"{v}_compute", params.get(f"{v}_factor", 1.0)) if v in VENDORS else 1.0 for v in vendors])
    vb = np.array([params.get(f"{v}_bandwidth", params.get(f"{v}_factor", 1.0)) if v in VENDORS else 1.0
                   for v in vendors])
    prof = [profiles.get(e or "", {}) for e in engines]
    ec = np.array([p.get("compute", 1.0) for p in prof]) * vc
    eb = np.array([p.get("bandwidth", 1.0) for p in prof]) * vb
    return {"eff_compute": np.minimum(params["compute"] * ec, 1.0),
            "eff_bandwidth": np.minimum(params["bandwidth"] * eb, 1.0),
            "eff_kv": np.minimum(params.get("kv_bandwidth", params["bandwidth"]) * eb, 1.0),
            "step_overhead": np.array([p.get("step_overhead", params.get("step_overhead", 0.0)) for p in prof]),
            "seq_overhead": params.get("seq_overhead", 0.0), "eff_prefill": params.get("prefill", 1.0),
            "layer_overhead": params.get("layer_overhead", 0.0),
            "eff_low_precision": params.get("low_precision", 1.0), "gemm_half": params.get("gemm_half", 0.0),
            "queue_factor": params.get("queue_factor", 1.0) * np.array([p.get("queue", 1.0) for p in prof]),
            "tp_overhead": params.get("tp_overhead", 0.0)}


def setting(r: dict, sources: dict) -> dict:
    """The serve() keys of a record's setting (engine defaults where the record is silent)."""
    eng = llm_published.engine(r, sources)
    defaults = llm_published.ENGINES.get(eng or "", {"batching": "continuous", "chunk": np.inf})
    batching = r.get("batching") or ("static" if r["scenario"] == "static" else defaults["batching"])
    arrival = {"static": "closed", "closed-loop": "closed", "max-throughput": "offline", "poisson": "poisson"}[r["scenario"]]
    reps = int(r.get("replicas", 1))
    pp = int(r["pp"]) if "pp" in r else r["count"] // (r["tp"] * reps)
    mix = llm_published.mix(r)
    return {"engine": eng, "replicas": float(reps), "pp": float(pp), "ep": float(r.get("ep", r["tp"])),
            "batching": llm.BATCHING[batching], "chunk": float(defaults["chunk"]), "arrival": llm.ARRIVALS[arrival],
            "rate": float(r.get("rate", np.nan)), "burstiness": float(r.get("burstiness", 1.0)),
            "scheduler_steps": float(r.get("scheduler_steps", 1)),
            # The engine's cap on running sequences: the source's own (max_num_seqs) where it states
            # one, else the engine's documented default.
            "max_batch": float(min(r["concurrency"], r.get("max_batch", defaults.get("max_batch", r["concurrency"])))),
            "context": mix.mean_prompt, "context_sq": mix.mean_prompt_sq, "new_tokens": mix.mean_output,
            "load": llm_error.LOADS[int(llm_error.load_code(llm.ARRIVALS[arrival], r["concurrency"]))],
            "batch_class": llm_error.BATCH_CLASSES[int(llm_error.batch_code(llm.BATCHING[batching]))]}


@dataclass
class _Group:
    """Records that share one serve() call: what does not depend on the fitted figures."""

    idx: np.ndarray  # the records' positions in the evaluated list
    cfg: object  # the model's ModelConfig when every record has one model, else their ModelStack
    configs: list  # each record's ModelConfig
    s: dict  # serve() keys of the setting and the machine
    vendors: list
    engines: list
    metric_codes: np.ndarray  # index into METRIC_ORDER
    kind_codes: np.ndarray  # index into KIND_ORDER
    expo: np.ndarray  # the statistic's tail exponent
    scale: np.ndarray  # the record's unit
    latency_g: np.ndarray  # the output length a latency quantile is read at (_output_at)
    open_loop: bool

    @cached_property
    def stack(self) -> llm_config.ModelStack:
        """The records' models as arrays (to join this group's serve() call with others')."""
        return llm_config.ModelStack(self.configs)


#: The figures _evaluate reads from serve(), and the tail kind of each (METRICS).
METRIC_ORDER = ("token_throughput", "token_throughput_per_device", "total_token_throughput", "request_throughput",
                "ttft", "tpot", "latency")
KIND_ORDER = tuple(sorted({kind for kind, *_ in METRICS.values()}))


def _prepare(records: list[dict], sources: dict) -> list[_Group]:
    """The records in two groups, whatever their models: the open-loop records (serve() solves
    their running sequences by eight passes of the model) apart from the others, which need none,
    so a fit's thousands of evaluations call serve() twice, not once per model."""
    every = [setting(r, sources) for r in records]
    open_loop = np.array([x["arrival"] == llm.ARRIVALS["poisson"] for x in every], dtype=bool)
    out = []
    for idx, is_open in ((np.flatnonzero(open_loop), True), (np.flatnonzero(~open_loop), False)):
        if not len(idx):
            continue
        rows = [records[i] for i in idx]
        sets = [every[i] for i in idx]
        figs = [hardware.figures(llm_published.machine(r["machine"]), r["precision"]) for r in rows]
        col = lambda key: np.array([f[key] for f in figs], dtype=np.float64)  # noqa: E731
        num = lambda key: np.array([float(r[key]) for r in rows])  # noqa: E731
        st = lambda key: np.array([x[key] for x in sets], dtype=np.float64)  # noqa: E731
        s = {"weight_bytes": np.array([hardware.PRECISION_BYTES[r["precision"]] for r in rows]),
             "kv_bytes": np.array([hardware.PRECISION_BYTES[r["kv_precision"]] for r in rows]),
             "flops": col("flops"), "capacity": col("capacity"), "bandwidth": col("bandwidth"),
             "interconnect": col("interconnect"), "links": col("links"), "topology": col("topology"),
             "link_latency": col("link_latency"), "power": col("power"), "count": num("count"), "tp": num("tp"),
             "pp": st("pp"), "replicas": st("replicas"), "ep": st("ep"), "concurrency": num("concurrency"),
             "context": st("context"), "context_sq": st("context_sq"), "new_tokens": st("new_tokens"),
             "max_batch": st("max_batch"), "batching": st("batching"), "chunk": st("chunk"),
             "arrival": st("arrival"), "rate": st("rate"), "burstiness": st("burstiness"),
             "scheduler_steps": st("scheduler_steps"),
             "eff_link": FIXED["interconnect"], "runtime_bytes": FIXED["runtime_memory"], "act_bytes": 2.0,
             "kv_fraction": FIXED["kv_fraction"]}
        q = [QUANTILE[r.get("statistic", "value")] for r in rows]
        # A whole request's latency at a quantile, over lengths that vary, is the latency of a
        # request of that quantile's output length: its spread is the lengths' (no tail factor).
        latency_g = np.array([_output_at(r) if r["metric"] == "latency" else np.nan for r in rows])
        expo = np.array([0.0 if x is None or np.isfinite(g) else judge.exponent(x) for x, g in zip(q, latency_g)])
        configs = [llm_config.PRESETS[r["model"]] for r in rows]
        # One model: its config's plain numbers cost less than arrays.
        cfg = configs[0] if all(c is configs[0] for c in configs) else llm_config.ModelStack(configs)
        out.append(_Group(idx, cfg, configs, s, [llm_published.vendor(r["machine"]) for r in rows],
                          [x["engine"] for x in sets], np.array([METRIC_ORDER.index(r["metric"]) for r in rows]),
                          np.array([KIND_ORDER.index(METRICS[r["metric"]][0]) for r in rows]), expo,
                          np.array([llm_published.SCALE[r["unit"]] for r in rows]), latency_g, bool(is_open)))
    return out


def _output_at(r: dict) -> float:
    """The output length at the record's statistic's probability level when its lengths vary
    (NaN for a mean, a plain value, or fixed lengths)."""
    level = LEVEL.get(r.get("statistic", "value"))
    return np.nan if level is None else llm_published.mix(r).latency_output(level)


def _evaluate(prepared: list[_Group], n_records: int, params: dict) -> np.ndarray:
    """The model's figure for each prepared record, in the record's unit, at `params`."""
    return _evaluate_many([(prepared, n_records, params)])[0]


def _evaluate_many(jobs: list[tuple[list[_Group], int, dict]]) -> list[np.ndarray]:
    """_evaluate of many (prepared, n_records, params) at once: every job's open-loop records in one
    serve() call and the others in another (the model is elementwise, so each record gets the very
    figure its own call gives), so parallel Nelder-Mead chains and folds share NumPy's per-call cost."""
    outs = [np.empty(n) for _, n, _ in jobs]
    for open_loop in (True, False):
        parts = [(j, g) for j, (groups, _, _) in enumerate(jobs) for g in groups if g.open_loop == open_loop]
        if not parts:
            continue
        states = [{**g.s, **engine(jobs[j][2], g.vendors, g.engines)} for j, g in parts]
        first = parts[0][1].cfg
        if len(parts) == 1:
            cfg, s = first, states[0]
        else:
            one = isinstance(first, llm_config.ModelConfig) and all(g.cfg is first for _, g in parts)
            cfg = first if one else llm_config.ModelStack.join([g.stack for _, g in parts])
            s = _join(states, [len(g.idx) for _, g in parts])
        m = llm.serve(cfg, s)
        total, at = sum(len(g.idx) for _, g in parts), 0
        for j, g in parts:
            n = len(g.idx)
            rows = {k: _rows(m[k], total)[at:at + n] for k in _SERVED}
            outs[j][g.idx] = _figures(g, rows, jobs[j][2])
            at += n
    return outs


#: What _figures reads from serve().
_SERVED = ("token_throughput", "throughput", "ttft", "wait", "wait_fraction", "tpot", "latency", "running")


def _join(states: list[dict], sizes: list[int]) -> dict:
    """serve() states of several groups as one: a key every group sets to the same number stays a
    number, the others become one array, each group's rows in turn."""
    out = {}
    for k, first in states[0].items():
        values = [st[k] for st in states]
        if all(_scalar(v) for v in values) and all(v == first for v in values[1:]):
            out[k] = first
        else:
            out[k] = np.concatenate([_rows(v, n) for v, n in zip(values, sizes)])
    return out


def _scalar(v) -> bool:
    return not isinstance(v, np.ndarray) or v.ndim == 0


def _rows(v, n: int) -> np.ndarray:
    """`v` as n rows: an array already that long as it is, a number filled (np.broadcast_to costs
    ~10 µs a call, and a fit joins millions)."""
    if isinstance(v, np.ndarray) and v.shape == (n,):
        return v
    return np.full(n, v, dtype=np.float64) if _scalar(v) else np.broadcast_to(np.asarray(v, dtype=np.float64), (n,))


def _figures(g: _Group, m: dict, params: dict) -> np.ndarray:
    """Each record's metric out of the serve() figures `m` of its group's rows, in its unit, its
    statistic's tail applied."""
    s = g.s
    tail = {**DEFAULT_TAIL, **(params.get("_tail") or {})}
    waited = m["ttft"] + m["wait"] * m["wait_fraction"]
    latency = np.where(np.isfinite(g.latency_g), waited + np.maximum(g.latency_g - 1.0, 0.0) * m["tpot"],
                       np.where(s["arrival"] == llm.ARRIVALS["poisson"], m["latency"] + m["wait"] * m["wait_fraction"],
                                np.maximum(m["running"], 1.0) / m["throughput"] * s["replicas"]))
    values = (m["token_throughput"], m["token_throughput"] / s["count"],
              m["throughput"] * (s["context"] + s["new_tokens"]), m["throughput"], waited, m["tpot"], latency)
    shape = (len(g.idx),)
    raw = np.stack([_rows(v, shape[0]) for v in values])[g.metric_codes, np.arange(shape[0])]
    mult = np.array([tail.get(k, 1.0) for k in KIND_ORDER])[g.kind_codes] ** g.expo
    return raw * mult / g.scale


def predict(records: list[dict], params: dict, sources: dict | None = None) -> np.ndarray:
    """The model's figure for each record, in the record's unit, at `params`."""
    return _evaluate(_prepare(records, sources or {}), len(records), params)


def _weights(records: list[dict]) -> np.ndarray:
    """Each (source, metric) group weighs ~ the square root of its size: one long table does not
    drown the others, nor does a two-row one outweigh a forty-row one."""
    sizes: dict[tuple, int] = {}
    for r in records:
        sizes[(r["source"], r["metric"])] = sizes.get((r["source"], r["metric"]), 0) + 1
    return np.array([1.0 / math.sqrt(sizes[(r["source"], r["metric"])]) for r in records])


def _loss(pred: np.ndarray, measured: np.ndarray, weights: np.ndarray) -> float:
    """The weighted Huber loss of the log errors of `pred` against `measured`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log(pred / measured)
    # A figure the model cannot reach (an open loop it predicts past capacity) counts as a miss
    # by a factor e^2, no more: one such figure must not outweigh every other in the fit.
    e = np.abs(np.where(np.isfinite(e), np.clip(e, -2.0, 2.0), 2.0))
    # Huber: beyond a miss of HUBER (log) a figure pulls linearly, so a source the model cannot
    # explain (start-up effects, an untuned stack) does not bend the figures every source shares.
    loss = np.where(e <= HUBER, e * e, 2.0 * HUBER * e - HUBER * HUBER)
    return float(np.sum(weights * loss) / np.sum(weights))


@dataclass
class _Objective:
    """What one Nelder-Mead chain minimises: the loss on its records at the figures a point of the
    unit box stands for, plus a prior on them."""

    prepared: list[_Group]
    measured: np.ndarray
    weights: np.ndarray
    params: object  # unit point -> serve figures (the dict _evaluate takes)
    prior: object = None  # unit point -> the penalty added to the loss

    @classmethod
    def on(cls, records: list[dict], sources: dict, params, prior=None) -> _Objective:
        return cls(_prepare(records, sources), np.array([r["value"] for r in records], dtype=np.float64),
                   _weights(records), params, prior)


def _values(requests: list[tuple[_Objective, np.ndarray]]) -> list[float]:
    """Each (objective, point)'s value, all evaluated together (_evaluate_many)."""
    preds = _evaluate_many([(o.prepared, len(o.measured), o.params(x)) for o, x in requests])
    return [_loss(p, o.measured, o.weights) + (o.prior(x) if o.prior else 0.0) for p, (o, x) in zip(preds, requests)]


def _to_unit(params: dict, table: dict = PARAMS) -> np.ndarray:
    return np.array([(params[k] - lo) / (hi - lo) for k, (_, lo, hi) in table.items()])


def _from_unit(x: np.ndarray, table: dict = PARAMS) -> dict:
    x = np.clip(x, 0.0, 1.0)
    return {k: float(lo + v * (hi - lo)) for v, (k, (_, lo, hi)) in zip(x, table.items())}


def fit(records: list[dict], sources: dict | None = None, tail: dict | None = None, start: dict | None = None) -> dict:
    """The PARAMS that minimise the weighted Huber loss of the log errors on `records` (Nelder-Mead on the
    box-scaled figures from six starts and a polish of the best: deterministic, NumPy only), then
    each engine with ENGINE_MIN_RECORDS records or more its own profile with the global figures
    held. `start` (a fit on more records, for leave-one-out folds): one refinement from it instead."""
    return fit_many([(records, sources, tail, start)])[0]


def fit_many(jobs: list[tuple[list[dict], dict | None, dict | None, dict | None]]) -> list[dict]:
    """fit() of each (records, sources, tail, start), the fits advancing together so that each round
    of every chain of every fit is one evaluation (_evaluate_many): the same figures as one fit at
    a time, in a fraction of the time when the fits are many or their records few."""
    return nelder_mead.drive(nelder_mead.together([_fit_steps(*job) for job in jobs]), _values)


def _fit_steps(records: list[dict], sources: dict | None = None, tail: dict | None = None,
               start: dict | None = None) -> nelder_mead.Steps:
    """fit() as a coroutine: yields the (objective, point) pairs it needs the values of, receives
    them, returns the fitted figures."""
    sources = sources or {}
    extra = {"_tail": tail} if tail else {}
    # A vendor factor no record informs stays at 1 (Nelder-Mead would drift it at no cost).
    seen = {llm_published.vendor(r["machine"]) for r in records}
    fixed = {f"{v}_{k}": 1.0 for v in VENDORS if v not in seen for k in ("compute", "bandwidth")}
    objective = _Objective.on(records, sources, lambda u: {**_from_unit(u), **fixed, **extra})
    # Weight-read efficiency and per-step overhead trade off against each other (both slow a
    # small-batch step), so the surface has more than one basin: start from three bandwidths by
    # two overheads, refine each with Nelder-Mead (restarted from a fresh simplex), keep the best.
    # The starts' chains advance together: one model call a round for all six.
    if start is not None:
        x0 = _to_unit({k: start.get(k, v[0]) for k, v in PARAMS.items()})
        xs = [(yield from nelder_mead.minimise(objective, x0, steps=150, scale=0.05))]
    else:
        xs = yield from nelder_mead.together([
            nelder_mead.restarts(objective, _to_unit({**{k: v[0] for k, v in PARAMS.items()}, "bandwidth": bw,
                                                      "step_overhead": t0}), (0.2, 0.05), steps=250)
            for bw in (0.4, 0.7, 0.95) for t0 in (0.0005, 0.004)])
    values = yield [(objective, x) for x in xs]
    x = np.array(min(zip(values, (tuple(x) for x in xs)))[1])
    if start is None:  # polish the best basin from fresh simplices (Nelder-Mead stalls on ridges)
        x = yield from nelder_mead.restarts(objective, x, (0.1, 0.03), steps=250)
    params = {k: round(v, 6) for k, v in {**_from_unit(x), **fixed}.items()}
    params["engines"] = yield from _engine_profiles(records, sources, params, extra, (start or {}).get("engines") or {})
    return params


def _engine_profiles(records: list[dict], sources: dict, params: dict, extra: dict,
                     start: dict) -> nelder_mead.Steps:
    """Per engine with enough records: factors on the global efficiencies and queueing, and its
    own step overhead, fitted on its records alone with a ridge toward the global figures (a
    coroutine, as _fit_steps: the engines' chains advance together)."""
    by: dict[str, list[dict]] = {}
    for r in records:
        eng = llm_published.engine(r, sources)
        if eng:
            by.setdefault(eng, []).append(r)
    t0 = params["step_overhead"]

    def prior(u):
        prof = _from_unit(u, ENGINE_PARAMS)
        return RIDGE * (sum(math.log(prof[k]) ** 2 for k in ("compute", "bandwidth", "queue")) +
                        ((prof["step_overhead"] - t0) / 3e-3) ** 2)

    chains, names = [], []
    for eng, rows in sorted(by.items()):
        if len(rows) < ENGINE_MIN_RECORDS:
            continue
        objective = _Objective.on(rows, sources, lambda u, eng=eng: {
            **params, **extra, "engines": {eng: _from_unit(u, ENGINE_PARAMS)}}, prior)
        x = _to_unit({"compute": 1.0, "bandwidth": 1.0, "queue": 1.0, "step_overhead": t0, **{
            k: v for k, v in (start.get(eng) or {}).items() if k in ENGINE_PARAMS}}, ENGINE_PARAMS)
        chains.append(nelder_mead.restarts(objective, x, (0.2, 0.05) if eng not in start else (0.05,)))
        names.append((eng, len(rows)))
    found = yield from nelder_mead.together(chains)
    return {eng: {**{k: round(v, 6) for k, v in _from_unit(x, ENGINE_PARAMS).items()}, "records": n}
            for (eng, n), x in zip(names, found)}


def _summary(errors) -> dict:
    a = np.abs(np.asarray(errors, dtype=np.float64))
    return {"n": int(len(a)), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)),
            "max": float(a.max()), "bias": float(np.median(errors))}


def _leave_out(records: list[dict], sources: dict, tail: dict, key, label: str, start: dict) -> tuple[list[dict], dict]:
    """Fit without each group (by `key` of a record) of the calibration records, predict that
    group's records: rows of (id, group, kind, class, error) and a summary per group."""
    cal = [r for r in records if not llm_published.held_out(r, sources)]
    folds = []
    for g in sorted({key(r) for r in cal if key(r)}):
        train = [r for r in cal if key(r) != g]
        test = [r for r in records if key(r) == g and not llm_published.frozen(r, sources)]
        if train and test:
            folds.append((g, train, test))
    fitted = fit_many([(train, sources, tail, start) for _, train, _ in folds])
    rows, per = [], {}
    for (g, _, test), params in zip(folds, fitted):
        pred = predict(test, params, sources)
        errs = [(p - r["value"]) / r["value"] for p, r in zip(pred, test)]
        for r, e in zip(test, errs):
            st = setting(r, sources)
            rows.append({"id": r["id"], label: g, "kind": METRICS[r["metric"]][0], "batching": st["batch_class"],
                         "load": st["load"], "error": round(float(e) if np.isfinite(e) else 10.0, 4)})
        per[g] = _summary([x["error"] for x in rows if x[label] == g])
    return rows, per


def calibrate(doc: dict | None = None, data: bytes | None = None, honest: bool = True) -> dict:
    """Fit on the calibration set, measure on the held-out set (records split out of fitted
    sources, and whole frozen sources); with `honest`, the error bands from leave-one-source-out
    (and leave-one-engine-out, leave-one-machine-out for what the calibration has no data of)."""
    if doc is None:
        data = llm_published.shipped_bytes()
        doc = llm_published.read_shipped()
    records, sources = doc["records"], doc.get("sources") or {}
    cal_rows = [r for r in records if not llm_published.held_out(r, sources)]
    held = [r for r in records if llm_published.held_out(r, sources)]
    if not cal_rows or not held:
        raise ContractError("needs records in both the calibration and the held-out set", field="records")
    tail, tail_rows = llm_published.tails(doc)
    params = fit(cal_rows, sources, tail)
    pred = predict(records, params, sources)
    measured = np.array([r["value"] for r in records], dtype=np.float64)
    err = np.where(np.isfinite(pred), (pred - measured) / measured, 10.0)
    per = []
    for r, p, e in zip(records, pred, err):
        st = setting(r, sources)
        which = ("held-out-source" if llm_published.frozen(r, sources) else
                 "held-out" if r["set"] == "held-out" else "calibration")
        per.append({"id": r["id"], "set": which, "kind": METRICS[r["metric"]][0], "source": r["source"],
                    "engine": st["engine"], "machine": r["machine"], "batching": st["batch_class"], "load": st["load"],
                    "measured": r["value"], "predicted": round(float(p), 6) if np.isfinite(p) else None,
                    "unit": r["unit"], "error": round(float(e), 4)})
    errors: dict = {"held-out": {}, "held-out-source": {}, "calibration": {}}
    for which in errors:
        for kind in sorted({row["kind"] for row in per}):
            e = [row["error"] for row in per if row["set"] == which and row["kind"] == kind]
            if e:
                errors[which][kind] = _summary(e)
        for metric in ("ttft", "tpot"):
            e = [t["error"] for t in tail_rows if t["set"] == which and t["metric"] == metric]
            if e:
                errors[which][f"p99_{metric}"] = _summary(e)
    by_source = {}
    for src in sorted({row["source"] for row in per}):
        e = [row["error"] for row in per if row["source"] == src and row["set"] != "calibration"]
        if e:
            by_source[src] = _summary(e)
    out = {
        "version": 2, "kind": "llm", "evidence_class": "projected",
        "data_sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
        "sources": len(sources), "records": {"calibration": len(cal_rows), "held-out": len(held)},
        "fitted": params, "fixed": {"interconnect": FIXED["interconnect"], "runtime_memory": "2 GiB",
                                    "kv_fraction": FIXED["kv_fraction"]},
        "calibrated": {"engines": sorted({row["engine"] for row in per if row["set"] == "calibration" and row["engine"]}),
                       "machines": sorted({row["machine"] for row in per if row["set"] == "calibration"})},
        "tail": tail,
        "tail_basis": "p95/p50 = (p99/p50)^(1/log10(50)) from published median and p99 pairs (vLLM serving "
                      "benchmarks, ShareGPT prompts of varying length, Poisson arrivals below saturation)",
        "errors": errors, "by_source": by_source, "predictions": per, "tail_checks": tail_rows,
    }
    held_out = {**errors["held-out"]}
    # What judge.py widens margins by, when no band of a finer class applies: the held-out 90th
    # percentile per metric.
    judged = {k: round(held_out[k]["p90"], 4) for k in ("ttft", "tpot", "latency", "token_throughput") if k in held_out}
    if "token_throughput" in judged:
        judged.setdefault("throughput", judged["token_throughput"])
    out["errors_by_metric"] = judged
    if honest:
        loso, out["loso_by_source"] = _leave_out(records, sources, tail, lambda r: r["source"], "source", params)
        loeo, out["loeo_by_engine"] = _leave_out(records, sources, tail, lambda r: llm_published.engine(r, sources),
                                                 "engine", params)
        lomo, out["lomo_by_machine"] = _leave_out(records, sources, tail, lambda r: r["machine"], "machine", params)
        out["bands"] = llm_error.bands(loso)
        out["unknown_engine"] = {k: v for k, v in llm_error.bands(loeo).items() if k.endswith("|*|*")}
        out["unknown_machine"] = {k: v for k, v in llm_error.bands(lomo).items() if k.endswith("|*|*")}
        out["band_rule"] = (f"the conformal {llm_error.COVERAGE:.0%} bound of leave-one-source-out relative errors for the "
                            f"metric and setting class (batching x load; a class with fewer than {llm_error.BAND_MIN} errors "
                            "falls back to a coarser one); an engine or machine the calibration has no records of: "
                            "at least the bound of leave-one-engine-out / leave-one-machine-out errors")
        out["coverage"] = llm_error.coverage(per, out)
    return out


def path(home: Path) -> Path:
    return Path(home) / FILE


@lru_cache(maxsize=1)
def shipped() -> dict:
    """The calibration on the shipped published figures."""
    return json.loads(shipped_path().read_text())


def current(home: Path | None = None) -> dict:
    """The project's own LLM calibration when it has one (luma model calibrate --llm), else the
    shipped one."""
    if home is not None and path(home).is_file():
        return json.loads(path(home).read_text())
    return shipped()


def summary_line(cal: dict) -> str:
    """One line for the CLI and reports: the relative error per metric on held-out published
    measurements (median / 90th percentile / max, how many, and the median signed error: + means
    the model predicts more than was measured)."""
    errs = cal.get("errors", {})
    held = {**errs.get("held-out", {})}
    for k, v in (errs.get("held-out-source") or {}).items():
        held[f"{k} (frozen sources)"] = v
    parts = [f"{k} {v['median']:.0%} / {v['p90']:.0%} / {v['max']:.0%} (n={v['n']}, bias {v['bias']:+.0%})"
             for k, v in held.items()]
    return "median / p90 / max relative error on held-out published measurements: " + "; ".join(parts)


def basis(cal: dict) -> str:
    """Where the LLM projection's figures come from, in one line."""
    n = cal.get("records", {})
    f = cal.get("fitted", {})
    return (f"engine figures fitted to {n.get('calibration', 0)} published measurements from {cal.get('sources', 0)} "
            f"sources (compute {f.get('compute', 0):.2f}, bandwidth {f.get('bandwidth', 0):.2f} of the datasheet, "
            f"{f.get('step_overhead', 0) * 1e3:.1f} ms a step, queueing factor {f.get('queue_factor', 0):.2f}, "
            f"AMD stack {f.get('amd_compute', 1):.2f}x compute, {f.get('amd_bandwidth', 1):.2f}x bandwidth; own profiles: {', '.join(sorted(f.get('engines') or {})) or 'none'}); "
            "p95/p50 tails "
            + ", ".join(f"{k} {v:.2f}" for k, v in (cal.get("tail") or {}).items()) + " from published p50/p99 pairs")


def run(home: Path, extra: Path | None = None, honest: bool = True) -> dict:
    """Fit on the shipped published figures (plus `extra`, a file of one's own in the same
    format), write `$LUMA_HOME/model/llm-calibration.json` and return the calibration."""
    doc = llm_published.read_shipped()
    data = llm_published.shipped_bytes()
    if extra is not None:
        mine = llm_published.read_published(extra)
        doc = llm_published.merge(doc, mine, str(extra))
        data += Path(extra).read_bytes()
    cal = calibrate(doc, data, honest=honest)
    out = path(home)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=1) + "\n")
    cal["_doc"] = doc
    return cal
