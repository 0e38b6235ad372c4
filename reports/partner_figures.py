"""The figures of a partner evaluation as people read them, one convention for the CLI
(`luma partner evaluate`) and the report (`luma report partner`): every row says at which state
it is taken (the minimum PASS state of each side, or the state the user gave), memory in binary
units (GiB), costs in the space's currency with where the prices come from, energy in joules, and
the model inputs the record became with their units."""

from __future__ import annotations

import math
import re

from luma.reports.fmt import binary_text, bytes_text, num, quantity, seconds_text

MIN_PASS = "minimum PASS state"
GIVEN = "given state"

#: (key in Evaluation.changes, label, where the figure is taken, kind)
FIGURES = (
    ("accelerator_count", "accelerators", MIN_PASS, "count"),
    ("cost_per_hour", "cost per hour", MIN_PASS, "money/h"),
    ("cost_per_request", "cost per accepted request", MIN_PASS, "money"),
    ("cost_per_token", "cost per accepted token", MIN_PASS, "money"),
    ("energy_per_request", "energy per request", MIN_PASS, "J"),
    ("energy_per_token", "energy per token", MIN_PASS, "J"),
    ("max_concurrency", "highest concurrency that passes", GIVEN, "count"),
    ("binds_next", "binds at the next concurrency", GIVEN, "text"),
    ("binding", "binding (or tightest) resource", GIVEN, "text"),
    ("memory_need_per_device", "memory per device, every sequence resident", GIVEN, "B"),
)

#: Model inputs (experiments/model/effects.Effects) -> (label, unit kind).
INPUTS = {
    "kv_capacity_factor": ("KV capacity factor (after metadata and memory-management overhead)", "x"),
    "kv_read_factor": ("KV read factor (raw bytes per byte read)", "x"),
    "kv_decode_rate": ("KV decode rate per device", "B/s"),
    "kv_encode_rate": ("KV encode rate per device", "B/s"),
    "weight_capacity_factor": ("weight capacity factor", "x"),
    "added_latency": ("added latency per decode step", "s"),
    "power": ("added power per device", "W"),
    "buffering": ("buffering per device", "B"),
    "silicon_area": ("silicon area (reported, not costed)", "m2"),
    "data_classes": ("data classes modelled", "list"),
    "ignored": ("data classes not modelled", "list"),
    "source": ("record", "text"),
}


def currency(cost_unit: str) -> str | None:
    """"USD" from "USD per hour"; None for a unit that is no currency (kW, relative units)."""
    m = re.match(r"^([A-Z]{3}) per hour$", cost_unit or "")
    return m.group(1) if m else None


def money(value, kind: str, cost_unit: str) -> str:
    """A cost with its currency: "12 USD/h", "0.00422 USD"; kW-priced states in kW / kWh."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    cur = currency(cost_unit)
    if cur:
        return f"{num(float(value))} {cur}" + ("/h" if kind == "money/h" else "")
    if cost_unit.startswith("kW"):
        return f"{num(float(value))} {'kW' if kind == 'money/h' else 'kWh'}"
    return f"{num(float(value))} cost units" + ("/h" if kind == "money/h" else "")


def cell(value, kind: str, cost_unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if kind.startswith("money"):
        return money(value, kind, cost_unit)
    if kind == "B":
        return binary_text(float(value))
    if kind == "J":
        return quantity(float(value), "joule")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def state_text(state: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (state or {}).items()) or "—"


def rows(ev: dict) -> list[list[str]]:
    """[figure, at, baseline, with the intervention, change] per figure of an evaluation."""
    ch, unit = ev["changes"], ev["cost_unit"]
    out = []
    for key, label, where, kind in FIGURES:
        d = ch[key]
        out.append([label, where, cell(d["before"], kind, unit), cell(d["after"], kind, unit),
                    "" if d.get("change") is None else f"{d['change']:+.1%}"])
    tier = ch["memory_tier"]
    out.append(["memory tier", GIVEN, tier["before"]["tier"], tier["after"]["tier"], ""])
    out.append(["machine state", MIN_PASS, state_text(ch["min_state"]["before"]),
                state_text(ch["min_state"]["after"]), ""])
    return out


def changes(ev: dict) -> tuple[list[str], list[float]]:
    """(labels, relative changes) of the numeric figures, for the change plot."""
    labels, values = [], []
    for key, label, where, _ in FIGURES:
        d = ev["changes"][key]
        if d.get("change") is not None and key != "accelerator_count":
            labels.append(f"{label} ({'min PASS' if where == MIN_PASS else 'given state'})")
            values.append(float(d["change"]))
    return labels, values


def prices_text(ev: dict) -> str:
    """What the costs are in and where the prices come from."""
    source = ev.get("cost_source") or "not stated"
    return f"costs in {ev['cost_unit']}; prices: {source}"


def input_value(key: str, value) -> str:
    if value is None:
        return "— (the capacity factor, capped by the decode throughput)" if key == "kv_read_factor" else "—"
    kind = INPUTS.get(key, (key, "text"))[1]
    if kind == "x":
        return f"×{num(float(value))}"
    if kind == "B/s":
        return bytes_text(float(value), per_second=True)
    if kind == "B":
        return binary_text(float(value))
    if kind == "s":
        return seconds_text(float(value))
    if kind == "W":
        return quantity(float(value), "watt")
    if kind == "m2":
        return f"{num(float(value) * 1e6)} mm²"
    if kind == "list":
        return ", ".join(value) or "none"
    return str(value)


def input_rows(effects: dict) -> list[list[str]]:
    """[model input, value with its unit] of the Effects the record became."""
    return [[INPUTS[k][0], input_value(k, effects.get(k))] for k in INPUTS if k in effects]
