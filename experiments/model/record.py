"""The model's outputs as records (`--record`): `model-prediction` records for `luma model
predict|explore` and `luma partner evaluate`, an `experiment-matrix` record for a frozen matrix.

A predicted state is written with the same machine-state levels a sprint's trial records carry
(record dimensions in their units: `compute: 1 core`, `host_memory: 4 MiB`, `accelerator_count: 4
accelerator`), so the KB gives the prediction and the trial the same state entity; every other
axis of the model (variant, precision, parallelism, load) is kept as the state's configuration.

Evidence class: the model's own (experiments/model/evaluate.py) — `simulated` for the services
of this host, whose model is calibrated on trials measured here, `projected` for LLMs on
hardware the model has not measured and for partner evaluations. The records are not signed:
only `measured` is earned by a runner key (kb/ingest/evidence_gate.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
from datetime import datetime, timezone
from pathlib import Path

from luma.experiments.host import git_revision
from luma.experiments.model import llm_calibrate
from luma.kb.records.dimensions import record_dimensions
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.kb.records.pex_chain import Level, _check_level
from luma.kb.vocab import canonical_json

MODEL_NAME = "luma analytical model"
#: Units of the model's figures, as `luma model predict` prints them.
FIGURE_UNITS = {
    "memory_need": "B", "memory_min": "B", "memory_capacity": "B", "peak_rss": "B", "kv_per_device": "B",
    "kv_bytes_per_token": "B", "latency": "s", "ttft": "s", "tpot": "s", "throughput": "request/s",
    "token_throughput": "token/s", "energy_per_request": "J/request", "energy_per_token": "J/token",
}
#: The model's clause units in the record's unit grammar.
_CLAUSE_UNITS = {"": "dimensionless", "sequences": "dimensionless", "B": "B", "s": "s", "1/s": "1/s",
                 "token/s": "token/s"}
#: Model axes that are machine levels, and the unit a bare number of theirs is in.
_LEVEL_AXES = {"compute": "core", "host_memory": None, "kv_cache": None, "hbm_capacity": None,
               "memory_bandwidth": None, "accelerator_count": "accelerator"}
#: Axes of the load: a state predicted at another load than the contract's is another experiment.
_LOAD_AXES = ("concurrency", "max_batch", "context", "max_new_tokens")


def model_code() -> str:
    """SHA-256 over the model's source files (name and bytes): the model version a prediction
    names. Another code is another model, whatever the package version says."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def model_version(calibration: dict | None, llm: bool, home: Path | None, space: str | None = None) -> dict:
    """The `model` block: code hash, the hash of the calibration the model read (the host's, or
    for an LLM the fitted engine figures), and whether it was calibrated."""
    used = calibration
    if llm:
        used = llm_calibrate.current(home)
    out = {"name": MODEL_NAME, "code": model_code(), "calibrated": bool(used)}
    if used:
        out["calibration"] = hashlib.sha256(canonical_json(used).encode()).hexdigest()
    if space:
        out["space"] = space
    return out


def _number_level(axis: str, label: str) -> dict | None:
    import re

    m = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/ ]*?)\s*$", str(label))
    if not m:
        return None
    value = float(m.group(1))
    unit = m.group(2) or _LEVEL_AXES[axis]
    if unit is None:
        return None
    return {"value": int(value) if value.is_integer() else value, "unit": unit}


def split_state(labels: dict[str, str], home: Path | None = None) -> tuple[dict, dict[str, str]]:
    """({"dimensions": {dimension: level}}, {setting: label}) of a state in the model's labels:
    machine levels as a record carries them, everything else as the configuration."""
    dims = record_dimensions(home)
    levels, config = {}, {}
    for axis, label in labels.items():
        level = None
        if axis == "runtime":
            level = {"value": f"ATEN_CPU_CAPABILITY={str(label).removeprefix('ATEN_CPU_CAPABILITY=')}"}
        elif axis == "accelerator_type":
            level = {"value": str(label)}
        elif axis in _LEVEL_AXES:
            level = _number_level(axis, label)
        if level is not None and axis in dims:
            try:
                _check_level(axis, Level.model_validate(level), dims)
            except ValueError:
                level = None  # a label the record grammar does not read: kept as a setting
        if level is None or axis not in dims:
            config[axis] = str(label)
        else:
            levels[axis] = level
    return {"dimensions": levels}, config


def _finite(x) -> float | None:
    return float(x) if x is not None and isinstance(x, (int, float)) and math.isfinite(x) else None


def predicted_state(p, role: str, contract, *, intervention: bool = False, baseline_variant: str | None = None,
                    home: Path | None = None) -> dict:
    """A `PredictedState` of the record from a predict.Prediction."""
    state, config = split_state(p.state, home)
    if baseline_variant and "variant" not in config:
        config["variant"] = baseline_variant  # what the model ran when the state named none
    load = contract.load
    defaults = {"concurrency": load.concurrency, "max_batch": load.max_batch, "context": load.context,
                "max_new_tokens": load.max_new_tokens}
    at_load = all(str(defaults[k]) == config[k] for k in _LOAD_AXES if k in config)
    if intervention:
        config["intervention"] = "applied"
    clauses = []
    for r in p.clauses:
        unit = _CLAUSE_UNITS.get(r["unit"], r["unit"])
        clauses.append({k: v for k, v in {
            "check": r["check"], "op": r["op"], "predicted": _finite(r["predicted"]),
            "threshold": _finite(r["threshold"]), "unit": unit, "margin": _finite(r["margin"]),
            "verdict": r["verdict"], "resource": r["resource"]}.items() if v is not None})
    figures = [{"metric": k, "value": float(v), "unit": FIGURE_UNITS[k]} for k, v in sorted(p.figures.items())
               if k in FIGURE_UNITS and _finite(v) is not None and v >= 0]
    margins = [r["margin"] for r in p.clauses if _finite(r["margin"]) is not None]
    out = {"role": role, "state": state, "configuration": config, "verdict": p.verdict,
           "tightest_resource": p.tightest, "baseline": (not intervention and at_load and
                                                         config.get("variant", baseline_variant) == baseline_variant),
           "at_contract_load": at_load, "clauses": clauses, "figures": figures}
    if p.verdict == "FAIL":
        out["binding_resource"] = p.binding or p.tightest
    if margins:
        out["margin"] = float(min(margins))
    return out


def prediction_record(command: str, contract, predictions: list[dict], evidence_class: str, model: dict,
                      *, intervention: str | None = None, notes: list[str] = ()) -> dict:
    """A model-prediction record (a dict, validated by the caller before anything is written)."""
    rec = {"record_type": "model-prediction", "evidence_class": evidence_class, "command": command,
           "model": model, "contract": contract.record_contract(), "predictions": predictions,
           "notes": [n for n in notes if n][:64], "provenance": provenance(command)}
    if intervention:
        rec["intervention"] = intervention
    return rec


def matrix_record(matrix: dict, command: str) -> dict:
    """An experiment-matrix record of a frozen matrix (the partner's figures stay out: the record
    names the intervention and keeps the matrix's own hash)."""
    contract = matrix.get("contract") or {}
    configs = []
    for c in matrix.get("configurations") or []:
        states = [{k: v for k, v in {"role": s.get("role"), "levels": {k: str(v) for k, v in (s.get("state") or {}).items()},
                                     "predicted": s.get("predicted"), "binding": s.get("binding"),
                                     "margin": _finite(s.get("margin"))}.items() if v is not None}
                  for s in c.get("states") or []]
        configs.append({k: v for k, v in {"name": c.get("name"), "intervention": c.get("intervention"),
                                          "states": states}.items() if v is not None})
    rec = {"record_type": "experiment-matrix", "evidence_class": matrix.get("evidence_class", "projected"),
           "sha256": matrix.get("sha256"),
           "contract": {"name": contract.get("name"), "clauses": contract.get("clauses")},
           "dimension": matrix.get("dimension"), "repetitions": matrix.get("repetitions"),
           "configurations": configs, "provenance": provenance(command)}
    if matrix.get("model"):
        rec["model"] = matrix["model"]
    return rec


def provenance(tool: str) -> dict:
    out = {"tool": tool, "host": socket.gethostname() or "unknown",
           "started": datetime.now(timezone.utc).replace(microsecond=0).isoformat()}
    rev = git_revision()
    if rev:
        out["git_revision"] = rev
    return out


def save_and_ingest(project, records: list[dict], stem: str, submitter: str):
    """Validate every record first (a bad one writes nothing, so KB and ledger stay as they
    were), then write them as JSON Lines under $LUMA_HOME/model/records/ and ingest them all or
    nothing. Returns (path, IngestReport)."""
    for i, rec in enumerate(records, 1):
        validate_document(rec, f"{stem}: record {i}", project.home)
    folder = project.home / "model" / "records"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = folder / f"{stamp}-{stem}.jsonl"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
    with KnowledgeBase.open(project) as kb:
        return path, kb.ingest([path], submitter=submitter)
