"""Predicted verdicts: each contract clause against the model's figures, over arrays of states.

A state PASSES when the service fits in memory (the least it can run with: weights,
activations, one sequence's KV), every clause holds, and the machine supports the precision.
Each check has a relative margin (how far the predicted value is from its threshold, as a
share of the threshold; negative = FAIL). The **binding resource** of a FAIL is the resource
behind the check that fails worst — memory first, since an out-of-memory trial fails every
clause; for a time clause, the roofline term that dominates it (compute, memory bandwidth,
interconnect, runtime overhead) or, when requests wait for KV room, the KV capacity. For a PASS
the same rule, over the resource checks only, names the *tightest* resource: the one that would
bind first.

Percentiles: pNN = p50 × tail^e(q) with e(q) = log10(0.5 / (1 − q)) (e = 1 at p95), the tail
ratio measured by calibration; requests that wait for KV room add the wait to every quantile
above 1 − (waiting share).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from luma.experiments.sprint import stats

RESOURCES = ("host_memory", "hbm_capacity", "kv_cache", "compute", "memory_bandwidth", "interconnect", "runtime",
             "quality", "unsupported")
CODE = {r: i for i, r in enumerate(RESOURCES)}
#: Relative error assumed per metric until calibration measures it.
DEFAULT_ERRORS = {"memory": 0.25, "latency": 0.5, "ttft": 0.5, "tpot": 0.5, "throughput": 0.5,
                  "token_throughput": 0.5, "quality": 0.01}


@dataclass(frozen=True)
class Check:
    name: str  # "memory", "kv_cache" or the clause's metric
    op: str
    threshold: float | None  # None: per state (memory capacity)
    quantile: float | None = None

    @property
    def kind(self) -> str:
        if self.name in ("memory", "kv_cache", "quality", "throughput", "token_throughput"):
            return self.name
        return self.name.split("_", 1)[1]


@dataclass
class Judgement:
    checks: list[Check]
    values: np.ndarray  # (checks, states): the predicted figure each check compares
    margins: np.ndarray  # (checks, states)
    codes: np.ndarray  # (checks, states): the resource behind each check
    passed: np.ndarray  # (states,)
    binding: np.ndarray  # (states,): resource code of the failing (or tightest) check
    closeness: np.ndarray  # (states,): smallest |margin| / the model's error for that metric

    def resource(self, i: int) -> str:
        return RESOURCES[int(self.binding[i])]


def checks_of(contract) -> list[Check]:
    out = []
    for c in contract.service_clauses():  # the model predicts service clauses, not the pilot's economics
        out.append(Check(c.metric, c.op, contract.threshold(c), stats.quantile_of(c.metric)))
    return out


def exponent(q: float) -> float:
    return math.log10(0.5 / (1.0 - q))


def value(m: dict, check: Check) -> tuple[np.ndarray, np.ndarray]:
    """(predicted value, share of it that is waiting for KV room) of a clause check."""
    if check.quantile is None:
        return np.asarray(m[check.name], dtype=np.float64), np.zeros(1)
    kind = check.kind
    base = m[kind] * float(m["tail"].get(kind, 1.3)) ** exponent(check.quantile)
    if kind == "latency" and "output_quantile" in m:
        # Over a length mix whose outputs vary, a request's latency at a quantile is that of a
        # request of the quantile's output length: the spread is the lengths', not a tail factor.
        g = m["output_quantile"](check.quantile)
        base = np.where(np.isfinite(g), m["ttft"] + np.maximum(np.nan_to_num(g) - 1.0, 0.0) * m["tpot"], base)
    if kind in ("ttft", "latency"):
        waits = check.quantile > 1.0 - m["wait_fraction"]
        wait = np.where(waits, m["wait"], 0.0)
        return base + wait, wait
    return base, np.zeros(1)


def _margin(v, op, threshold):
    if op in ("<=", "<"):
        return (threshold - v) / threshold if threshold else -v
    return (v - threshold) / threshold if threshold else v


def _term_code(m: dict, kind: str, shape) -> np.ndarray:
    terms = m["terms"].get(kind) or m["terms"].get("latency") or m["terms"].get("tpot")
    names = list(terms)
    stack = np.stack([np.broadcast_to(terms[n], shape) for n in names])
    return np.take(np.array([CODE[n] for n in names]), np.argmax(stack, axis=0))


def judge(checks: list[Check], m: dict, errors: dict | None = None) -> Judgement:
    err = {**DEFAULT_ERRORS, **(errors or {})}
    shape = np.broadcast(m["memory_min"], m["memory_capacity"], m.get("latency", m.get("tpot"))).shape
    mem_code = CODE[m["memory_dimension"]]
    cap = np.broadcast_to(m["memory_capacity"], shape)
    need = np.broadcast_to(m["memory_min"], shape)
    rows = [Check("memory", "<=", None)]
    values = [need]
    with np.errstate(invalid="ignore", divide="ignore"):
        margins = [np.where(np.isinf(cap), 1.0, (cap - need) / np.where(cap > 0, cap, 1.0))]
    codes = [np.full(shape, mem_code)]
    errs = [err["memory"]]
    if "kv_margin" in m:
        rows.append(Check("kv_cache", ">=", None))
        values.append(np.broadcast_to(m["slots"], shape))
        margins.append(np.broadcast_to(m["kv_margin"], shape))
        codes.append(np.full(shape, CODE[m.get("slot_dimension", "kv_cache")]))
        errs.append(err["memory"])
    slot_code = CODE[m.get("slot_dimension", m["memory_dimension"])]
    for ch in checks:
        v, wait = value(m, ch)
        v = np.broadcast_to(v, shape)
        mg = _margin(v, ch.op, ch.threshold)
        if ch.kind == "quality":
            code = np.full(shape, CODE["quality"])
        else:
            code = _term_code(m, ch.kind, shape)
            # The clause fails because requests wait for KV room, and would hold without the wait.
            waited = (np.broadcast_to(wait, shape) > 0) & (mg < 0) & (_margin(v - wait, ch.op, ch.threshold) >= 0)
            code = np.where(waited, slot_code, code)
        rows.append(ch)
        values.append(v)
        margins.append(np.asarray(mg, dtype=np.float64))
        codes.append(code)
        errs.append(err.get(ch.kind, err["latency"]))
    values, margins, codes = np.stack(values), np.stack(margins), np.stack(codes)
    strict = np.array([[c.op in ("<", ">")] for c in rows])
    ok = np.where(strict, margins > 0, margins >= 0)
    supported = np.broadcast_to(m.get("supported", True), shape)
    passed = ok.all(axis=0) & supported
    # A FAIL is bound by its worst check; a PASS names the resource closest to binding (quality is
    # a property of the variant, not a resource: it names a PASS's tightest only when it is alone).
    resource_rows = np.array([[c.kind != "quality"] for c in rows])
    ranked = np.where(np.isnan(margins), np.inf, margins)
    ranked = np.where(passed[None, :] & ~resource_rows, np.inf, ranked)
    worst = np.argmin(ranked, axis=0)
    binding = np.take_along_axis(codes, worst[None, :], axis=0)[0] if codes.ndim == 2 else codes[worst]
    binding = np.where(~ok[0], mem_code, binding)
    if rows[1].name == "kv_cache":
        binding = np.where(ok[0] & ~ok[1], codes[1], binding)
    binding = np.where(supported, binding, CODE["unsupported"])
    # An error band may differ per state (LLM bands per setting class): one row per check.
    band = np.stack([np.broadcast_to(np.asarray(e, dtype=np.float64), shape) for e in errs])
    closeness = np.min(np.abs(margins) / band, axis=0)
    return Judgement(rows, values, margins, codes, passed, binding, closeness)
