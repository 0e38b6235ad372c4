"""The model's output recorded (`--record` of `luma model predict|explore` and `luma partner
evaluate`): predictions as a model-prediction record (experiments/model/record.py), validated,
written under $LUMA_HOME/model/records/ and ingested, so `luma kb query --name model-vs-pex` can
set it beside what PEX measures. Each function returns what the command prints about it."""

from __future__ import annotations

import dataclasses

from luma.experiments.model import effects as effects_mod, predict, record, space
from luma.experiments.model.partner_evaluation import host_calibration
from luma.experiments.model.services import get


def record_predictions(settings, command: str, contract, rows: list, sp, space_ref, *, intervention: str | None = None,
                        extra: list[dict] = ()) -> dict:
    """Record predictions [(Prediction, role[, intervention applied])] of one contract (and `extra` records, e.g. a
    matrix); returns what the command prints about it."""
    home = settings.home
    first = rows[0][0]
    baseline = None if sp.is_llm else get(contract.service).variants[0]
    # A row is (Prediction, role) or (Prediction, role, whether the intervention is applied there).
    states = [record.predicted_state(r[0], r[1], contract, intervention=bool(r[2]) if len(r) > 2 else False,
                                     baseline_variant=baseline, home=home) for r in rows]
    notes = list(dict.fromkeys(n for p, *_ in rows for n in p.notes))
    model = record.model_version(host_calibration(home), sp.is_llm, home, str(space_ref) if space_ref else None)
    rec = record.prediction_record(command, contract, states, first.evidence_class, model,
                                   intervention=intervention, notes=notes)
    path, report = record.save_and_ingest(settings, [rec, *extra], command.split()[-1], command)
    return {"file": str(path), "states": len(states), "evidence_class": first.evidence_class,
            "records": len(report.added), "already": len([rec, *extra]) - len(report.added)}


def record_explored(settings, c, sp, space_ref, out: dict) -> dict:
    """Record the frontier's states and the proposals, each predicted again on its own (so the
    record has every clause and figure of it, as `predict` gives them)."""
    cal, rows, seen = host_calibration(settings.home), [], set()
    for role, items in (("frontier", out["frontier"]), ("proposal", out["proposals"])):
        for r in items:
            if not r.get("state"):
                continue
            labels = {**r["state"], **(r.get("demand") or {})}
            key = (role, tuple(sorted(labels.items())))
            if key in seen:
                continue
            seen.add(key)
            rows.append((predict.predict(c, space.from_state(labels, c, None, sp, settings), cal), role))
    if not rows:
        return {"file": None, "states": 0, "evidence_class": out["evidence_class"], "records": 0, "already": 0}
    return record_predictions(settings, "luma model explore", c, rows, sp, space_ref)


def record_partner(settings, doc: dict, parameters, context: dict) -> dict:
    """Record a partner evaluation: both sides' states predicted again (the given state, the
    minimum PASS over accelerator counts and its adjacent FAIL; the intervention's with its
    effects applied) as one model-prediction record, and the frozen matrix as an
    experiment-matrix record. The partner's own figures stay out of both."""
    c, state, source = context["contract"], context["state"], context["source"]
    eff = effects_mod.from_record(parameters, source)
    cal, rows, seen = host_calibration(settings.home), [], set()
    for name, applied in (("baseline", None), ("intervention", eff)):
        side = doc[name]
        for role, row in (("at-state", side.get("at_state")), ("candidate-pass", side.get("min_state")),
                          ("adjacent-fail", side.get("adjacent_fail"))):
            if not row or not row.get("state"):
                continue
            key = (name, tuple(sorted(row["state"].items())))
            if key in seen:
                continue
            seen.add(key)
            axes = {n: space.make_axis(n, [row["state"][n]], f"state.{n}") if n in row["state"] else a
                    for n, a in state.axes.items()}
            one = dataclasses.replace(state, name="state", axes=axes)
            rows.append((predict.predict(c, one, cal, applied), f"{name} {role}", applied is not None))
    tag = f"{parameters.partner}/{parameters.name}@{parameters.version}"
    matrix = record.matrix_record(doc["matrix"], "luma partner evaluate")
    return record_predictions(settings, "luma partner evaluate", c, rows, state, None, intervention=tag, extra=[matrix])
