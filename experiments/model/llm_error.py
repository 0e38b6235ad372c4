"""The error band an LLM projection states: the conformal 90 % bound of the model's relative errors
on published figures a fit never saw (leave one source out), per metric and setting class (batching
× load), widened for an engine or a machine the calibration has no records of (leave one engine /
machine out). llm_calibrate.py measures the errors; this module turns them into bands and reads a
prediction's band back."""

from __future__ import annotations

import math

import numpy as np

from luma.experiments.model import llm

#: The setting classes a band is read for: batching, and the load a figure was measured at.
BATCH_CLASSES = ("static", "continuous")
LOADS = ("offline", "open-loop", "light", "heavy")
#: Closed-loop clients up to which the load is light.
LIGHT_CLIENTS = 4


def batch_code(batching):
    """Index into BATCH_CLASSES of llm.BATCHING codes (chunked prefill counts as continuous)."""
    return np.where(np.asarray(batching) == llm.BATCHING["static"], 0, 1)


def load_code(arrival, concurrency):
    """Index into LOADS of llm.ARRIVALS codes and closed-loop client counts."""
    arrival = np.asarray(arrival)
    return np.where(arrival == llm.ARRIVALS["offline"], 0, np.where(arrival == llm.ARRIVALS["poisson"], 1,
                                                                     np.where(np.asarray(concurrency) <= LIGHT_CLIENTS, 2, 3)))


#: Fewest errors a band is read from; a finer class with fewer falls back to a coarser one.
BAND_MIN = 10
#: The share of predictions a band should hold.
COVERAGE = 0.9


def band(errors) -> float | None:
    """The conformal bound of |relative error|: the ceil(0.9 (n + 1))-th smallest of n errors,
    which a new error from the same population stays within with probability >= 0.9."""
    a = np.sort(np.abs(np.asarray(errors, dtype=np.float64)))
    k = math.ceil(COVERAGE * (len(a) + 1))
    # Rounded up, so the stated band never excludes the error it was read from.
    return None if len(a) < BAND_MIN or k > len(a) else math.ceil(float(a[k - 1]) * 1e4) / 1e4


def bands(rows: list[dict]) -> dict:
    """Band per `kind|batching|load`, `kind|load`, `kind|batching`, `kind` and `*` from
    leave-one-source-out errors (rows: kind, batching, load, error)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        for key in (f"{r['kind']}|{r['batching']}|{r['load']}", f"{r['kind']}|*|{r['load']}",
                    f"{r['kind']}|{r['batching']}|*", f"{r['kind']}|*|*", "*|*|*"):
            groups.setdefault(key, []).append(r["error"])
    return {k: b for k, v in sorted(groups.items()) if (b := band(v)) is not None}


def band_for(bands: dict, kind: str, batching: str, load: str) -> float | None:
    """The finest band that has enough errors behind it, for a prediction of this class."""
    for key in (f"{kind}|{batching}|{load}", f"{kind}|*|{load}", f"{kind}|{batching}|*", f"{kind}|*|*", "*|*|*"):
        if key in bands:
            return bands[key]
    return None


def coverage(per: list[dict], cal: dict) -> dict:
    """Share of held-out predictions (split records, and frozen sources) inside their band."""
    out = {}
    for which in ("held-out", "held-out-source"):
        rows = [r for r in per if r["set"] == which]
        inside = [abs(r["error"]) <= prediction_band(cal, r["kind"], r["batching"], r["load"], r["engine"],
                                                     r["machine"]) for r in rows]
        if rows:
            out[which] = {"n": len(rows), "inside": int(sum(inside)), "share": round(sum(inside) / len(rows), 4)}
    return out


def prediction_band(cal: dict, kind: str, batching: str, load: str, engine_name: str | None,
                    machine_name: str | None) -> float:
    """The relative error band a prediction states: its class's band, widened to the unknown-
    engine / unknown-machine band when the calibration has no records of its engine / machine."""
    bands = cal.get("bands") or {}
    b = band_for(bands, kind, batching, load)
    if b is None:
        b = float((cal.get("errors_by_metric") or {}).get(kind, 0.5))
    new_engine, new_machine = unknown(cal, engine_name, machine_name)
    if new_engine:
        b = max(b, (cal.get("unknown_engine") or {}).get(f"{kind}|*|*", b))
    if new_machine:
        b = max(b, (cal.get("unknown_machine") or {}).get(f"{kind}|*|*", b))
    return float(b)


def unknown(cal: dict, engine_name: str | None, machine_name: str | None) -> tuple[bool, bool]:
    """(the calibration has no records of the engine, none of the machine): what widens a band."""
    known = cal.get("calibrated") or {}
    return engine_name not in (known.get("engines") or []), machine_name not in (known.get("machines") or [])
