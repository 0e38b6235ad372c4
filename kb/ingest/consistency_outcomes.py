"""The chain outcomes of a measured PEX chain (issue 16), checked against the chain's trials at
ingest (`luma.kb.ingest.consistency` calls `check_outcomes` after the trials themselves passed):

* **diagnosis**: each restoration restores a dimension of the FAIL state, once; the crossed
  dimension's restoration is the minimum PASS state (its level, verdict PASS: the pass-state
  trials are its evidence); any other tested restoration carries its trials (re-judged, and a
  referenced one ran the FAIL state with that dimension at the restored level) and its verdict is
  theirs (a FAIL among them: FAIL; all PASS: PASS; else INCONCLUSIVE).
* **binding_resource / co_binding**: with a diagnosis, the binding resource's restoration PASSes
  and `co_binding` is exactly the other restorations that PASS (a co-binding dimension without a
  PASS restoration, or a PASS restoration left out, is refused); without one, no co-binding.
* **frontier_shift**: only on a recovered chain, of the crossed dimension; `before` is the pass
  state's level; `after` is the FAIL level (the recovered trials PASS there) or a level whose
  `after` trials all PASS; unless `below_range`, a `below` trial did not PASS; the changes are
  after - before and (after - before) / before in the canonical unit.
* **next_binding**: only with a frontier shift; no resource exactly when the shift is
  `below_range`; with restorations, the resource and co-binding ones are those that PASS.
* **decision**: one state per software configuration, the chain's (`software`: the pass state)
  or the intervention's (`intervention.software`, on a recovered chain: the FAIL state with the
  crossed dimension at the frontier's `after`).

Every refusal is a RecordError naming the field; nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from luma.errors import RecordError
from luma.kb.records import units
from luma.kb.ingest.consistency_trials import check_trial, level_key, state_difference
from luma.kb.records.pex_chain import Level, MachineState, PexChain, Restoration


def check_outcomes(chain: PexChain, trials_by_hash: Mapping[str, object], source: str | None,
                   cited: set[str]) -> None:
    """RecordError unless the chain's outcomes agree with its trials (module docstring)."""
    def refuse(field: str, message: str) -> None:
        raise RecordError(message, source=source, field=field)

    def trials(rows, where: str, state_of) -> None:
        for j, t in enumerate(rows):
            state, name = state_of(t)
            check_trial(chain, t, trials_by_hash, source, f"{where}.trials[{j}]", cited, state, name)

    crossed = chain.crossed_dimension
    if chain.diagnosis:
        _diagnosis(chain, chain.diagnosis, "diagnosis", chain.fail_state, chain.pass_state.dimensions[crossed],
                   refuse, trials)
        _bindings(chain.diagnosis, chain.binding_resource, chain.co_binding or [], "diagnosis", "binding_resource",
                  "co_binding", refuse)
    elif chain.co_binding:
        refuse("co_binding", "co-binding resources without a diagnosis: the restorations that recovered PASS are "
                             "their evidence")
    f = chain.frontier_shift
    if f is not None:
        if not chain.recovered:
            refuse("frontier_shift", "a frontier shift on a chain whose intervention did not recover PASS")
        if level_key(f.before) != level_key(chain.pass_state.dimensions[crossed]):
            refuse("frontier_shift.before", f"before is {_text(f.before)}, but the pass state has {crossed} "
                                            f"{_text(chain.pass_state.dimensions[crossed])}")
        at_fail = level_key(f.after) == level_key(chain.fail_state.dimensions[crossed])
        after_state = _with(chain.fail_state, crossed, f.after)
        for j, t in enumerate(f.trials):
            if t.state == "after" and t.verdict != "PASS":
                refuse(f"frontier_shift.trials[{j}].verdict", f"an after-state trial is {t.verdict}: the "
                                                              "re-qualified minimum PASS must PASS")
            if t.state == "below" and f.below_range:
                refuse(f"frontier_shift.trials[{j}]", "a below-state trial, but below_range says no level "
                                                      "under the new minimum PASS was given")
        trials(f.trials, "frontier_shift", lambda t: (after_state, "fail_state at frontier_shift.after")
               if t.state == "after" else (None, ""))
        if not at_fail and not any(t.state == "after" for t in f.trials):
            refuse("frontier_shift.after", f"after is {_text(f.after)}, neither the FAIL level (where the recovered "
                                           "trials PASS) nor a level with after-state trials")
        if not f.below_range and all(t.state != "below" or t.verdict == "PASS" for t in f.trials):
            refuse("frontier_shift.trials", "no below-state trial that did not PASS: without below_range, the level "
                                            "under the new minimum PASS must have been measured")
        _changes(f, crossed, refuse)
    n = chain.next_binding
    if n is not None:
        if f is None:
            refuse("next_binding", "a next binding without a frontier shift: it is diagnosed at the re-qualified "
                                   "boundary")
        if (n.resource is None) != f.below_range:
            refuse("next_binding.resource", "no next binding resource although the frontier shift has a level below "
                   "it" if n.resource is None else "a next binding resource although the frontier shift is below "
                                                   "the levels given")
        if n.diagnosis:
            _diagnosis(chain, n.diagnosis, "next_binding.diagnosis", None, f.after, refuse, trials)
            _bindings(n.diagnosis, n.resource, n.co_binding, "next_binding.diagnosis", "next_binding.resource",
                      "next_binding.co_binding", refuse)
    _decision(chain, refuse)


def _diagnosis(chain: PexChain, rows: list[Restoration], field: str, fail_state: MachineState | None,
               pass_level: Level, refuse, trials) -> None:
    """`fail_state` None: the FAIL state of the re-qualified boundary (the record does not spell
    it out, so referenced trials are not compared with it); `pass_level`: the crossed dimension's
    minimum PASS level there."""
    crossed = chain.crossed_dimension
    if rows and not any(r.dimension == crossed for r in rows):
        refuse(field, f"no restoration of the crossed dimension {crossed!r}")
    for i, r in enumerate(rows):
        where = f"{field}[{i}]"
        if r.dimension not in chain.fail_state.dimensions:
            refuse(f"{where}.dimension", f"{r.dimension!r} has no level in the FAIL state: nothing to restore")
        if r.verdict == "not-tested":
            continue
        if r.dimension == crossed:
            if r.verdict != "PASS" or level_key(r.restored_level) != level_key(pass_level):
                refuse(where, f"restoring the crossed dimension is the minimum PASS state ({crossed} "
                              f"{_text(pass_level)}, PASS), not {_text(r.restored_level)} {r.verdict}")
            if any(t.verdict != "PASS" for t in r.trials):
                refuse(f"{where}.trials", "a crossed-dimension restoration trial did not PASS")
            trials(r.trials, where, lambda t: (None if fail_state is None else chain.pass_state, "pass_state"))
            continue
        if fail_state is not None and level_key(r.restored_level) == level_key(fail_state.dimensions[r.dimension]):
            refuse(f"{where}.restored_level", f"{_text(r.restored_level)} is the FAIL state's own level: "
                                              "nothing was restored")
        if not r.trials:
            refuse(f"{where}.trials", f"a {r.verdict} restoration without trials: a tested restoration carries "
                                      "the trials its verdict rests on")
        state = None if fail_state is None else _with(fail_state, r.dimension, r.restored_level)
        trials(r.trials, where, lambda t: (state, f"fail_state with {r.dimension} restored"))
        verdicts = {t.verdict for t in r.trials}
        got = "FAIL" if "FAIL" in verdicts else "PASS" if verdicts == {"PASS"} else "INCONCLUSIVE"
        if got != r.verdict:
            refuse(f"{where}.verdict", f"verdict {r.verdict} but its trials give {got}")


def _bindings(rows: list[Restoration], resource: str | None, co: list[str], field: str, resource_field: str,
              co_field: str, refuse) -> None:
    passing = [r.dimension for r in rows if r.verdict == "PASS"]
    if resource is not None and resource not in passing:
        refuse(resource_field, f"{resource!r} has no PASS restoration in {field}: a binding resource is one whose "
                               "restoration recovers PASS")
    for i, key in enumerate(co):
        if key not in passing:
            refuse(f"{co_field}[{i}]", f"{key!r} has no PASS restoration in {field}: a co-binding resource is one "
                                       "whose restoration alone also recovers PASS")
    missing = [d for d in passing if d != resource and d not in co]
    if missing:
        refuse(co_field, f"restoring {', '.join(map(repr, missing))} also recovered PASS ({field}) but "
                         f"{co_field} leaves it out")


def _changes(f, crossed: str, refuse) -> None:
    numeric = not isinstance(f.before.value, str)
    if not numeric:
        if f.absolute_change is not None or f.relative_change is not None:
            refuse("frontier_shift.absolute_change", f"{crossed} is categorical: a shift of it has no change figure")
        return
    (b, unit), (a, _) = units.normalise(f.before.value, f.before.unit), units.normalise(f.after.value, f.after.unit)
    if f.unit is not None and f.unit != unit:
        refuse("frontier_shift.unit", f"unit {f.unit!r}, but the levels' canonical unit is {unit!r}")
    for name, got, want in (("absolute_change", f.absolute_change, a - b),
                            ("relative_change", f.relative_change, (a - b) / b if b else None)):
        if got is not None and (want is None or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)):
            refuse(f"frontier_shift.{name}", f"{name} {got:g}, but after - before gives "
                                             f"{'nothing (before is 0)' if want is None else format(want, 'g')}")


def _decision(chain: PexChain, refuse) -> None:
    seen: set[str] = set()
    for i, d in enumerate(chain.decision or []):
        where, key = f"decision[{i}]", d.software.key()
        if key in seen:
            refuse(f"{where}.software", "this software configuration has a decision already")
        seen.add(key)
        if chain.software is not None and key == chain.software.key():
            wanted, name = chain.pass_state, "the pass state"
        elif chain.intervention.software is not None and key == chain.intervention.software.key():
            if not chain.recovered:
                refuse(f"{where}.software", "a decision for the intervention's software, which did not recover PASS")
            after = chain.frontier_shift.after if chain.frontier_shift else chain.fail_state.dimensions[
                chain.crossed_dimension]
            wanted, name = _with(chain.fail_state, chain.crossed_dimension, after), "the re-qualified minimum PASS"
        else:
            refuse(f"{where}.software", "neither the chain's software nor its intervention's: the chain has no "
                                        "evidence for it")
        differs = state_difference(d.state, wanted)
        if differs:
            refuse(f"{where}.state", f"not {name}: the state is {differs}")


def _with(state: MachineState, dim: str, level: Level) -> MachineState:
    return MachineState.model_construct(dimensions={**state.dimensions, dim: level})


def _text(level: Level | None) -> str:
    if level is None:
        return "no level"
    return str(level.value) if level.unit is None else f"{level.value:g} {level.unit}"
