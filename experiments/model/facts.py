"""The model's error as facts in the KB, and the model checked against past sprints.

The calibration's error figures become one Turtle document, loaded like `luma kb load` does
(an `rdf-document` record in the ledger, its own named graph in the KB) with evidence class
**simulated**: they describe the model, not the machine. Query them with

    SELECT ?contract ?metric ?held_out_max WHERE {
      ?e a luma:ModelError ; luma:contractName ?contract ; luma:metric ?metric ;
         luma:heldOutMaxRelativeError ?held_out_max }

`ledger_check` predicts every pex-trial record of past sprints in the ledger and counts how many
of their measured verdicts the model reproduces.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from luma.experiments.sprint import contract as contract_mod
from luma.experiments.model import space as space_mod
from luma.experiments.model.evaluate import Evaluator
from luma.experiments.model.services import get
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger_read import payloads_of_kind

_PREFIXES = """@prefix luma: <https://w3id.org/luma/ns#> .
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""
_FIELDS = (("median", "medianRelativeError"), ("max", "maxRelativeError"),
           ("held_out_median", "heldOutMedianRelativeError"), ("held_out_max", "heldOutMaxRelativeError"))


def turtle(cal: dict) -> str:
    """The calibration's error figures as Turtle (deterministic for the same calibration)."""
    key = hashlib.sha256(json.dumps(cal["errors"], sort_keys=True).encode() + cal["created"].encode()).hexdigest()[:16]
    # A relative IRI: it resolves under the loaded document's own graph, since a plain RDF document
    # describes only the nodes it brings, never a node LUMA mints (kb/records/sealed.py).
    root = f"model-calibration/{key}"
    lines = [_PREFIXES, f"<{root}> a luma:ModelCalibration, prov:Entity ;",
             '    rdfs:label "analytical model calibrated on this host (luma model calibrate)" ;',
             f'    prov:generatedAtTime "{cal["created"]}"^^xsd:dateTime ;',
             f'    luma:calibrationTrials {len(cal.get("trials", []))} .']
    for contract, metrics in sorted(cal["errors"].items()):
        for metric, e in sorted(metrics.items()):
            node = f"<{root}/{contract}/{metric}>"
            lines.append(f"<{root}> luma:modelError {node} .")
            props = [f'luma:contractName "{contract}"', f'luma:metric "{metric}"', f"luma:trials {int(e['n'])}"]
            props += [f'luma:{prop} "{float(e[k]):.6g}"^^xsd:double' for k, prop in _FIELDS if e.get(k) is not None]
            lines.append(f"{node} a luma:ModelError ;\n    " + " ;\n    ".join(props) + " .")
    return "\n".join(lines) + "\n"


def record(project, cal: dict) -> Path:
    """Write the error facts beside the calibration and load them into the project's KB."""
    out = project.home / "model" / "calibration-errors.ttl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(turtle(cal))
    with KnowledgeBase.open(project) as kb:
        kb.load_rdf(out, "turtle", "simulated", submitter="luma model calibrate")
    return out


def _trials(project) -> list[dict]:
    return [json.loads(payload) for _, payload in payloads_of_kind(project, "pex-trial")]


def _levels(project, service: str, calibration: dict):
    """(record, predicted memory need at the least that runs, host_memory level in bytes) of each
    sprint trial of `service` in the ledger that ran at a host_memory level."""
    shipped = {c.name: c for c in (contract_mod.load(p) for p in contract_mod.shipped().values())}
    variants = get(service).variants
    for rec in _trials(project):
        c = shipped.get(rec["contract"]["name"])
        dims = rec["state"]["dimensions"]
        if c is None or c.service != service or "host_memory" not in dims or rec["variant"] not in variants \
                or rec["phase"] == "optimize":
            continue
        axes = {"variant": space_mod.make_axis("variant", [rec["variant"]], "variant", variants)}
        for dim, level in dims.items():
            if dim in space_mod.AXES and dim != "runtime":
                axes[dim] = space_mod.make_axis(dim, [level if "unit" in level else level["value"]], dim, variants)
        ev = Evaluator(c, space_mod.Space("trial", axes), calibration)
        m, _ = ev.evaluate(np.zeros(1, dtype=np.int64))
        yield rec, float(np.broadcast_to(m["memory_min"], (1,))[0]), float(axes["host_memory"].values[0])


def limit_margin(project, service: str, calibration: dict) -> dict | None:
    """The margin a memory limit needs beyond the predicted peak, from sprint trials: more than
    (level − need) of every level that ran out of memory, at most (level − need) of every level
    that passed; the middle of that bracket. None when the ledger has no such trials."""
    low, high, n = -np.inf, np.inf, 0
    for rec, need, level in _levels(project, service, calibration):
        n += 1
        if rec.get("failure_cause") == "oom":
            low = max(low, level - need)
        elif rec["verdict"] == "PASS":
            high = min(high, level - need)
    if n == 0 or low == -np.inf:
        return None
    if low < 0:
        margin = 0.0  # every out-of-memory level is already predicted to fail
    elif high == np.inf:
        margin = low + 2.0**16
    else:
        margin = (low + high) / 2 if high > low else low + 1.0
    return {"bytes": float(margin), "trials": n, "bracket": [float(low), float(high)],
            "consistent": bool(high > low)}


def ledger_check(project, calibration: dict | None) -> list[dict]:
    """Per contract: how many measured sprint verdicts (pex-trial records, not INCONCLUSIVE) the
    model predicts, and which it gets wrong."""
    shipped = {}
    for path in contract_mod.shipped().values():
        c = contract_mod.load(path)
        shipped[c.name] = c
    out: dict[str, dict] = {}
    for rec in _trials(project):
        c = shipped.get(rec["contract"]["name"])
        if c is None or rec["verdict"] == "INCONCLUSIVE" or rec["phase"] == "optimize":
            continue
        variants = get(c.service).variants
        if rec["variant"] not in variants:
            continue
        axes = {"variant": space_mod.make_axis("variant", [rec["variant"]], "variant", variants)}
        for dim, level in rec["state"]["dimensions"].items():
            if dim in space_mod.AXES and dim != "runtime":
                axes[dim] = space_mod.make_axis(dim, [level if "unit" in level else level["value"]], dim, variants)
        ev = Evaluator(c, space_mod.Space("trial", axes), calibration)
        m, _ = ev.evaluate(np.zeros(1, dtype=np.int64))
        predicted = "PASS" if ev.judge(m).passed[0] else "FAIL"
        row = out.setdefault(c.name, {"contract": c.name, "trials": 0, "agree": 0, "wrong": []})
        row["trials"] += 1
        if predicted == rec["verdict"]:
            row["agree"] += 1
        else:
            row["wrong"].append(f"{rec['variant']} {ev.label(0)}: measured {rec['verdict']}, predicted {predicted}")
    return list(out.values())
