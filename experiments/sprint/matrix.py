"""Frozen experiment matrices: the states a PEX sprint measures to prove a projection.

A matrix (`luma partner evaluate --out`, `luma sprint plan --out`) names the contract with its
clauses and load, the dimension along which the boundary lies, the repetitions, and per
configuration (the baseline; the service with an intervention) the states with the model's
predicted verdict. It is frozen: `sha256` is the hash of everything else, so an edited matrix is
refused rather than run as if it were the projection's.

`to_plan` maps one onto a sprint Plan (`luma sprint run --matrix`): the baseline's levels along
the dimension are the sprint's levels, their other levels its base state, the intervention
configuration its intervention, the matrix's predicted minimum PASS the bisection's start. A
matrix this host cannot run (an LLM's, a dimension it cannot enforce, a partner's intervention)
is a ConfigError naming the field, before any trial.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from luma.errors import ConfigError, ContractError, StateError
from luma.experiments.services import get
from luma.experiments.sprint import contract as contract_mod, pex as sprint_mod, states
from luma.kb.records.input_files import RECORD_FILE, read_text
from luma.kb.records.documents import parse_json

KIND = "pex-experiment-matrix"
#: Settings of the load a matrix state may carry; they must be the contract's own.
_LOAD = ("concurrency", "max_batch", "context", "max_new_tokens")


def digest(matrix: dict) -> str:
    """The hash a matrix is frozen with: SHA-256 of the sorted JSON of all but `sha256`."""
    body = {k: v for k, v in matrix.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read(path: Path, project) -> dict:
    """The matrix in `path`: a bare matrix, or an evaluation written by `luma partner evaluate
    --out` (its `matrix`). Checked to be one and to be unedited."""
    source = str(path)
    doc = parse_json(read_text(Path(path), RECORD_FILE.under(project)), source)
    matrix = doc.get("matrix") if isinstance(doc, dict) and "matrix" in doc else doc
    if not isinstance(matrix, dict) or matrix.get("kind") != KIND:
        raise ContractError(f"not an experiment matrix (its kind must be {KIND!r})", source=source, field="kind")
    if matrix.get("frozen") is not True:
        raise ContractError("the matrix is not frozen", source=source, field="frozen")
    if matrix.get("sha256") != digest(matrix):
        raise ContractError("the matrix was edited after it was frozen (its sha256 does not match its content)",
                          source=source, field="sha256")
    return matrix


def _contract(matrix: dict, project, source: str):
    frozen = matrix.get("contract") or {}
    name = frozen.get("name")
    if not isinstance(name, str) or name not in contract_mod.shipped() and not Path(name).is_file():
        raise ContractError(f"{name!r} is not a contract a sprint runs on this host (shipped: "
                          f"{', '.join(sorted(contract_mod.shipped()))})", source=source, field="contract.name")
    c = contract_mod.load(name, project)
    if c.record_contract()["clauses"] != frozen.get("clauses"):
        raise ContractError(f"the matrix was frozen with other clauses than contract {name!r} has now",
                          source=source, field="contract.clauses")
    return c


def _state_levels(state: dict, where: str, source: str, contract) -> dict[str, str]:
    """The machine levels of a matrix state; a load setting must be the contract's own."""
    load = contract.load.model_dump()
    out = {}
    for key, value in state.items():
        if key in _LOAD:
            if str(load.get(key)) != str(value):
                raise ContractError(f"{key} {value} is not the contract's load ({load.get(key)}): a sprint measures at "
                                  "the contract's load", source=source, field=f"{where}.{key}")
            continue
        if key == "variant":
            continue  # the configuration says which variant runs
        if key not in states.ENFORCED:
            raise StateError(f"{key!r} is not a dimension this host enforces ({', '.join(states.ENFORCED)})",
                              source=source, field=f"{where}.{key}")
        out[key] = str(value)
    return out


def to_plan(matrix: dict, project, source: str = "matrix"):
    """The sprint Plan of a matrix (see the module docstring)."""
    c = _contract(matrix, project, source)
    dim = matrix.get("dimension")
    if dim not in states.ENFORCED:
        raise StateError(f"{dim!r} is not a dimension this host enforces ({', '.join(states.ENFORCED)})",
                          source=source, field="dimension")
    configs = matrix.get("configurations") or []
    base_i = next((i for i, cf in enumerate(configs) if not cf.get("intervention")), None)
    if base_i is None:
        raise ContractError("no baseline configuration (one without an intervention)", source=source,
                          field="configurations")
    levels, base, start = [], None, None
    for j, s in enumerate(configs[base_i].get("states") or []):
        where = f"configurations[{base_i}].states[{j}].state"
        lv = _state_levels(s.get("state") or {}, where, source, c)
        if dim not in lv:
            raise StateError(f"the state has no {dim} level", source=source, field=f"{where}.{dim}")
        level = lv.pop(dim)
        if base is None:
            base = lv
        elif lv != base:
            raise StateError(f"the state differs from the first in more than {dim}: {lv} vs {base}", source=source,
                              field=where)
        if level not in levels:
            levels.append(level)
        if s.get("role") == "candidate-pass":
            start = level
    service = get(c.service)
    intervention = None
    for i, cf in enumerate(configs):
        name = cf.get("intervention")
        if name and name not in service.interventions:
            raise ContractError(f"{name!r} is not an intervention this host's {c.service} service applies (it has: "
                              f"{', '.join(sorted(service.interventions))})", source=source,
                              field=f"configurations[{i}].intervention")
        intervention = intervention or name
    reps = matrix.get("repetitions")
    if not isinstance(reps, int) or isinstance(reps, bool) or not 1 <= reps <= 20:
        raise ContractError(f"repetitions must be a whole number from 1 to 20, got {reps!r}", source=source,
                          field="repetitions")
    c = c.model_copy(update={"state": {**c.state, **(base or {})}})
    try:
        return sprint_mod.plan(c, dim, levels, intervention, reps, start)
    except ConfigError as exc:  # levels: name the matrix's field
        field = {"levels": f"configurations[{base_i}].states"}.get(exc.field or "", exc.field)
        raise ContractError(exc.message, source=source, field=field) from None


def freeze(plan, predicted: list[str] | None = None, evidence_class: str = "simulated") -> dict:
    """The frozen matrix of a sprint plan (`luma sprint plan`): every level of the baseline, the
    intervention at the same levels, the model's verdict per level when given."""
    base = {d: states.describe(lv) for d, lv in plan.base.levels}
    labels = [states.describe(lv) for lv in plan.levels]
    first_pass = next((i for i, v in enumerate(predicted or []) if v == "PASS"), None)

    def rows(verdicts) -> list[dict]:
        out = []
        for i, label in enumerate(labels):
            role = "level"
            if verdicts and i == first_pass:
                role = "candidate-pass"
            elif verdicts and first_pass is not None and i == first_pass - 1:
                role = "adjacent-fail"
            row = {"role": role, "state": {**base, plan.dimension: label}}
            if verdicts:
                row["predicted"] = verdicts[i]
            out.append(row)
        return out

    c = plan.contract
    configs = [{"name": "baseline", "intervention": None, "states": rows(predicted)}]
    if plan.intervention:
        configs.append({"name": "intervention", "intervention": plan.intervention, "states": rows(None)})
    body = {"kind": KIND, "frozen": True, "evidence_class": evidence_class,
            "contract": {**c.record_contract(), "load": c.load.model_dump(exclude_none=True)},
            "accepted_service": c.record_contract()["clauses"], "dimension": plan.dimension,
            "repetitions": plan.repetitions, "configurations": configs}
    body["sha256"] = digest(body)
    return body
