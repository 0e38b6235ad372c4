"""The boundary among trial records: the minimum PASS state of the crossed dimension, the adjacent
FAIL below it, the restorations at the FAIL state (diagnosis) and the intervention's trials there —
the sprint's own definitions (experiments/sprint/pex.py, search.py) read from records instead of
run. Whatever is not there is said, one line each (`Boundary.missing`), never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from luma.experiments.chains.selection import TrialRecord
from luma.experiments.sprint.states import ISA_ORDER, describe
from luma.kb.ingest.consistency_trials import level_key, state_difference
from luma.kb.records import units
from luma.kb.records.pex_chain import Level, MachineState


@dataclass(frozen=True)
class Service:
    """What the contract says of its variants: the baseline the boundary is searched with, its
    interventions (name -> variant) and its sprint's crossed dimension (None when unknown)."""

    baseline: str | None = None
    interventions: dict[str, str] = field(default_factory=dict)
    dimension: str | None = None


@dataclass
class Boundary:
    """What the records show: the trials of each role, and what is missing for a chain."""

    dimension: str | None = None
    pass_trials: list[TrialRecord] = field(default_factory=list)
    fail_trials: list[TrialRecord] = field(default_factory=list)
    recovered_trials: list[TrialRecord] = field(default_factory=list)
    #: (dimension, restored level, its trials) of each restoration at the FAIL state.
    restorations: list[tuple[str, Level, list[TrialRecord]]] = field(default_factory=list)
    intervention: str | None = None
    variant: str | None = None
    #: (level text, verdicts) of each level of the crossed dimension tried, least first.
    levels: list[tuple[str, list[str]]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def find(trials: list[TrialRecord], service: Service, dimension: str | None = None, intervention: str | None = None,
         variant: str | None = None, categorical: frozenset[str] = frozenset()) -> Boundary:
    """The boundary among `trials` (all of one contract, workload, architecture and evidence
    class); `dimension`, `intervention` and `variant` as the user named them (else the
    contract's); `categorical`: the dimensions whose levels are categories."""
    b = Boundary()
    baseline = service.baseline
    if baseline is None:
        b.missing.append("the contract is neither shipped nor in this project, so its baseline variant is unknown: "
                         "name it with --baseline")
        return b
    base = [t for t in trials if t.model.variant == baseline]
    if not base:
        b.missing.append(f"no trial of the baseline variant {baseline!r} (variants tried: "
                         f"{', '.join(sorted({t.model.variant for t in trials}))})")
        return b
    b.dimension = dimension or _crossed(base, service, b.missing)
    if b.dimension is None:
        return b
    line = _line(base, b.dimension, categorical, b.missing)
    if line is None:
        return b
    _boundary(b, line)
    if b.missing:
        return b
    fail_state = b.fail_trials[0].model.state
    b.restorations = _restorations(base, fail_state, b.dimension, b.missing)
    _intervention(b, trials, service, fail_state, intervention, variant)
    return b


def state_text(state: MachineState) -> str:
    """`compute 1 core, host_memory 4 MiB`."""
    return ", ".join(f"{k} {describe(v)}" for k, v in state.dimensions.items())


def verdicts_text(verdicts: list[str]) -> str:
    """`PASS ×3`, `FAIL ×1, INCONCLUSIVE ×1`."""
    return ", ".join(f"{v} ×{verdicts.count(v)}" for v in ("PASS", "FAIL", "INCONCLUSIVE") if v in verdicts)


def _crossed(base: list[TrialRecord], service: Service, missing: list[str]) -> str | None:
    """The crossed dimension: the one the baseline states vary in, or the contract's sprint's
    among several."""
    varying = sorted({k for t in base for k in t.model.state.dimensions
                      if len({_key(u.model.state.dimensions.get(k)) for u in base}) > 1})
    if service.dimension in varying or len(varying) == 1:
        return service.dimension if service.dimension in varying else varying[0]
    if not varying:
        missing.append(f"the baseline trials all ran one state ({state_text(base[0].model.state)}): a chain needs "
                       "levels of a crossed dimension")
    else:
        missing.append(f"the baseline trials vary in {len(varying)} dimensions ({', '.join(varying)}): name the "
                       "crossed one with --dimension")
    return None


def _line(base: list[TrialRecord], dim: str, categorical: frozenset[str], missing: list[str]):
    """{level order: trials} of the baseline trials along `dim`, the other dimensions held; None
    (and why in `missing`) when there is no one such line."""
    if dim in categorical and dim != "runtime":
        missing.append(f"{dim} is categorical: its levels have no order, so no minimum PASS")
        return None
    contexts: dict[tuple, dict] = defaultdict(lambda: defaultdict(list))
    for t in base:
        level = t.model.state.dimensions.get(dim)
        if level is not None:
            rest = tuple(sorted((k, _key(v)) for k, v in t.model.state.dimensions.items() if k != dim))
            contexts[rest][_order(dim, level)].append(t)
    if any(None in levels for levels in contexts.values()):
        missing.append(f"{dim} has levels without an order here: no minimum PASS")
        return None
    lines = [levels for levels in contexts.values() if len(levels) > 1]
    if len(lines) == 1:
        return dict(sorted(lines[0].items()))
    if not contexts:
        missing.append(f"no baseline trial has a {dim} level")
    elif lines:
        held = [state_text(next(iter(lv.values()))[0].model.state) for lv in lines]
        missing.append(f"the baseline trials cross {dim} at {len(lines)} settings of the other dimensions "
                       f"({'; '.join(held)}): narrow the selection (--sprint, --workload, --architecture)")
    else:
        missing.append(_no_line(base, dim))
    return None


def _no_line(base: list[TrialRecord], dim: str) -> str:
    """Why no two baseline states differ in `dim` alone: the closest PASS / FAIL pair's difference."""
    passing = [t.model.state for t in base if t.model.verdict == "PASS"]
    failing = [t.model.state for t in base if t.model.verdict == "FAIL"]
    if passing and failing:
        pairs = [sorted(k for k in set(p.dimensions) | set(f.dimensions)
                        if _key(p.dimensions.get(k)) != _key(f.dimensions.get(k))) for p in passing for f in failing]
        dims = min(pairs, key=len)
        return (f"the PASS and FAIL states differ in {len(dims)} dimensions ({', '.join(dims)}): a chain crosses "
                f"one dimension, the others held" if len(dims) != 1 else
                f"the PASS and FAIL states differ in {dims[0]}, not in the crossed dimension {dim}")
    return f"only one level of {dim} was tried with the other dimensions held: no boundary to find"


def _boundary(b: Boundary, line: dict) -> None:
    """Minimum PASS = the least level whose trials all PASS; adjacent FAIL = the level tried just
    below it, which must hold a FAIL; no FAIL above the minimum PASS."""
    dim = b.dimension
    rows = [(describe(ts[0].model.state.dimensions[dim]), [t.model.verdict for t in ts]) for ts in line.values()]
    b.levels = rows
    tried = "levels tried " + ", ".join(f"{text} ({verdicts_text(v)})" for text, v in rows)
    passing = [i for i, (_, v) in enumerate(rows) if set(v) == {"PASS"}]
    if not passing:
        b.missing.append(f"no level of {dim} PASSes in every repetition: {tried}")
        return
    i = passing[0]
    groups = list(line.values())
    above = [text for text, v in rows[i + 1:] if "FAIL" in v]
    if above:
        b.missing.append(f"{dim} FAILs at {', '.join(above)}, above the minimum PASS {rows[i][0]}: the trials do not "
                         f"show one boundary ({tried})")
    if i == 0:
        b.missing.append(f"no FAIL at an adjacent level: {tried}")
        return
    text, verdicts = rows[i - 1]
    if "FAIL" not in verdicts:
        b.missing.append(f"INCONCLUSIVE trial at {dim} {text}, the level below the minimum PASS {rows[i][0]}: "
                         f"no FAIL at the adjacent level ({tried})")
        return
    b.pass_trials, b.fail_trials = groups[i], groups[i - 1]


def _restorations(base: list[TrialRecord], fail_state: MachineState, crossed: str, missing: list[str]):
    """The baseline trials at the FAIL state with one other dimension raised, by dimension."""
    found: dict[str, dict] = defaultdict(dict)
    for t in base:
        state = t.model.state
        if set(state.dimensions) != set(fail_state.dimensions):
            continue
        changed = [k for k in state.dimensions if _key(state.dimensions[k]) != _key(fail_state.dimensions[k])]
        if len(changed) == 1 and changed[0] != crossed:
            k = changed[0]
            up, down = _order(k, state.dimensions[k]), _order(k, fail_state.dimensions[k])
            if up is not None and down is not None and up > down:
                found[k].setdefault(_key(state.dimensions[k]), []).append(t)
    out = []
    for k in sorted(found):
        if len(found[k]) > 1:
            levels = ", ".join(describe(ts[0].model.state.dimensions[k]) for ts in found[k].values())
            missing.append(f"restorations of {k} at {len(found[k])} levels ({levels}): a diagnosis restores a "
                           "dimension once; narrow the selection")
            continue
        [ts] = found[k].values()
        out.append((k, ts[0].model.state.dimensions[k], ts))
    return out


def _intervention(b: Boundary, trials, service: Service, fail_state: MachineState, name, variant) -> None:
    at_fail = [t for t in trials if t.model.variant != service.baseline and state_difference(t.model.state,
                                                                                            fail_state) is None]
    where = f"the FAIL state ({state_text(fail_state)})"
    tried = sorted({t.model.variant for t in at_fail})
    if name is not None:
        variant = variant or service.interventions.get(name)
        if variant is None:
            b.missing.append(f"the contract names no intervention {name!r}"
                             + (f" (it names: {', '.join(sorted(service.interventions))})" if service.interventions
                                else "") + ": give its variant with --variant")
            return
    else:
        named = [(n, v) for n, v in sorted(service.interventions.items()) if v in tried]
        if not service.interventions:
            b.missing.append("the contract names no intervention: name it with --intervention NAME --variant V"
                             + (f" (variants tried at {where}: {', '.join(tried)})" if tried else ""))
            return
        if len(named) > 1:
            b.missing.append(f"trials of {len(named)} interventions at {where} "
                             f"({', '.join(n for n, _ in named)}): name one with --intervention")
            return
        if not named:
            b.missing.append(f"no trial of the intervention at {where}: the contract names "
                             + ", ".join(f"{n} (variant {v})" for n, v in sorted(service.interventions.items()))
                             + (f"; variants tried there: {', '.join(tried)}" if tried else ""))
            return
        name, variant = named[0]
    b.intervention, b.variant = name, variant
    b.recovered_trials = [t for t in at_fail if t.model.variant == variant]
    if not b.recovered_trials:
        b.missing.append(f"no trial of the intervention {name} (variant {variant}) at {where}")


def _key(level: Level | None):
    return None if level is None else level_key(level)


def _order(dim: str, level: Level):
    """Sort key of a level along its dimension (more of the resource later; the runtime ISA by
    capability); None for a category without an order."""
    if not isinstance(level.value, str) and level.unit is not None:
        return units.normalise(level.value, level.unit)[0]
    isa = str(level.value).removeprefix("ATEN_CPU_CAPABILITY=")
    return ISA_ORDER.index(isa) if dim == "runtime" and isa in ISA_ORDER else None
