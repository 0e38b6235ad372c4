"""The Design-In Report: hardware requirements with support counts and boundary ranges, the
counter-evidence against each, recurring remedies, the derivation of each requirement down to
its records, and the evidence of each class — measured, simulated, projected, vendor claim,
synthetic — in a section of its own (each says "none in this KB" when it has nothing).

Everything comes from the facts the rules derive (`luma rules run`) and the records they rest
on; `build(kb, scope=...)` returns a `Report` for `luma.reports.render.write`.
"""

from __future__ import annotations

from luma.kb.query.scope import Scope
from luma.kb.vocab import EVIDENCE, EVIDENCE_CLASSES
from luma.experiments.prices import PriceTable
from luma.experiments.prices import load as load_prices
from luma.reports import budget
from luma.reports import design_in_capabilities as capabilities
from luma.reports import design_in_data as data
from luma.reports import design_in_published as published
from luma.reports import design_in_reach as reach
from luma.reports.derivation import compact
from luma.reports.fmt import CLASS_ORDER, class_name, dim_key, local, num, quantity
from luma.reports.md_escape import fmt, record
from luma.reports.plots import Span, bar_plot, range_plot, require
from luma.reports.render import Plot, Report, Section, Table, Tree
from luma.rules.derivations import derivation

#: Rows per long table and requirements whose derivation is drawn.
MAX_ROWS = 25
_CLASS_TITLES = {c.name: c.title for c in EVIDENCE}


def _n(row: dict, key: str) -> str:
    return num(float(row[key])) if row.get(key) not in (None, "") else "—"


def _shown(rows: list, total: int, what: str) -> str:
    return f"First {len(rows)} of {total} {what} shown." if total > len(rows) else ""


def _chain_table(tid: str, rows: list[dict], total: int, caption: str, what: str) -> Table:
    def level(row, key):
        if row.get(key) is None:
            return row.get(key + "Cat", "—")
        text = quantity(float(row[key]), row.get("unit"))
        if key == "pass" and budget.is_budget(dim_key(row["crossed"])) and tid == "table-qualified":
            foot = row.get("footprint")
            text += (f" + runtime {quantity(foot, 'byte')} = {quantity(budget.total(float(row[key]), foot), 'byte')}"
                     if foot is not None else " + runtime footprint (not reported)")
        return text

    # A measured row names the runner key that measured it (issue 14); other classes have none.
    return Table(tid, ["workload", "architecture", "crossed", "binding", "intervention", "PASS level",
                       "FAIL level", "evidence"],
                 [[record(r["workload"]), record(r["architecture"]), dim_key(r["crossed"]), dim_key(r["binding"]),
                   record(r["intervention"]), level(r, "pass"), level(r, "fail"),
                   class_name(r["ec"]) + (fmt(", by {}", r['runner']) if r.get("runner") else "")
                   + (" (synthetic)" if r.get("synthetic") else "")] for r in rows],
                 caption, _shown(rows, total, what))


def _parent(row: dict) -> str:
    """" (parent)" for a resource of the hierarchy that no record names (it generalises over the
    resources under it: the rules derive it only over two or more of them that bind)."""
    return "" if row.get("key") else " (parent)"


def _requirements(reqs, bindings, counters) -> list[Section]:
    req_rbs = {r["rb"] for r in reqs}
    rows = [[f"**{dim_key(r['resource'])}**" + _parent(r), r.get("confidence", "—"), _n(r, "workloads"),
             _n(r, "architectures"),
             _n(r, "chains"),
             *(quantity(float(r[k]), r["unit"]) if r.get(k) else "—" for k in ("min", "median", "max")),
             str(counters.get(r["rb"], {}).get("n", "—"))] for r in reqs]
    blocks: list = []
    if rows:
        blocks.append(Table("table-requirements", ["resource", "confidence", "workloads", "architectures", "chains",
                                                   "boundary min", "median", "max", "counter-chains"], rows,
                            "Hardware requirements (derived from measured, qualified boundaries only)"))
        spans = [Span(dim_key(r["resource"]), float(r["min"]), float(r["median"]), float(r["max"]), r["unit"])
                 for r in reqs if r.get("min")]
        if spans:
            blocks.append(Plot("plot-requirement-ranges", range_plot("plot-requirement-ranges",
                                                                     "Boundary range per required resource", spans),
                               "Minimum PASS levels of the supporting qualified boundaries per required resource: "
                               "min–max bar, median diamond (measured)."))
    others = [b for b in bindings if b["rb"] not in req_rbs]
    if others:
        blocks.append(Table("table-bindings-not-required", ["resource", "workloads", "architectures", "chains"],
                            [[dim_key(b["resource"]) + _parent(b), _n(b, "workloads"), _n(b, "architectures"),
                              _n(b, "chains")] for b in others],
                            "Recurring bindings that are not requirements (a software or partner remedy recovers "
                            "enough of their chains)"))
    paras = ["A requirement is a resource binding in qualified chains across enough workloads and "
             "architectures that no recurring software or partner remedy makes unnecessary; the boundary "
             "range is taken over the minimum PASS levels of its supporting chains."]
    budgets = sorted({dim_key(r["resource"]) for r in reqs if budget.is_budget(dim_key(r["resource"]))})
    if budgets:
        paras.append(f"{', '.join(budgets)} levels are {budget.MEANING}: a deployment needs the level plus its "
                     "runtime's footprint (each chain's Resource Boundary Report gives the total; the qualified "
                     "boundaries below show level + footprint).")
    return [Section("requirements", "Hardware requirements", paras,
                    blocks, empty="No hardware requirement and no recurring binding: none in this KB.")]


def _counter(reqs, counters) -> Section:
    rows = [[dim_key(r["resource"]), ", ".join(counters[r["rb"]]["tasks"]) or "—", _n(r, "chains"),
             str(counters[r["rb"]]["n"])] for r in reqs if r["rb"] in counters]
    return Section("counter-evidence", "Counter-evidence",
                   ["Qualified boundaries of the same task classes in which the resource (or one under it) did "
                    "not bind (`luma kb query --name counter-chains` lists them)."],
                   [Table("table-counter-evidence", ["requirement", "task classes", "supporting chains",
                                                     "counter-chains"], rows, "Counter-evidence per requirement")]
                   if rows else [], empty="No counter-evidence: none in this KB (no requirement).")


def listed_remedies(rems, bindings) -> list:
    """The recurring remedies the report lists (its table and its summary's count). A parent
    resource's remedy (the rules keep it so that a requirement on the parent can be weighed
    against it) is listed where the parent recurs as a binding; elsewhere it repeats the rows of
    the resources under it."""
    recurring = {b["resource"] for b in bindings}
    return [r for r in rems if r.get("key") or r["resource"] in recurring]


def _remedies(shown, limit: int) -> Section:
    rows = [[dim_key(r["resource"]) + ("" if r.get("key") else " (parent)"), record(r["intervention"]),
             local(r.get("kind", "?")).lower(), _n(r, "chains"), _n(r, "workloads"), _n(r, "architectures")]
            for r in shown]
    rows.sort(key=lambda x: (x[0], -float(x[3].replace(",", "")), x[1]))
    return Section("remedies", "Recurring remedies",
                   ["An intervention that recovers the same binding resource in several qualified boundaries. "
                    "A parent of the resource hierarchy is listed (marked) where it recurs as a binding itself; "
                    "the hierarchy's root never is (every binding generalises to it)."],
                   [Table("table-remedies", ["resource", "intervention", "kind", "chains", "workloads",
                                             "architectures"], rows[:limit], "Recurring remedies",
                          _shown(rows[:limit], len(rows), "remedies"))] if rows else [],
                   empty="No recurring remedy: none in this KB.")


def _derivations(kb, reqs, limit: int) -> tuple[Section, dict]:
    blocks, summary = [], {}
    for r in reqs[:limit]:
        root, info = compact(kb, r["hr"])
        summary = summary or info
        blocks.append(Tree(f"tree-{dim_key(r['resource'])}", root,
                           f"Why {dim_key(r['resource'])} is required: {info['records']} supporting records"))
    paras = ["Each requirement down to its records: the rule, version and parameters of every derived node, "
             "how many supports it has (two followed), and the content hashes of the first records "
             "(`luma kb explain IRI` prints the whole tree)."]
    if len(reqs) > limit:
        paras.append(f"The first {limit} of {len(reqs)} requirements are drawn.")
    return Section("derivations", "Derivation of each requirement", paras, blocks,
                   empty="Nothing to derive: none in this KB."), summary


def _class_sections(r, counts: dict[str, dict[str, int]], limit: int, synthetic: int) -> list[Section]:
    out = [Section("evidence", "Evidence by class", ["Records per evidence class and kind. Only measured evidence "
                                                     "qualifies a boundary; the other classes narrow the search "
                                                     "and are reported apart."])]
    kinds = sorted({k for per in counts.values() for k in per})
    if kinds:
        out[0].blocks = [
            Table("table-evidence", ["evidence class", *kinds, "total"],
                  [[c, *(str(counts.get(c, {}).get(k, 0)) for k in kinds), str(sum(counts.get(c, {}).values()))]
                   for c in CLASS_ORDER], "Records by evidence class and kind"),
            Plot("plot-evidence", bar_plot("plot-evidence", "Records by evidence class", CLASS_ORDER,
                                           {k: [counts.get(c, {}).get(k, 0) for c in CLASS_ORDER] for k in kinds}),
                 "Records per evidence class, stacked by record kind."),
        ]
    errors = data.model_errors(r)
    machines = data.machines(r)
    for cls in CLASS_ORDER:
        iri = EVIDENCE_CLASSES[cls]
        sec = Section(f"evidence-{cls}", _CLASS_TITLES[cls], level=3, empty="None in this KB.")
        per = counts.get(cls, {})
        if per:
            sec.blocks.append(Table(f"table-{cls}-records", ["record kind", "records"],
                                    [[k, str(n)] for k, n in sorted(per.items())], f"{cls} records by kind"))
        if cls == "measured":
            rows, total = data.qualified(r, limit)
            run = derivation(r.kb.store, "qualified-boundary")  # the rules have run: check_ready
            sec.paragraphs.append(f"{total} qualified boundaries (measured and signed by a runner key this project "
                                  "trusts, recovered, states differing only in the crossed dimension, ≥ "
                                  f"{run.parameters.get('min_repetitions', '?') if run else '?'} repetitions: "
                                  f"{run.text() if run else 'the rules'}).")
            if synthetic:
                sec.paragraphs.append(f"**{synthetic} of them are synthetic**: generated records (`kb/records/synthetic.py`, "
                                      "for benchmarks and examples), counted as measured only because this is a "
                                      "throwaway benchmark project; they are not measurements, and conclusions "
                                      "from them show the method, not hardware.")
            keys = data.runners(r)
            if keys:
                sec.blocks.append(Table("table-measured-runners", ["runner", "key fingerprint", "qualified boundaries"],
                                        [[record(k["name"]), fmt("`{}`", k['fingerprint']), k["boundaries"]]
                                         for k in keys],
                                        "Who measured them: the runner keys that signed the qualified boundaries"))
            if rows:
                if any(budget.is_budget(dim_key(x["crossed"])) for x in rows):
                    sec.paragraphs.append(f"A host_memory PASS level is {budget.MEANING}; its cell adds the "
                                          "footprint the chain's PASS trials measured: the total a deployment needs.")
                sec.blocks.append(_chain_table("table-qualified", rows, total, "Qualified boundaries",
                                               "qualified boundaries"))
        else:
            rows, total = data.unqualified(r, iri, limit)
            sec.paragraphs.append(f"{total} {cls} PEX chains, reported as unqualified (never a boundary)."
                                  if total else f"{cls.capitalize()} PEX chains: none in this KB.")
            if cls == "synthetic" and per:
                sec.paragraphs.append("Generated records (`kb/records/synthetic.py`, for benchmarks, tests and examples), not "
                                      "measurements: no boundary, requirement or count of measured evidence rests "
                                      "on them.")
            if rows:
                sec.blocks.append(_chain_table(f"table-{cls}-chains", rows, total, f"Unqualified {cls} chains",
                                               "chains"))
        mine = [e for e in errors if class_name(e["ec"]) == cls]
        if mine:
            sec.blocks.append(Table(f"table-{cls}-model-error", ["contract", "metric", "trials", "median error",
                                                                 "max error", "held-out median", "held-out max"],
                                    [[record(e["contract"]), record(e["metric"]), _n(e, "trials"),
                                      *(f"{float(e[k]):.1%}" if e.get(k) else "—"
                                        for k in ("median", "max", "hmedian", "hmax"))] for e in mine],
                                    "The analytical model's relative error against measured trials "
                                    "(`luma model calibrate`)"))
        elif cls == "simulated":
            sec.paragraphs.append("Model error facts: none in this KB (`luma model calibrate` records them).")
        mine = [m for m in machines if class_name(m["ec"]) == cls]
        if mine:
            sec.blocks.append(Table(f"table-{cls}-machines", ["machine", "architecture", "devices",
                                                              "largest memory", "fastest memory", "power", "source"],
                                    [[record(m["name"]), record(m["architecture"]), m["devices"],
                                      quantity(float(m["capacity"]), "byte") if m.get("capacity") else "—",
                                      quantity(float(m["bandwidth"]), "byte / second") if m.get("bandwidth") else "—",
                                      quantity(float(m["power"]), "watt") if m.get("power") else "—",
                                      record(m["source"]) if m.get("source") else "—"] for m in mine],
                                    f"Machine parameter records ({cls})"))
        elif cls == "vendor-claim":
            sec.paragraphs.append("Machine spec-sheet records: none in this KB (`luma kb ingest "
                                  "experiments/machines/*.json` adds the shipped catalog).")
        out.append(sec)
    return out


def build(kb, scope: Scope | None = None, max_rows: int = MAX_ROWS, prices: PriceTable | None = None) -> Report:
    """The Design-In Report of what `scope` (kb/query/scope.py) may see (the owner's view by default);
    `prices` (experiments/prices.py) prices the economics, the shipped example table by default."""
    require()
    r = data.Reader(kb, scope)
    data.check_ready(r)
    reqs = sorted(data.requirements(r), key=lambda x: dim_key(x["resource"]))
    bindings = sorted(data.recurring_bindings(r), key=lambda x: dim_key(x["resource"]))
    counters = data.counter_evidence(r)
    rems = listed_remedies(data.remedies(r), bindings)
    counts: dict[str, dict[str, int]] = {}
    for row in data.evidence_by_class(r):
        counts.setdefault(class_name(row["ec"]), {})[row["kind"]] = int(row["records"])
    derivations, rule = _derivations(kb, reqs, max_rows)
    qualified_total = data.qualified_count(r)
    synthetic = data.synthetic_count(r) if qualified_total else 0
    table = prices if prices is not None else load_prices(None, kb.settings)
    economics, ranked = capabilities.sections(r, reqs, bindings, table, synthetic)
    measured_on, reach_note = reach.section(r)
    sections = [*_requirements(reqs, bindings, counters), measured_on, *economics, _counter(reqs, counters),
                _remedies(rems, max_rows * 2),
                derivations, *_class_sections(r, counts, max_rows, synthetic)]
    if r.scope.partner is None:  # the owner imported them; a partner's view shows only its own and public graphs
        sections.append(published.section(kb.settings, max_rows))
    chains = {c: n.get("pex-chain", 0) for c, n in counts.items()}
    facts = [("Scope", record(r.label)),
             ("PEX chains", ", ".join(f"{chains.get(c, 0)} {c}" for c in CLASS_ORDER)),
             ("Qualified boundaries", str(qualified_total)),
             ("Recurring bindings", str(len(bindings))), ("Hardware requirements", str(len(reqs))),
             ("Recurring remedies", str(len(rems)))]
    if ranked:
        facts.append(("Capability classes", ", ".join(x.label for x in ranked)))
    facts.append(("Prices", capabilities.table_label(table) + (" (examples, not quotes)" if table.example else "")))
    if rule.get("rule"):
        facts.append(("Requirement rule", f"{rule['rule']} v{rule['version']} ({', '.join(rule['parameters'])})"))
    names = ", ".join(dim_key(x["resource"]) for x in reqs)
    if synthetic:
        facts.append(("Synthetic boundaries", f"{synthetic} of {qualified_total} (generated, not measurements)"))
    warning = (f" {synthetic} of the {qualified_total} qualified boundaries behind them are synthetic (generated for "
               "benchmarks, not measurements)." if synthetic else "")
    generated = chains.get("synthetic", 0)
    if generated:
        warning += (f" {generated} synthetic PEX chains (generated, not measurements) are reported apart and never "
                    "qualify.")
    top = (f" Top capability class: {ranked[0].label} (score {ranked[0].score:.3g}, projected economics"
           f"{' on EXAMPLE prices' if table.example else ''})." if ranked and ranked[0].score is not None else "")
    callout = (f"{len(reqs)} hardware requirement(s) from measured evidence: {names}.{warning}{top}" if reqs else
               "No hardware requirement, so no capability qualifies: no resource binds recurrently enough in "
               "qualified chains without a remedy (the section \"Capability classes and economics\" says which "
               f"threshold is not met and what would be needed).{warning}")
    if reach_note:
        callout += " " + reach_note
    return Report("design-in", "Design-In Report", fmt("Hardware requirements from the knowledge base (scope "
                  "`{}`)", r.label), facts, sections, callout=callout,
                  footer="Made by `luma report design-in` from the facts the rules derived at their last run "
                         "(`luma rules run`) and the records behind them. Requirements and ranges rest on "
                         "measured, qualified boundaries only.")
