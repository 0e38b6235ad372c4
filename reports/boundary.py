"""The Resource Boundary Report (the Qualification Sprint deliverable): one PEX chain from the KB —
contract, minimum PASS and adjacent FAIL, binding resource with the diagnosis telemetry,
intervention and recovery, frontier shift and next binding, the trials per level with their
confidence intervals, and a deployment decision derived from those facts.

`build(kb, chain=... | sprint=...)` (else the latest qualified chain) returns a `Report`; `luma.reports.render.write`
renders it. Every figure names its evidence class (sprint trials carry their own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from luma.experiments.sprint.stats import CONFIDENCE
from luma.reports import boundary_data as data
from luma.reports import budget
from luma.reports.boundary_data import ChainFacts, TrialFact
from luma.reports.boundary_terms import Level
from luma.kb.records.synthetic import generated
from luma.kb.vocab import LUMA
from luma.reports.fmt import local, quantity, verdicts_text
from luma.reports.md_escape import fmt, join, own, record
from luma.reports.plots import Point, require, trial_plot
from luma.reports.render import Plot, Report, Section, Table

_TELEMETRY = (("peak_rss", "peak RSS"), ("runtime_footprint", "runtime footprint"), ("weight_memory", "weights"))


@dataclass
class Analysis:
    """The chain's steps as the report states them."""

    min_pass: Level
    adj_fail: Level
    context: dict[str, Level]
    baseline: str
    treated: str
    shown: list[TrialFact]  # the trials at the chain's context, plotted and tabled per level
    fail_trials: list[TrialFact]
    diagnosis: list[list[str]]
    recovery: list[TrialFact]
    requal_pass: Level | None = None
    requal_fail: Level | None = None
    next_rows: list[list[str]] = field(default_factory=list)
    next_binding: str | None = None
    reasons: list[str] = field(default_factory=list)
    #: The largest runtime footprint (bytes) measured per software variant: what a host_memory
    #: level (a budget on top of it) needs added for the deployment's total.
    footprints: dict[str, float | None] = field(default_factory=dict)
    #: The frontier shift as the chain record states it (reports/boundary_outcomes.Frontier).
    shift: object = None
    #: Restorations the runner could not make here: (dimension, why).
    not_tested: list[tuple[str, str]] = field(default_factory=list)
    co_binding: list[str] = field(default_factory=list)
    next_co_binding: list[str] = field(default_factory=list)
    #: Whether the decision's states are the chain's own deployment-decision facts.
    decided: bool = False


def _restored(t: TrialFact, ref: dict[str, Level]) -> str:
    return ", ".join(f"{d} = {lv.text()}" for d, lv in sorted(t.levels.items()) if ref.get(d) != lv) or "-"


def analyse(f: ChainFacts) -> Analysis:
    """Each step as the chain's outcome facts state it (diagnosis, frontier shift, next binding,
    decision: written by the runner, checked at ingest); the trials behind them from the sprint
    (or, without a sprint, the chain's own trials). A chain recorded before outcomes were facts
    has its steps reconstructed from the sprint trials."""
    a = _from_trials(f)
    _from_outcomes(f, a)
    return a


def _lit(value, none: str = "-") -> str:
    """Record text as a cell (shown literally: reports/md_escape.py), or `none`."""
    return record(value) if value else none


def _restoration_row(r, f: ChainFacts, pass_verdicts: str,
                     crossed_from: str = "the minimum PASS state's trials") -> list[str]:
    """A diagnosis table row from a restoration fact."""
    to = r.level.text() if r.level is not None else "—"
    if r.verdict == "not-tested":
        return [r.dimension, to, "not tested", _lit(r.reason), "—", f.evidence]
    if not r.trials:  # the crossed dimension: the minimum PASS state itself
        return [r.dimension, to, pass_verdicts or r.verdict, "-", crossed_from, f.evidence]
    causes = sorted({c for _, c in r.trials if c})
    n = len(r.trials)
    return [r.dimension, to, r.verdict, _lit(", ".join(causes)),
            f"{n} trial{'s' if n != 1 else ''} in the chain record", f.evidence]


def _from_outcomes(f: ChainFacts, a: Analysis) -> None:
    o = f.outcomes
    if o is None or not o.stated:
        return
    x = f.crossed
    if o.diagnosis:
        pass_verdicts = a.diagnosis[0][2] if a.diagnosis else "PASS"
        a.diagnosis = [_restoration_row(r, f, pass_verdicts) for r in o.diagnosis]
        a.not_tested = [(r.dimension, r.reason or "") for r in o.diagnosis if r.verdict == "not-tested"]
        a.co_binding = list(o.co_binding)
    if o.frontier is not None:
        a.shift, a.requal_pass = o.frontier, o.frontier.after
        if o.frontier.below_range:
            a.requal_fail = None
        a.next_binding = o.next_binding
        a.next_co_binding = list(o.next_co_binding)
        a.next_rows = [_restoration_row(r, f, "PASS", "the re-qualified minimum PASS") for r in o.next_diagnosis]
    base, treated = (o.decided(f.props.get(LUMA + p)) for p in ("softwareConfig", "interventionSoftwareConfig"))
    if base is not None and x in base:
        a.min_pass, a.decided = base[x], True
        a.context = {d: lv for d, lv in base.items() if d != x}
    if treated is not None and x in treated and f.recovered:
        a.requal_pass = treated[x]


def _from_trials(f: ChainFacts) -> Analysis:
    """Reconstruct each step from the sprint trials (or, without a sprint, the chain's own trials)."""
    x = f.crossed
    ctx = {d: lv for d, lv in f.fail_levels.items() if d != x}
    reasons = not_qualified_because(f)
    mp, af = f.pass_levels[x], f.fail_levels[x]
    if not f.sprint_trials:
        for t in f.chain_trials:
            t.levels = dict(f.pass_levels if t.phase == "pass" else f.fail_levels)
        intervention = f.entity.get("intervention", "intervention")
        for t in f.chain_trials:
            t.variant = intervention if t.phase == "recovered" else "baseline"
        fails = [t for t in f.chain_trials if t.phase == "fail"]
        diag = [[x, mp.text(), verdicts_text([t.verdict for t in f.chain_trials if t.phase == "pass"]) or "PASS",
                 "-", "the chain record (its diagnosis trials are not in this KB)", f.evidence]]
        return Analysis(mp, af, ctx, "baseline", intervention, list(f.chain_trials), fails, diag,
                        [t for t in f.chain_trials if t.phase == "recovered"], reasons=reasons,
                        footprints=_footprints(f.chain_trials))

    trials = f.sprint_trials
    at_ctx = [t for t in trials if {d: lv for d, lv in t.levels.items() if d != x} == ctx]
    baseline = next((t.variant for t in trials if t.phase == "boundary"), "baseline")
    recovery = [t for t in trials if t.phase == "intervention"]
    treated = recovery[0].variant if recovery else f.entity.get("intervention", "intervention")
    shown = [t for t in at_ctx if t.phase in ("boundary", "intervention", "requalify")]
    fails = [t for t in at_ctx if t.phase == "boundary" and t.levels.get(x) == af]
    pass_verdicts = [t.verdict for t in at_ctx if t.phase == "boundary" and t.levels.get(x) == mp]
    diag = [[x, mp.text(), verdicts_text(pass_verdicts), "-", "the minimum PASS state's trials", f.evidence]]
    diag += [[_restored(t, f.fail_levels), "", t.verdict, _lit(t.cause), f"trial {t.sequence}", t.evidence]
             for t in trials if t.phase == "diagnosis"]
    a = Analysis(mp, af, ctx, baseline, treated, shown, fails, diag, recovery, reasons=reasons,
                 footprints=_footprints(at_ctx))
    treated_runs = [t for t in at_ctx if t.phase in ("intervention", "requalify")]
    passes = sorted((t.levels[x] for t in treated_runs if t.verdict == "PASS" and x in t.levels), key=Level.order)
    if passes and any(t.phase == "requalify" for t in trials):
        a.requal_pass = passes[0]
        below = sorted((t.levels[x] for t in treated_runs if t.verdict == "FAIL" and x in t.levels
                        and t.levels[x].order() < a.requal_pass.order()), key=Level.order)
        a.requal_fail = below[-1] if below else None
    if a.requal_fail is not None:
        ref = {**ctx, x: a.requal_fail}
        a.next_rows = [[x, a.requal_pass.text(), "PASS", "-", "the re-qualified minimum PASS", f.evidence]]
        a.next_rows += [[_restored(t, ref), "", t.verdict, _lit(t.cause), f"trial {t.sequence}", t.evidence]
                        for t in trials if t.phase == "next-binding"]
        a.next_binding = x
    return a


def _footprints(trials: list[TrialFact]) -> dict[str, float | None]:
    variants = dict.fromkeys(t.variant for t in trials)
    return {v: budget.footprint(t.obs for t in trials if t.variant == v) for v in variants}


def _over(dimension: str, level: Level, foot: float | None) -> str:
    """A level as a decision names it; a budget level with the total its deployment needs."""
    text = f"{dimension} ≥ {level.text()}"
    if not budget.is_budget(dimension) or level.value is None:
        return text
    if foot is None:
        return text + " over the runtime's own footprint (not reported: add it)"
    if foot == 0:
        return text + " in all"
    return text + f" over the runtime's footprint, {quantity(budget.total(level.value, foot), 'byte')} in all"


def budget_sentence(f: ChainFacts, a: Analysis) -> str:
    """What the decision's budget levels (host_memory) mean, with the footprints measured."""
    dims = [d for d in dict.fromkeys([f.crossed, *sorted(a.context)]) if budget.is_budget(d)]
    if not dims:
        return ""
    shown = {k: v for k, v in a.footprints.items() if v is not None and k in (a.baseline, a.treated)}
    if shown and not any(shown.values()):
        return f" {' and '.join(dims)}: {budget.WHOLE}."
    feet = [f"{quantity(v, 'byte')} ({k})" for k, v in shown.items()]
    measured = (f"; the runtime's footprint measured with these trials: {', '.join(feet)}" if feet else
                "; this evidence does not report the runtime's footprint, so the total is not known from it")
    return f" {' and '.join(dims)}: {budget.MEANING}{measured}."


def _in_all(f: ChainFacts, a: Analysis, level: Level, variant: str) -> str:
    """" (a budget on top of the runtime's 80.8 MiB footprint: 88.8 MiB in all)" for a budget level."""
    if not budget.is_budget(f.crossed) or level.value is None:
        return ""
    foot = a.footprints.get(variant)
    if foot is None:
        return " (a budget on top of the runtime's footprint, which this evidence does not report)"
    if foot == 0:
        return " (the whole server's data segment)"
    return (f" (a budget on top of the runtime's {quantity(foot, 'byte')} footprint: "
            f"{quantity(budget.total(level.value, foot), 'byte')} in all)")


def not_qualified_because(f: ChainFacts) -> list[str]:
    """Why the rules did not qualify the chain, in the terms of their last run ([] when they did).

    Whether a chain is qualified is what rule qualified-boundary derived, never decided here; these
    are the facts of the chain a reader checks against the rule's criteria and the parameters of
    its run, to say why."""
    if f.qualified:
        return []
    if f.run is None:
        return ["the rules have not run on this KB (`luma rules run` qualifies chains)"]
    reasons = [r for r, bad in ((f"evidence is {f.evidence}, not measured", f.evidence != "measured"),
                                ("the intervention did not recover PASS", not f.recovered),
                                ("PASS and FAIL states differ in more than the crossed dimension", not f.same_context))
               if bad]
    needed = f.run.parameters.get("min_repetitions")
    if needed is not None and needed.isdigit() and f.repetitions < int(needed):
        reasons.append(f"{_reps(f.repetitions)}, fewer than the {needed} of the rules' last run (min_repetitions)")
    if f.evidence == "measured" and not f.record.get("runner"):
        reasons.append("not signed by a runner key")
    elif f.record.get("revoked"):
        reasons.append(fmt("its runner key was revoked ({})", f.record['revoked']))
    return reasons or [f"not derived by {f.run.text()}" + (f" ({f.run.stale_note()})" if f.run.stale_note() else "")]


def _clause_text(c: data.Clause) -> str:
    return f"{c.metric} {c.op} {quantity(c.value, c.unit)}"


def _obs_cell(t: TrialFact, metric: str) -> str:
    v = t.obs.get(metric)
    if v is None:
        return fmt("— ({})", t.cause) if t.cause else "—"
    lo, hi = t.obs.get(metric + ".ci_low"), t.obs.get(metric + ".ci_high")
    text = quantity(v[0], v[1])
    return f"{text} [{quantity(lo[0], lo[1])} – {quantity(hi[0], hi[1])}]" if lo and hi else text


def _telemetry(t: TrialFact) -> list[str]:
    return [quantity(*t.obs[m]) if m in t.obs else "—" for m, _ in _TELEMETRY]


def _fails(a: Analysis) -> str:
    if not a.fail_trials:
        return "as the chain record states; its trials there are not in this KB"
    causes = sorted({t.cause for t in a.fail_trials if t.cause})
    return verdicts_text([t.verdict for t in a.fail_trials]) + (fmt("; cause {}", ', '.join(causes)) if causes else "")


def _binding_text(f: ChainFacts, a: Analysis) -> str:
    if f.binding != f.crossed:  # a record may name another resource than the one it crossed
        return fmt("Binding resource: **{}**, as the chain record states (the crossed dimension is "
                   "{}); its diagnosis trials are not in this KB.", f.binding, f.crossed)
    others = a.co_binding or [r[0] for r in a.diagnosis[1:] if r[2] == "PASS"]
    text = (fmt("Binding resource: **{}** — restoring it alone at the FAIL state recovers PASS", f.binding)
            + (fmt("; restoring {} alone also did: a **co-binding** boundary, bound by {}.",
                   ', '.join(others), ' and '.join([f.binding, *others])) if others else "; no other restoration did."))
    if a.not_tested:
        text += fmt(" Not tested on the runner's host: {}.", "; ".join(f"{d} ({why})" for d, why in a.not_tested))
    return text


def _reps(n: int) -> str:
    return f"{n} repetition{'s' if n != 1 else ''}"


def _shift(a: Analysis) -> str:
    if a.requal_pass is None:
        return "not measured"
    fr = a.shift
    if fr is not None and fr.absolute is not None and fr.relative is not None:  # as the chain record states it
        sign = "−" if fr.absolute <= 0 else "+"
        return (f"{fr.before.text()} → {fr.after.text()} ({sign}{quantity(abs(fr.absolute), fr.before.unit)}, "
                f"×{1 + fr.relative:.2f})")
    if a.min_pass.value is None or a.requal_pass.value is None:
        return f"{a.min_pass.text()} → {a.requal_pass.text()}"
    saved = a.min_pass.value - a.requal_pass.value
    ratio = a.requal_pass.value / a.min_pass.value if a.min_pass.value else float("nan")
    sign = "−" if saved >= 0 else "+"  # an intervention may also move the boundary up
    moved = quantity(abs(saved), a.min_pass.unit)
    return f"{a.min_pass.text()} → {a.requal_pass.text()} ({sign}{moved}, ×{ratio:.2f})"


def runner_text(record: dict, evidence: str) -> str:
    """Who measured a record: its runner key's name and fingerprint (issue 14), or why none."""
    if record.get("runner"):
        revoked = f" — REVOKED {record['revoked']}: no longer qualifies" if record.get("revoked") else ""
        return fmt("{} (key `{}`)", record['runner'], record['fingerprint']) + revoked
    if evidence == "measured":
        return "no attestation (ingested before runner keys): never qualifies"
    return f"— ({evidence} evidence: not signed by a runner)"


def decision(f: ChainFacts, a: Analysis) -> str:
    """The deployment decision, derived from the chain's facts only."""
    if is_synthetic(f):
        # A synthetic chain is never measured, except signed in a throwaway benchmark project, where
        # it qualifies under the rules; a reader must never take it for a measurement (issues 14, 28).
        return ("**Synthetic chain: generated for benchmarks and examples (`kb/records/synthetic.py`), not a "
                "measurement — this shows the method, not hardware.** " + _decision(f, a))
    return _decision(f, a)


def _decision(f: ChainFacts, a: Analysis) -> str:
    x, e = f.crossed, f.entity
    if a.reasons:
        return (fmt("No deployment decision: this chain is not a qualified boundary ({}). ", join('; ', a.reasons))
                + "Treat its levels as a starting point for a measured sprint.")
    cat = a.min_pass.category is not None

    def at(lv: Level, variant: str) -> str:
        return f"{x} = {lv.text()}" if cat else _over(x, lv, a.footprints.get(variant))

    feet = [v for v in a.footprints.values() if v is not None]
    ctx = ", ".join(f"{d} = {lv.text()}" if not budget.is_budget(d) else
                    _over(d, lv, max(feet) if feet else None).replace(" ≥ ", " = ", 1)
                    for d, lv in sorted(a.context.items()))
    where = fmt("`{}` under contract `{}` on {}", e.get('workload', '?'), e.get('contract', '?'),
                e.get('architecture', '?'))
    plain = "without the intervention" if a.baseline == "baseline" else record(a.baseline)
    text = fmt("Deploy {} at {} ({})", where, at(a.min_pass, a.baseline), own(plain))
    if a.requal_pass is not None:
        text += fmt(", or at {} with {} — a frontier shift of {}", at(a.requal_pass, a.treated), a.treated, _shift(a))
    elif f.recovered:
        text += fmt(", or at {} with {} (recovered there ×{}; the boundary with it in place was not re-qualified)",
                    at(a.adj_fail, a.treated), a.treated, len(a.recovery) or f.repetitions)
    text += fmt("; the other dimensions as tested ({}).", ctx) if ctx else "."
    if a.next_binding:
        below = fmt(" ({} fails with {})", a.requal_fail.text(), a.treated) if a.requal_fail is not None else ""
        co = fmt(", with {} co-binding", ', '.join(a.next_co_binding)) if a.next_co_binding else ""
        text += fmt(" Below that, {} binds again", a.next_binding) + below + co + "."
    who = (fmt(" by runner {} (key `{}`)", f.record['runner'], f.record['fingerprint'])
           if f.record.get("runner") else "")
    return text + budget_sentence(f, a) + fmt(" Evidence: {}", f.evidence) + who + f", {_reps(f.repetitions)}."


def is_synthetic(f: ChainFacts) -> bool:
    """Whether the chain's record says it was generated by kb/records/synthetic.py."""
    return generated(f.provenance.get("tool"))


def _plots(f: ChainFacts, a: Analysis) -> list[Plot]:
    x = f.crossed
    levels = sorted({t.levels[x] for t in a.shown if x in t.levels}, key=Level.order)
    index = {lv: i for i, lv in enumerate(levels)}
    boundary = None
    if a.min_pass in index and a.adj_fail in index and abs(index[a.min_pass] - index[a.adj_fail]) == 1:
        boundary = (index[a.min_pass] + index[a.adj_fail]) / 2
    out = []
    for c in f.clauses:
        pts = []
        for t in a.shown:
            if x not in t.levels:
                continue
            v = t.obs.get(c.metric)
            lo, hi = t.obs.get(c.metric + ".ci_low"), t.obs.get(c.metric + ".ci_high")
            pts.append(Point(index[t.levels[x]], v[0] if v else None, lo[0] if lo else None, hi[0] if hi else None,
                             t.verdict, t.variant, t.cause or ""))
        if not pts:
            continue
        pid = "plot-" + re.sub(r"[^a-z0-9]+", "-", c.metric.lower()).strip("-")
        pid += f"-{len(out)}" if any(p.id == pid for p in out) else ""  # two clauses on one metric
        svg = trial_plot(pid, c.metric, [lv.text() for lv in levels], pts, c.unit, c.value, c.op, boundary,
                         level_label=x)
        what = (f"the observed {c.metric} per trial with its {CONFIDENCE:.0%} bootstrap interval (error bars)"
                if any(c.metric + ".ci_low" in t.obs for t in a.shown) else f"the observed {c.metric} per trial")
        missing = sum(p.value is None for p in pts)
        gap = (f"; {missing} trial{'s' if missing != 1 else ''} without a {c.metric} value drawn as missing, in "
               "the strip under the plot" if missing else "")
        out.append(Plot(pid, svg, f"{c.metric} by {x} level: {what}, the contract threshold "
                                  f"({_clause_text(c)}) dashed, marker by verdict{gap} ({f.evidence} evidence)."))
    return out


def build(kb, chain: str | None = None, sprint: str | None = None) -> Report:
    """The report of one chain: `chain` (IRI), the chain of `sprint`, else the latest qualified one."""
    require()
    if chain:
        iri = data.chain_of(kb, chain)
    else:
        iri = data.chain_of_sprint(kb, sprint) if sprint else data.latest_qualified(kb)
    f = data.gather(kb, iri)
    a = analyse(f)
    return _report(f, a)


def _report(f: ChainFacts, a: Analysis) -> Report:
    e, x = f.entity, f.crossed
    metrics = [c.metric for c in f.clauses]
    qualification = "qualified" if not a.reasons else "not qualified: " + "; ".join(a.reasons)
    facts = [
        ("Workload", fmt("{} (model {}, task {})", e.get('workload', '?'), e.get('model', '?'), e.get('task', '?'))),
        ("Architecture", fmt("{} ({}, {})", e.get('architecture', '?'), local(e.get('archKind', '?')),
                             e.get('vendor', '?'))),
        ("Contract", fmt("{}: {}", e.get('contract', '?'), "; ".join(_clause_text(c) for c in f.clauses))),
        ("Crossed dimension", x),
        ("Minimum PASS", f"{x} = {a.min_pass.text()}" + _in_all(f, a, a.min_pass, a.baseline)),
        ("Adjacent FAIL", f"{x} = {a.adj_fail.text()}"),
        ("Binding resource", f.binding + (f" (co-binding: {', '.join(a.co_binding)})" if a.co_binding else "")),
        ("Intervention", fmt("{} ({})", e.get('intervention', '?'), local(e.get('ivKind', '?')).lower())),
        ("Recovered", f"{'yes' if f.recovered else 'no'} ({_reps(f.repetitions)})"),
        ("Frontier shift", _shift(a)), ("Evidence class", f.evidence),
        ("Qualification", f"{qualification} ({f.rule_status})"),
    ]
    states = Table("table-states", ["dimension", "minimum PASS", "adjacent FAIL", "evidence"],
                   [[d + (" (crossed)" if d == x else ""), f.pass_levels[d].text() if d in f.pass_levels else "—",
                     f.fail_levels[d].text() if d in f.fail_levels else "—", f.evidence]
                    for d in sorted(set(f.pass_levels) | set(f.fail_levels))], "The two states, level by level")
    tele = Table("table-fail-telemetry", ["trial", "phase", "state", "verdict", "cause"] + [n for _, n in _TELEMETRY]
                 + ["evidence"], [[str(t.sequence), t.phase, f"{x} = {t.levels[x].text()}" if x in t.levels else "-",
                                   t.verdict, _lit(t.cause), *_telemetry(t), t.evidence] for t in a.fail_trials],
                 f"Telemetry of the FAIL trials at {x} = {a.adj_fail.text()}")
    diag = Table("table-diagnosis", ["restored", "to", "verdict", "cause", "from", "evidence"], a.diagnosis,
                 "Diagnosis: each candidate dimension restored alone at the FAIL state")
    recov = Table("table-recovery", ["trial", "variant", "state", "verdict"] + metrics + [n for _, n in _TELEMETRY]
                  + ["evidence"], [[str(t.sequence), record(t.variant), _restored(t, {}) if t.levels else "-",
                                    t.verdict,
                                    *(_obs_cell(t, m) for m in metrics), *_telemetry(t), t.evidence]
                                   for t in a.recovery], f"{a.treated} at the FAIL state")
    budgeted = budget.is_budget(x)
    frontier_rows = [] if a.requal_pass is None else [
        [record(a.baseline), a.min_pass.text(), a.adj_fail.text(), f.evidence],
        [record(a.treated), a.requal_pass.text(), a.requal_fail.text() if a.requal_fail else
         "below the levels tried" if a.shift is None or a.shift.below_range else
         "measured below it (the chain record's trials)", f.evidence]]
    if budgeted and frontier_rows:  # the total a deployment of each variant needs
        for row, lv, v in ((frontier_rows[0], a.min_pass, a.baseline), (frontier_rows[1], a.requal_pass, a.treated)):
            foot = a.footprints.get(v)
            row[3:3] = [quantity(budget.total(lv.value, foot), "byte") if foot is not None
                        else "footprint not reported"]
    frontier = Table("table-frontier", ["variant", "minimum PASS", "adjacent FAIL"]
                     + (["deployment needs (level + runtime footprint)"] if budgeted else []) + ["evidence"],
                     frontier_rows, f"The boundary of {x} before and after the intervention")
    trials = Table("table-trials", ["trial", "phase", x, "variant", "verdict", "cause"] + metrics + ["evidence"],
                   [[str(t.sequence), t.phase, t.levels[x].text() if x in t.levels else "-", record(t.variant),
                     t.verdict,
                     _lit(t.cause), *(_obs_cell(t, m) for m in metrics), t.evidence]
                    for t in sorted(a.shown, key=lambda t: (t.levels.get(x, Level()).order(), t.variant, t.sequence))],
                   f"Trials per level (percentiles with their {CONFIDENCE:.0%} bootstrap interval)")
    source = (fmt("sprint `{}` ({} pex-trial records)", f.sprint, len(f.sprint_trials)) if f.sprint
              else "the trials inside the chain record (no sprint trials in this KB)")
    sections = [
        Section("contract", "Contract", [fmt("The accepted service `{}`: every clause must hold in a trial for a PASS. "
                                             "Workload `{}` on {}.", e.get('contract', '?'), e.get('workload', '?'),
                                             e.get('architecture', '?'))],
                [Table("table-clauses", ["metric", "op", "threshold"],
                       [[c.metric, c.op, quantity(c.value, c.unit)] for c in f.clauses], "Contract clauses")]),
        Section("boundary", "Minimum PASS and adjacent FAIL",
                [f"Crossed dimension **{x}**: {a.min_pass.text()} passes, {a.adj_fail.text()} fails ({_fails(a)})."
                 + (f" Its levels are {budget.MEANING}; the runtime's footprint is in the telemetry below."
                    if budgeted else "")],
                [states]),
        Section("binding", "Binding resource and telemetry",
                [_binding_text(f, a)],
                [diag] + ([tele] if a.fail_trials else [])),
        Section("intervention", "Intervention and recovery",
                [fmt("`{}` ({}) applied at {} = {}: recovered = {}, {} under the same contract.",
                     e.get('intervention', '?'), local(e.get('ivKind', '?')).lower(), x, a.adj_fail.text(),
                     'yes' if f.recovered else 'no', _reps(f.repetitions))],
                [recov] if a.recovery else [],
                empty="The chain record lists no recovery trials; it states the recovery and its repetitions only."),
        Section("frontier", "Frontier shift and next binding",
                [fmt("With {} in place the minimum PASS moves {}.", a.treated, _shift(a))
                 + (fmt(" Next binding resource: **{}**.", a.next_binding) if a.next_binding else
                    " Nothing failed below it among the levels tried: the next boundary lies below them.")]
                if a.requal_pass is not None else [],
                [frontier] + ([Table("table-next-binding", ["restored", "to", "verdict", "cause", "from", "evidence"],
                                     a.next_rows, "Diagnosis at the re-qualified FAIL state")] if a.next_rows else [])
                if a.requal_pass is not None else [],
                empty=("Not measured: the sprint re-qualified nothing (the intervention did not recover PASS at "
                       "the FAIL level)." if f.sprint else
                       "Not measured for this chain: only `luma sprint run` re-qualifies the boundary with the "
                       "intervention in place, and no sprint trials of this chain are in the KB.")),
        Section("trials", "Trials per level", [f"Source: {source}."] if a.shown else [],
                [trials, *_plots(f, a)] if a.shown else [], empty="The chain record lists no trials."),
        Section("decision", "Deployment decision", [decision(f, a)]),
        Section("provenance", "Record and provenance", [], [Table("table-provenance", ["what", "value"], [
            ["chain", fmt("`{}`", f.iri)], ["record (sha256)", fmt("`{}`", f.record.get('hash', '?'))],
            ["measured by (runner key)", runner_text(f.record, f.evidence)],
            ["ingested", record(f.record.get("at", "?"))], ["submitter", record(f.record.get("who", "?"))],
            *([k, record(f.provenance[k])] for k in ("tool", "host", "startedAtTime", "gitRevision")
              if k in f.provenance),
            *([record(k), record(", ".join(v))] for k, v in sorted(f.environment.items())),
            ["sprint", record(f.sprint) if f.sprint else "—"]])]),
    ]
    return Report("boundary", f"Resource Boundary Report: {e.get('workload', '?')}, {x}",
                  fmt("Contract `{}` on {} — {} evidence", e.get('contract', '?'), e.get('architecture', '?'),
                      f.evidence),
                  facts, sections, callout=decision(f, a),
                  footer=fmt("Made by `luma report boundary` from chain `{}` and {}. "
                             "Every table and plot names the evidence class of its figures.", f.iri, own(source)))
