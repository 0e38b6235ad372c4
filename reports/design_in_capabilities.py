"""The Design-In report's capability and economics sections: the capability classes the rules
mapped each hardware requirement to (rule capability-candidate, ontology/capabilities.ttl),
ranked by support x economic gain; the lifetime economics of each requirement (reports/
economics.py) with the evidence and the price behind every figure; the price table; and, when
no requirement exists, why nothing qualifies (which threshold is not met, by how much, and what
would be needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from luma.experiments.prices import PriceTable, shipped
from luma.reports import economics
from luma.reports.design_in_data import HR, ONTOLOGY, QB, RR, UNQUALIFIED
from luma.reports.fmt import class_name, dim_key, num
from luma.reports.md_escape import fmt, record
from luma.reports.render import Section, Table
from luma.rules.derivations import derivation
from luma.rules.state import DERIVED

CC = f"<{DERIVED}capability-candidate>"


@dataclass
class Ranked:
    """One capability class with the requirements it could meet and its score."""

    iri: str
    label: str
    realised: str
    rows: list  # (requirement row, bases, remedies, estimate)
    score: float | None = None


def candidates(r) -> list[dict]:
    """(requirement, resource, capability, label, basis, remedy label) rows of the derived candidates."""
    # Sealed (DESIGN §8): derived facts from their rules' graphs, capability classes from the ontology's.
    return r.select(f"""SELECT ?hr ?resource ?cap ?label ?basis ?remedy ?realised WHERE {{
      GRAPH {CC} {{ ?c a luma:CapabilityCandidate ; luma:candidateFor ?hr ; luma:capability ?cap ;
                       luma:candidateBasis ?basis }}
      GRAPH {HR} {{ ?hr luma:resource ?resource }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?cap rdfs:label ?label }} }}
      OPTIONAL {{ GRAPH {CC} {{ ?c luma:viaRemedy ?rr }} GRAPH {RR} {{ ?rr luma:remedyIntervention ?i }}
                 ?i rdfs:label ?remedy }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?cap luma:realisedBy ?x . ?x rdfs:label ?realised }} }} }}""")


#: The cost cell of a state with no price in a unit it needs (never a product of mismatched units).
NO_PRICE = "no price"
#: The gain cell when a cost it compares has no price.
NO_GAIN = "n/a"


def _money(value: float | None, est) -> str:
    if value is None:
        return NO_PRICE if est.unpriced is not None else "—"
    return f"{value:.3g} {est.currency} per {est.output}"


def _gain(est) -> str:
    if est.gain is None:
        return NO_GAIN if est.unpriced is not None else "—"
    if est.remedy is None:
        return "1 (no recurring remedy)"
    return f"{est.gain:+.0%}"


def gain_of(est, bases: set[str]) -> tuple[float | None, str]:
    """(gain, how it was taken) of a capability mapped on `bases` for a requirement: adding the
    resource over the remedy ("resource"), or doing the remedy's work in hardware ("remedy": the
    smaller machine at the throughput without the remedy's overhead, an upper bound); the larger
    when both apply."""
    if est is None or est.gain is None:
        return None, _gain(est) if est is not None else "—"
    options = []
    if "resource" in bases:
        options.append((est.gain, _gain(est)))
    if "remedy" in bases and est.remedy_gain is not None:
        options.append((est.remedy_gain, f"{est.remedy_gain:+.0%} (remedy in hardware, at most)"))
    return max(options, key=lambda x: x[0]) if options else (None, "—")


def rank(reqs: list[dict], cands: list[dict], estimates: dict[str, economics.Estimate]) -> list[Ranked]:
    """Capability classes by score: the sum over the requirements they could meet of supporting
    chains x max(gain, 0); a class with no estimate anywhere has no score and comes last."""
    by_req = {q["hr"]: q for q in reqs}
    out: dict[str, Ranked] = {}
    for c in cands:
        if c["hr"] not in by_req:
            continue  # a requirement outside this scope
        item = out.setdefault(c["cap"], Ranked(c["cap"], c.get("label") or c["cap"].rsplit("/", 1)[-1], "", []))
        if c.get("realised") and c["realised"] not in item.realised:
            item.realised = ", ".join(filter(None, [item.realised, c["realised"]]))
        row = next((x for x in item.rows if x[0]["hr"] == c["hr"]), None)
        if row is None:
            row = (by_req[c["hr"]], set(), set(), estimates.get(c["resource"]))
            item.rows.append(row)
        row[1].add(c["basis"])
        if c.get("remedy"):
            row[2].add(c["remedy"])
    for item in out.values():
        gains = [(q, gain_of(e, bases)[0]) for q, bases, _, e in item.rows]
        scores = [float(q.get("chains") or 0) * max(g, 0.0) for q, g in gains if g is not None]
        item.score = sum(scores) if scores else None
    return sorted(out.values(), key=lambda x: (x.score is None, -(x.score or 0), x.label))


def _evidence(q: dict, est: economics.Estimate | None, synthetic: int = 0) -> str:
    # Synthetic chains qualify only in a throwaway benchmark project (kb/records/synthetic.py); where some
    # did, the support is not called measured (issue 28).
    what = ("qualified chains, synthetic ones among them (a benchmark project's, not measurements)"
            if synthetic else "measured qualified chains")
    parts = [f"{q.get('chains', '?')} {what} ({q.get('workloads', '?')} workloads, "
             f"{q.get('architectures', '?')} architectures)"]
    if est is not None and est.prices:
        classes = sorted({p.evidence_class for p in est.prices.values()})
        parts.append(f"prices: {', '.join(sorted(est.prices))} ({', '.join(classes)})")
    if est is not None and est.throughput_from:
        sources = sorted(est.throughput_from)  # "measured": observed in the chains' PASS trials
        parts.append("throughput: " + ", ".join(f"{x} or synthetic" if synthetic and x == "measured" else x
                                                for x in sources))
    return "; ".join(parts)


def ranking_section(ranked: list[Ranked], synthetic: int = 0) -> Section:
    """The capability classes ranked; `synthetic`: how many qualified boundaries are synthetic."""
    rows = []
    for n, item in enumerate(ranked, 1):
        for q, bases, remedies, est in item.rows:
            basis = ", ".join(sorted(bases)) + (fmt(" ({})", ', '.join(sorted(remedies))) if remedies else "")
            rows.append([str(n), f"**{item.label}**", dim_key(q["resource"]), basis, str(q.get("chains", "—")),
                         gain_of(est, bases)[1], num(item.score) if item.score is not None else "—",
                         record(item.realised) if item.realised else "—", _evidence(q, est, synthetic)])
    return Section("capabilities", "Capability classes", [
        "The capability classes each hardware requirement could be met with (rule `capability-candidate`, mapping "
        "in `ontology/capabilities.ttl`): from the requirement's resource and from the recurring remedies of it "
        "(a remedy that recurs points at hardware doing the same work). Ranked by score = Σ over the requirements "
        "of supporting chains × max(economic gain, 0). The gain is the projected saving per accepted output "
        "over the best recurring remedy: of adding the resource for a class mapped from the resource (1 when no "
        "remedy recurs: the resource is the only known way to PASS); of doing the remedy's work in hardware for a "
        "class mapped from the remedy — the smaller FAIL-state machine at the throughput the PASS trials observed, "
        "without the remedy's overhead and without the hardware's own price, so at most that. The mapping is declarative, not measured; the support is measured; the gain is "
        "projected."],
        [Table("table-capabilities", ["rank", "capability", "requirement", "basis", "chains", "economic gain", "score",
                                      "realised by", "evidence"], rows,
               "Capability classes by support × economic gain")] if rows else [],
        empty="No capability candidate: the rules mapped no requirement to a capability class (`luma rules run`).")


def economics_section(reqs: list[dict], estimates: dict[str, economics.Estimate], table: PriceTable) -> Section:
    rows = []
    for q in reqs:
        est = estimates[q["resource"]]
        used = f"{est.chains} of {est.total}" if est.total > est.chains else str(est.chains)
        remedy = (fmt("{} ({} paired chains)", est.remedy_name, est.remedy_chains) if est.remedy_name else
                  "none recurs")
        saving = (f"{est.lifetime_saving:,.0f} {est.currency}" if est.lifetime_saving is not None else "—")
        rows.append([dim_key(q["resource"]), used, _money(est.added, est), remedy,
                     _money(est.remedy, est) if est.remedy_name else "—", _gain(est), saving, "projected",
                     est.reason or "—"])
    label = table_label(table) + (": illustrative, not quotes" if table.example else "")
    return Section("economics", "Lifetime economics", [
        f"Cost per accepted output with the resource added (each chain's PASS state) versus with the best "
        f"recurring remedy (the FAIL state with the remedy applied, on the same chains: those the remedy recovered, "
        f"\"chains read\" of all supporting chains; every supporting chain when no remedy recurs), median over the "
        f"chains; the machine's cost per hour from the price table ({label}) over the outputs it serves: the "
        f"throughput its PASS trials observed (else the contract's throughput floor) × 3600 × utilisation "
        f"{table.utilisation:g}. One-off purchase prices are amortized over {table.years:g} years; the lifetime "
        f"saving is per machine over those years (positive: adding the resource costs less than the remedy). "
        f"Parameters: `[lifetime]` of the price table (`years`, `utilisation`; defaults 3 and 0.5). A price "
        f"applies only to the dimension and unit it names (cores × core-hour, bytes of host or CXL memory × "
        f"GiB-hour, accelerators × accelerator-hour of their type, watts × kWh; an accelerator's FLOP/s, HBM and "
        f"KV cache are paid through its accelerator-hour): a state with no price in a unit it needs shows "
        f"\"{NO_PRICE}\" and why, and its gain \"{NO_GAIN}\".",
        "**Evidence class of every estimate: projected** — measured, qualified chains and "
        + ("example prices: the figures show the method, not a decision." if table.example else
           "the prices' own classes (below).")],
        [Table("table-economics", ["requirement", "chains read", "with the resource", "best recurring remedy",
                                   "with the remedy", "gain", "lifetime saving", "evidence class", "not computed"],
               rows, "Cost per accepted output per requirement (projected)")] if rows else [],
        empty="No requirement to estimate.")


def prices_section(table: PriceTable, estimates: dict[str, economics.Estimate]) -> Section:
    used = {k for e in estimates.values() for k in e.prices}
    rows = [[p.key, p.cite(), "yes" if p.key in used else "no"] for p in sorted(table.prices.values(),
                                                                                  key=lambda p: p.key)]
    paras = [fmt("Price table: {}", table_label(table)) + (fmt(" ({})", table.title) if table.title else "") + "."]
    if table.example:
        paras.append("**These are EXAMPLE prices**, shipped to show the method (`evidence class user-supplied`, "
                     "\"not a quote\"): pass your own with `luma report design-in --prices FILE` (format: "
                     "docs/reports.md, \"Price tables\").")
    paras += list(table.notes)
    return Section("prices", "Prices", paras, [Table("table-prices", ["price", "figure (source, date; class)",
                                                                      "used"], rows, "Every price and its source")],
                   level=3)


def _more(n: int, what: str) -> str:
    return f"{n} more {what}{'' if n == 1 else 's'}" if n > 0 else f"enough {what}s"


def table_label(table: PriceTable) -> str:
    """The table's file, or "the shipped example table" (no install path in a report)."""
    return "the shipped EXAMPLE table kb/examples/prices.toml" if table.source == str(shipped()) else table.source


def nothing_section(r, bindings: list[dict]) -> Section:
    """Why no capability qualifies: the thresholds, what the KB has against them, and what would be needed."""
    run = derivation(r.kb.store, "recurring-binding")
    w = int((run.parameters if run else {}).get("min_workloads", 3))
    a = int((run.parameters if run else {}).get("min_architectures", 2))
    qualified = r.count(f"GRAPH {QB} {{ ?q a luma:QualifiedBoundary }}")
    per = r.select(f"""SELECT ?b ?key (COUNT(DISTINCT ?w) AS ?W) (COUNT(DISTINCT ?a) AS ?A) (COUNT(?q) AS ?n) WHERE {{
      GRAPH {QB} {{ ?q a luma:QualifiedBoundary ; luma:bindingResource ?b ; luma:workload ?w ; luma:architecture ?a }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?b luma:recordKey ?key }} }} }} GROUP BY ?b ?key ORDER BY DESC(?n) ?b LIMIT 10""")
    unq = r.select(f"""SELECT ?ec (COUNT(?u) AS ?n) WHERE {{ GRAPH {UNQUALIFIED} {{ ?u a luma:UnqualifiedChain ;
                      luma:evidenceClass ?ec }} }} GROUP BY ?ec ORDER BY ?ec""")
    paras = [f"**Nothing qualifies for Design-In.** A capability is proposed only for a hardware requirement: a "
             f"resource that binds in qualified boundaries (measured, signed by a trusted runner, recovered) across "
             f"at least {w} workloads on at least {a} architectures (rule recurring-binding, min_workloads={w}, "
             f"min_architectures={a}) and that no recurring software or partner remedy makes unnecessary."]
    rows = [[x.get("key") or dim_key(x["b"]), x["n"], x["W"], x["A"],
             _more(w - int(x["W"]), "workload") + ", " + _more(a - int(x["A"]), "architecture")
             if int(x["W"]) < w or int(x["A"]) < a else "recurs; a recurring remedy makes it unnecessary"]
            for x in per]
    if qualified == 0:
        paras.append("This KB has **no qualified boundary**: only measured chains qualify, and none does yet.")
    else:
        paras.append(f"This KB has {qualified} qualified boundar{'y' if qualified == 1 else 'ies'}; the table "
                     f"below counts them per binding resource against the thresholds.")
    if unq:
        n = sum(int(x["n"]) for x in unq)
        paras.append(", ".join(f"{x['n']} {class_name(x['ec'])}" for x in unq)
                     + f" chain{' never qualifies' if n == 1 else 's never qualify'} (only measured evidence "
                     "does): they narrow the search, they are no support.")
    if bindings:
        paras.append(f"{len(bindings)} recurring binding(s) exist but a recurring remedy makes each unnecessary "
                     "(see Recurring remedies).")
    paras.append(f"What would be needed: qualified sprints (`luma sprint run CONTRACT`) in which the same resource "
                 f"binds on {w} or more workloads across {a} or more architectures (runners on other machines sign "
                 f"theirs: `luma runner trust`), then `luma rules run`; the economics then needs a price table "
                 f"(`--prices FILE`; the shipped example is used otherwise).")
    return Section("capabilities", "Capability classes and economics", paras,
                   [Table("table-why-nothing", ["binding resource", "qualified boundaries", "workloads",
                                                "architectures", "missing"], rows,
                          "Qualified boundaries per binding resource, against the recurrence thresholds")]
                   if rows else [])


def sections(r, reqs: list[dict], bindings: list[dict], table: PriceTable,
             synthetic: int = 0) -> tuple[list[Section], list[Ranked]]:
    """The capability, economics and price sections (or the one saying why nothing qualifies);
    `synthetic`: the qualified boundaries that are synthetic (a benchmark project's)."""
    if not reqs:
        return [nothing_section(r, bindings)], []
    estimates = {q["resource"]: economics.requirement_estimate(r, q["resource"], table) for q in reqs}
    ranked = rank(reqs, candidates(r), estimates)
    return [ranking_section(ranked, synthetic), economics_section(reqs, estimates, table), prices_section(table, estimates)], ranked
