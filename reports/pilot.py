"""The Economic Control Report: one Economic Control Pilot run (`luma pilot run`), read from its
pilot.json alone (reports/pilot_data.py) — the acceptance figures under the title, then Setup,
Timeline, Decisions, Realized value vs baselines, The library, Evidence classes and Notes.

Every figure names its evidence class as the run states it (the file's `evidence` block): rates,
latency and errors are measured, cost is projected from measured serving time and the price
table, energy simulated unless counters were read. A run that did not finish is rendered with
what it wrote, and the report says what is missing. `build(pilot, source)` returns a report;
`write(pilot, source, out)` renders it with `luma.reports.render.write`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from luma.reports.fmt import num, seconds_text
from luma.reports.md_escape import fmt, record
from luma.reports.pilot_data import HINDSIGHT, PILOT, STATIC, Estimate, Evidence, Pilot, Segment, StateLabels, finite
from luma.reports.plots import require, timeline_plot
from luma.reports.render import Plot, Report, Section, Table, Written, write as render_write

_TITLES = {PILOT: "Economic Control Pilot", STATIC: "Static: largest qualified state",
           HINDSIGHT: "Hindsight: best single state"}
_NEEDED_FOR = {STATIC: "the saving vs the static largest state", HINDSIGHT: "the comparison with the hindsight-best state"}
_MISSING = {"machine": "the machine is not known", "trace": "the trace is not known", "window_s": "the window length "
            "is not known", "guardrails": "the guardrails are not known", "price_table": "the prices behind every cost "
            "figure are not known", "energy": "the energy figures have no stated source", "library": "the states have "
            "no labels, capacities or costs", "segments": "nothing was measured", "decisions": "no decision is known",
            "figures": "the acceptance figures are computed here from the segments' totals where they can be",
            "evidence": "no figure's evidence class is stated"}


@dataclass
class PilotReport(Report):
    """A report with warnings the pilot templates show in a box under the title (example
    prices, simulated energy, a run that did not finish): they qualify every figure below."""

    warnings: list[str] = field(default_factory=list)


# -- numbers as people read them ----------------------------------------------------------------


def _lit(value) -> str:
    """A value the run recorded, shown literally (reports/md_escape.py), or "—"."""
    return record(value) if value else "—"


def _sci(x: float) -> str:
    """Plain in the ordinary range, else scientific with a short exponent (2.4e-6): costs per
    accepted output are millionths of a currency unit."""
    if x == 0 or 0.01 <= abs(x) < 1e6:
        return num(x)
    mantissa, exp = f"{x:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exp)}"


def _money(x: float | None, currency: str) -> str:
    x = finite(x)
    return "—" if x is None else f"{_sci(x)} {currency}".strip()


def _joules(x: float | None) -> str:
    x = finite(x)
    if x is None:
        return "—"
    factor, unit = _prefix(x)
    return f"{_sci(x / factor)} {unit}"


def _pct(x: float | None, signed: bool = False) -> str:
    x = finite(x)
    return "—" if x is None else f"{'+' if signed and x > 0 else ''}{num(100 * x)} %"


def _count(x) -> str:
    return "—" if x is None else num(x)


def _estimate(e: Estimate | None, unit: str) -> str:
    """'2.12e-6 [2.03e-6 – 2.2e-6] USD' (`unit` a currency) or '380 [365 – 395] mJ' (`unit`
    "J"): the value with its interval where the run gave one, the unit once."""
    if e is None or finite(e.value) is None:
        return "—"
    factor, unit = (_prefix(e.value) if unit == "J" else (1.0, unit))
    nums = [_sci(x / factor) for x in (e.value, e.ci_low, e.ci_high) if finite(x) is not None]
    text = nums[0] if len(nums) < 3 else f"{nums[0]} [{nums[1]} – {nums[2]}]"
    return f"{text} {unit}".strip()


def _before_after(before, after, metric: str, unit: str, verification) -> str:
    """'x → y' of a decision's realized figure; a side without one says why, never a bare "—":
    a verification that failed delivered no accepted output to divide by."""
    def side(s, what: str) -> str:
        text = _estimate(getattr(s, metric) if s else None, unit)
        if text != "—":
            return text
        failed = what == "after" and verification is not None and verification.verdict == "FAIL"
        return "no accepted output (verification FAIL)" if failed else f"not measured {what}"

    return f"{side(before, 'before')} → {side(after, 'after')}"


def _prefix(joules: float) -> tuple[float, str]:
    return next(((f, u) for f, u in ((1e3, "kJ"), (1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ")) if abs(joules) >= f),
                (1.0, "J"))


def _ratio(a: float | None, b: float | None) -> str:
    a, b = finite(a), finite(b)
    return "—" if a is None or not b else f"{num(a / b)}×"


def _value(seg: Segment | None, key: str) -> float | None:
    est = getattr(seg.totals, key) if seg is not None and seg.totals is not None else None
    return finite(est.value) if est is not None else None


def _reason_missing(p: Pilot, name: str) -> str:
    if p.segment(name) is not None:
        return f"the {name} segment has no totals"
    return f"no {name} segment in this run" + (" (it did not finish)" if p.finished is None else "")


def _acceptance(p: Pilot, ev: Evidence) -> list[tuple[str, str]]:
    """The three acceptance figures with their values and evidence classes; the run's own
    `figures` where it wrote them, else computed from the segments' totals (and said so)."""
    figs, pilot, cur = p.figures, p.segment(PILOT), p.currency
    cp, cs, ch = (_value(p.segment(name), "cost_per_accepted") for name in (PILOT, STATIC, HINDSIGHT))
    out = []
    saving, whence = finite(figs.saving_vs_static) if figs else None, "the run's figures"
    if saving is None and cp is not None and cs:
        saving, whence = 1 - cp / cs, "computed here from the segments' totals"
    out.append(("Saving vs the static largest state", (
        f"**{_pct(saving)}** lower cost per accepted output (pilot {_money(cp, cur)} vs static {_money(cs, cur)}) — "
        f"evidence: {ev.of('cost')}; {whence}" if saving is not None else f"not available: {_reason_missing(p, STATIC)}")))
    share, whence = finite(figs.outside_share) if figs else None, "the run's figures"
    if share is None and pilot is not None and pilot.totals is not None:
        share, whence = finite(pilot.totals.outside_share), "the pilot segment's totals"
    outside = [w for w in (pilot.windows if pilot else []) if not w.verification and w.requests]
    if share is None and outside and all(w.outside_contract is not None for w in outside):
        share = sum(w.outside_contract for w in outside) / sum(w.requests for w in outside)
        whence = "computed here from the pilot's windows"
    out.append(("Requests outside the contract (outside verification windows)", (
        f"**{_pct(share)}** of the pilot's requests — evidence: {ev.of('latency', 'errors')}; {whence}"
        if share is not None else "not available: " + ("no pilot segment" if pilot is None else "no counts"))))
    vs, whence = finite(figs.vs_hindsight) if figs else None, "the run's figures"
    if vs is None and cp is not None and ch:
        vs, whence = cp / ch - 1, "computed here from the segments' totals"
    out.append(("Pilot vs the hindsight-best state", (
        f"**{_pct(vs, signed=True)}** cost per accepted output (pilot {_money(cp, cur)} vs hindsight-best "
        f"{_money(ch, cur)}) — evidence: {ev.of('cost')}; {whence}" if vs is not None
        else f"not available: {_reason_missing(p, HINDSIGHT)}")))
    return out


def _decision_counts(p: Pilot) -> str:
    f = p.figures
    if f is not None and None not in (f.downscales, f.upscales, f.rollbacks):
        return f"{len(p.decisions)} recorded: {f.downscales} downscale(s), {f.upscales} upscale(s), {f.rollbacks} rollback(s)"
    kinds = [d.action for d in p.decisions]
    # a rollback may be written as its own decision, as the outcome of the one it undoes, or both
    rollbacks = max(kinds.count("rollback"), sum(d.outcome == "rolled-back" for d in p.decisions))
    return (f"{len(kinds)} recorded: {kinds.count('downscale')} downscale(s), "
            f"{sum(k.endswith('upscale') for k in kinds)} upscale(s), {rollbacks} rollback(s)")


# -- sections -----------------------------------------------------------------------------------

def _setup(p: Pilot, ev: Evidence) -> Section:
    rows: list[list[str]] = []
    m, t, g, e, pt = p.machine, p.trace, p.guardrails, p.energy, p.price_table
    if m is not None:
        rows += [["machine: CPU", _lit(m.cpu)], ["machine: ISA", _lit(m.isa)], ["machine: cores", _count(m.cores)],
                 ["machine: host", _lit(m.host)]]
    if t is not None:
        rates = [pt_[1] for pt_ in t.points]
        rows += [["trace", _lit(t.name)], ["trace: source", fmt("`{}`", t.source) if t.source else "—"],
                 ["trace: duration", seconds_text(t.duration_s) if finite(t.duration_s) is not None else "—"],
                 ["trace: scale", f"{num(t.scale)}×" if finite(t.scale) is not None else "—"],
                 ["trace: points as replayed", f"{len(rates)}, offered {num(min(rates))}–{num(max(rates))} requests/s"
                  if rates else "none recorded"]]
    rows.append(["window", seconds_text(p.window_s) if finite(p.window_s) is not None else "not recorded"])
    if g is not None:
        known = {"margin": _pct(g.margin), "hysteresis": _pct(g.hysteresis), "switch_budget": _count(g.switch_budget),
                 "max_extensions": _count(g.max_extensions)}
        rows += [[f"guardrail: {k.replace('_', ' ')}", v] for k, v in known.items()]
        rows += [[f"guardrail: {k.replace('_', ' ')}", str(v)] for k, v in sorted((g.model_extra or {}).items())]
    if e is not None:
        rows += [["energy: evidence class", e.evidence_class or ev.cls("energy")], ["energy: how", _lit(e.how)],
                 ["energy: counters", _lit(e.counters)]]
    if pt is not None:
        rows += [["price table", _lit(pt.title)],
                 ["price table: source", fmt("`{}`", pt.source) if pt.source else "—"],
                 ["price table: currency", pt.currency or "—"],
                 ["price table: example prices", "**yes: illustrative, not quotes**" if pt.example else "no"]]
    paras = []
    if p.energy_simulated():
        paras.append(fmt("**Energy is simulated, not measured:** {}. Counters: {}.",
                         (e.how if e else None) or ev.evidence.get('energy', ''),
                         (e.counters if e else None) or 'not stated'))
    elif e is not None:
        paras.append(fmt("Energy is {}: {}. Counters: {}.", e.evidence_class or ev.cls('energy'), e.how or '—',
                         e.counters or '—'))
    if pt is not None and pt.example:
        paras.append(fmt("**Example prices:** every cost figure uses the example table “{}”, illustrative figures, "
                         "not quotes; price the run with your own table before deciding on it.", pt.title or pt.source))
    blocks: list = [Table("table-setup", ["item", "value"], rows, "The run's machine, trace, window, guardrails, "
                          "energy source and price table, as the run recorded them")]
    clauses = [[c.metric, c.op, _sci(c.value), c.unit or "—"] for c in p.contract.clauses]
    if clauses:
        blocks.append(Table("table-contract", ["metric", "op", "value", "unit"], clauses,
                            f"The clauses of contract {p.contract.name}"))
    if pt is not None and pt.prices:
        cited = [[x.split(" (", 1)[0], x.split(" (", 1)[1].rstrip(")")] if x.endswith(")") and " (" in x
                 else [x, "not stated"] for x in pt.prices]
        blocks.append(Table("table-prices", ["price", "citation (source, date; class)"], cited,
                            "Each price the cost figures use, with its citation" + (" (example prices)"
                                                                                     if pt.example else "")))
    return Section("setup", "Setup", paras, blocks)


def _events(p: Pilot, windows) -> list[tuple[float, str]]:
    """(trace time, kind) of each switch, rollback and breach where the state in force changed
    after it: the windows' events, else the decisions'. An event after which the next window ran
    the same state (a breach with nowhere to go, a run from before issue 32 that "rolled back" to
    the state in force) changed nothing and gets no marker."""
    def kind(text: str) -> str:
        # `luma pilot run` words them "downscale → <label>", "breach-upscale → …", "rollback → …"
        text = text.lower()
        if "rollback" in text or "rolled back" in text:
            return "rollback"
        if "breach" in text:
            return "breach"
        return "switch" if any(w in text for w in ("switch", "scale", "→", "->")) else "other"

    found = [(w.start_s, kind(w.event)) for w, nxt in zip(windows, windows[1:])
             if w.event and nxt.state and w.state and nxt.state != w.state]
    if not found:
        found = [(d.start_s, "rollback" if d.action == "rollback" else "breach" if d.action.startswith("breach")
                  else "switch") for d in p.decisions if finite(d.start_s) is not None]
    return found


def _timeline(p: Pilot, ev: Evidence, st: StateLabels) -> Section:
    pilot = p.segment(PILOT)
    if pilot is None or not pilot.windows:
        return Section("timeline", "Timeline", ["No window of the pilot segment was recorded: nothing to draw."])

    def rows(seg: Segment) -> list[dict]:
        return [{**w.model_dump(), "state": st.of(w.state) if w.state else None} for w in seg.windows]

    baselines = {name: rows(seg) for name in (STATIC, HINDSIGHT)
                 if (seg := p.segment(name)) is not None and seg.windows and not seg.same_as}
    cur = p.currency
    title = f"{p.run}: the pilot on trace {p.trace.name if p.trace and p.trace.name else '(not recorded)'}"
    svg = timeline_plot("plot-timeline", title, rows(pilot), st.axis(), p.slo(), cur, baselines,
                        _events(p, pilot.windows), [list(x) for x in p.trace.points] if p.trace else [])
    legend = "; ".join(f"{st.short[k]} = {st.label.get(k, 'not in the library')}" for k in st.short)
    caption = (f"Per window of the pilot: offered and observed request rate, the state in force ({legend}), p95 latency "
               f"against the SLO with each window's verdict, and cost per accepted output, the baselines dashed. Shaded: "
               f"verification windows; vertical lines: switches, rollbacks, breaches. Evidence: rate "
               f"{ev.cls('rate')}, latency {ev.cls('latency')}, cost {ev.cls('cost')}.")
    return Section("timeline", "Timeline", [f"{len(pilot.windows)} windows of the pilot segment on the trace's time "
                                            "axis, the four panels sharing it."],
                   [Plot("plot-timeline", svg, caption)])


def _decisions(p: Pilot, ev: Evidence, st: StateLabels) -> Section:
    cur = p.currency
    rows = []
    for d in p.decisions:
        pr, vf, rz = d.predicted, d.verification, d.realized
        before, after = (rz.before, rz.after) if rz else (None, None)
        when = " ".join(x for x in (str(d.window) if d.window is not None else "",
                                    f"({num(d.start_s)} s)" if finite(d.start_s) is not None else "") if x)
        rows.append([
            str(d.sequence), when or "—", d.action, fmt("{} → {}", st.of(d.from_), st.of(d.to)), _lit(d.reason),
            " · ".join(x for x in (pr.verdict, _money(pr.cost_per_accepted, cur) if pr.cost_per_accepted is not None
                                   else None, f"p95 {seconds_text(pr.p95_latency)}" if finite(pr.p95_latency)
                                   is not None else None) if x) if pr else "—",
            f"{vf.verdict or '—'} ({_count(vf.windows)} window{'s' if vf.windows != 1 else ''})" if vf else "—",
            d.outcome or "—",
            _before_after(before, after, "cost_per_accepted", cur, vf),
            _before_after(before, after, "energy_per_accepted", "J", vf),
            f"`{d.record[:12]}`" if d.record else "—"])
    columns = ["#", "window (time)", "action", "from → to", "reason", "predicted (projected)",
               f"verification ({ev.cls('latency')})", "outcome", f"cost per accepted, before → after [CI] "
               f"({ev.cls('cost')})", f"energy per accepted, before → after [CI] ({ev.cls('energy')})", "record"]
    caption = ("Every decision of the controller in order; states by their short labels (The library). Predicted: "
               "the controller's projection from the library, projected; verification: the verdict of the "
               f"verification windows, {ev.of('latency')}; realized before → after: {ev.of('cost', 'energy')}; "
               "record: the pilot-decision record's ledger hash (first 12 hex digits)")
    return Section("decisions", "Decisions", [f"{_decision_counts(p)}."],
                   [Table("table-decisions", columns, rows, caption)] if rows else [],
                   empty="No decision was recorded: the controller kept its first state, or the run ended before one.")


def _value_section(p: Pilot, ev: Evidence, st: StateLabels) -> Section:
    cur = p.currency
    pilot = p.segment(PILOT)
    names = [PILOT, STATIC, HINDSIGHT] + [s.name for s in p.segments if s.name not in (PILOT, STATIC, HINDSIGHT)]
    rows = []
    for name in names:
        seg = p.segment(name)
        if seg is None:
            rows.append([_TITLES.get(name, name), "not recorded"] + ["—"] * 9)
            continue
        t = seg.totals
        state = ("the controller's choice" if seg.state is None and name == PILOT else st.text(seg.state))
        if seg.same_as:
            state += f" — the same state as {seg.same_as}, measured once"
        outside = (f"{_count(t.outside_contract)} ({_pct(t.outside_share)})" if t and t.outside_share is not None
                   else _count(t.outside_contract if t else None))
        rows.append([seg.title or _TITLES.get(name, name), state, _count(t.requests if t else None),
                     _count(t.accepted if t else None), outside,
                     _estimate(t.cost_per_accepted if t else None, cur), ev.cls("cost"),
                     _estimate(t.energy_per_accepted if t else None, "J"), ev.cls("energy"),
                     *(["(the pilot)"] * 2 if name == PILOT else
                       [_ratio(_value(pilot, "cost_per_accepted"), _value(seg, "cost_per_accepted")),
                        _ratio(_value(pilot, "energy_per_accepted"), _value(seg, "energy_per_accepted"))])])
    columns = ["segment", "state", "requests", "accepted", "outside contract (share outside verification)",
               "cost per accepted [CI]", "cost evidence", "energy per accepted [CI]", "energy evidence",
               "pilot ÷ this (cost)", "pilot ÷ this (energy)"]
    caption = (f"The pilot and the two baselines on the same trace. Requests: {ev.of('rate')}; accepted and outside "
               f"the contract: {ev.of('latency', 'errors')}; ratios: the pilot's figure over the segment's (below 1: "
               "the pilot needed less)")
    return Section("value", "Realized value vs baselines", [],
                   [Table("table-segments", columns, rows, caption)])


def _library(p: Pilot, ev: Evidence, st: StateLabels) -> Section:
    cur = p.currency
    rows = [[st.of(s.key), s.label, f"`{s.key[:12]}`", f"{num(s.capacity)} requests/s" if finite(s.capacity)
             is not None else "—", seconds_text(s.p95_latency) if finite(s.p95_latency) is not None else "—",
             _pct(s.latency_margin), _money(s.cost_per_hour, cur), _money(s.cost_per_accepted, cur),
             _joules(s.energy_per_accepted), _count(s.trials), ", ".join(s.sources) or "—"]
            for s in sorted(p.library, key=lambda s: st.order.index(s.key))]
    caption = ("The qualified states the controller chose among, cheapest per hour first. Capacity (accepted requests/s), "
               "p95 at capacity and latency margin (share of the SLO left at capacity): measured, from the "
               f"qualification trials of the sources column; cost: {ev.of('cost')}; energy: {ev.of('energy')}")
    return Section("library", "The library", [], [Table("table-library", [
        "state", "label", "key", "capacity", "p95 at capacity", "latency margin", "cost per hour", "cost per accepted",
        "energy per accepted", "trials", "sources"], rows, caption)] if rows else [],
        empty="The run recorded no library.")


def _evidence(p: Pilot, ev: Evidence) -> Section:
    stated = [[k, ev.cls(k), v.split(":", 1)[1].strip() if ":" in v else "—"] for k, v in p.evidence.items()]
    figures = [["request rate (offered, observed), requests", "rate", ev.cls("rate")],
               ["p95 latency, window and verification verdicts", "latency", ev.cls("latency")],
               ["accepted requests, errors, requests outside the contract", "latency, errors", ev.of("latency", "errors")],
               ["cost, cost per accepted output, saving vs static, pilot vs hindsight", "cost", ev.cls("cost")],
               ["energy, energy per accepted output", "energy", ev.cls("energy")],
               ["library capacity, p95 at capacity, latency margin", "the library's qualification trials", "measured"],
               ["predicted verdict, latency and cost of a decision", "the controller's model of the library",
                "projected"],
               ["prices", "the price table", "as each price's citation states"]]
    blocks = [Table("table-evidence", ["figures", "class", "basis"], stated, "The run's evidence block")] if stated else []
    blocks.append(Table("table-figure-classes", ["figure in this report", "from", "class"], figures,
                        "Every figure of this report and its evidence class"))
    return Section("evidence", "Evidence classes", [
        "Only measured figures are observations of this run; projected figures combine them with the price table, "
        "simulated ones with a model."], blocks)


def _notes(p: Pilot, ev: Evidence, st: StateLabels) -> list[str]:
    notes = []
    if p.finished is None:
        notes.append("**The run did not finish** (`finished` is null: killed, or still running when this report was "
                     "made). What it wrote is shown; the figures that need the rest are marked not available.")
    for name in (PILOT, STATIC, HINDSIGHT):
        if p.segment(name) is None:
            needed = _NEEDED_FOR.get(name, "every figure of the run")
            notes.append(f"No `{name}` segment: {needed} cannot be given.")
    pilot = p.segment(PILOT)
    if pilot is not None and p.trace is not None and pilot.windows and finite(p.trace.duration_s):
        covered = pilot.windows[-1].end_s
        if covered < p.trace.duration_s:
            notes.append(f"The pilot segment covers {seconds_text(covered)} of the {seconds_text(p.trace.duration_s)} "
                         "trace.")
    for key, consequence in _MISSING.items():
        if key not in p.present:
            notes.append(f"The file has no `{key}`: {consequence}.")
    if p.price_table is not None and p.price_table.example:
        notes.append("Example prices: every cost figure is illustrative, not a quote.")
    if p.energy_simulated():
        notes.append("Energy is simulated, not measured (counters: " + ((p.energy.counters if p.energy else None)
                                                                     or "none read") + ").")
    if st.unknown:
        notes.append("States the run names that its library lacks: " + ", ".join(f"`{k}`" for k in st.unknown) + ".")
    return notes or ["Nothing to note: the run finished and recorded every part."]


def build(p: Pilot, source: str = "pilot.json") -> PilotReport:
    """The Economic Control Report of the run `p` (read from `source`)."""
    require()
    ev, st = Evidence(p.evidence), StateLabels(p)
    c = p.contract
    clauses = "; ".join(f"{x.metric} {x.op} {_sci(x.value)} {x.unit}".strip() for x in c.clauses) or "no clauses stated"
    facts = [("Run", fmt("`{}`", p.run)), ("Contract", fmt("`{}`", c.name) + (fmt(" ({})", c.service) if c.service
                                                                             else "") + fmt(": {}", clauses)),
             ("Started", p.started), ("Finished", p.finished or "**not finished** (killed, or still running)"),
             *_acceptance(p, ev), ("Decisions", _decision_counts(p)),
             ("Energy", ("**simulated**" if p.energy_simulated() else ev.cls("energy"))
              + (fmt(" — counters: {}", p.energy.counters) if p.energy and p.energy.counters else ""))]
    warnings = []
    if p.finished is None:
        warnings.append("**The run did not finish**: this report shows what it wrote (see Notes).")
    if p.price_table is not None and p.price_table.example:
        warnings.append("**Example prices**: every cost figure uses illustrative prices, not quotes.")
    if p.energy_simulated():
        warnings.append("**Energy is simulated**, not measured: " + ((p.energy.how if p.energy else None) or
                                                                      "a power model") + ".")
    sections = [_setup(p, ev), _timeline(p, ev, st), _decisions(p, ev, st), _value_section(p, ev, st),
                _library(p, ev, st), _evidence(p, ev), Section("notes", "Notes", _notes(p, ev, st))]
    return PilotReport("pilot", f"Economic Control Report: {p.run}",
                       fmt("Contract `{}` · {} → ", c.name, p.started) + (fmt("{}", p.finished) if p.finished
                                                                           else "**not finished**"), facts, sections,
                       footer=f"Made by `luma report pilot` from `{source}` alone (pilot summary format 1). Every table "
                              "and plot names the evidence class of its figures.", warnings=warnings)


def write(p: Pilot, source: str, out: Path) -> Written:
    """Render the report of `p` into the folder `out` (report.md, report.html, plots/)."""
    return render_write(build(p, source), out)
