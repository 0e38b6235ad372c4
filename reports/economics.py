"""Lifetime economics of a hardware requirement: cost per accepted output with the resource
added versus with the best recurring remedy, from the requirement's supporting qualified chains
and a price table (experiments/prices.py, which also prices a state: `state_cost`).

Per supporting chain: the PASS state is the machine with the resource added; the FAIL state with
the chain's intervention applied is the machine with the remedy (its "recovered" trials). A
state's cost per hour sums its priced dimensions, each price only in the unit it names
(experiments/pricing.py: cores x core-hour, GiB of host or CXL memory x GiB-hour, accelerators x
accelerator-hour of their type, watts x kWh; a compute level in FLOP/s is no core count). A state
that has no price in a unit it needs (its binding resource's included) has no cost: the estimate
keeps the structured reason (`unpriced`) and the report shows "no price". The accepted outputs per
hour are the throughput its PASS trials observed (requests or tokens per second), or else the
contract's throughput floor (a PASS guarantees at least that), x 3600 x utilisation. The
comparison is paired: the remedy's chains give both figures on the same workloads.

The estimate is *projected* evidence: it rests on measured chains and on the prices' classes
(vendor-claim or user-supplied); it never qualifies anything.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from luma.experiments.prices import HOURS_PER_YEAR, Price, PriceTable
from luma.experiments.pricing import Amount, Unpriced, price_state
from luma.kb.vocab import LUMA, LUNIT, ONTOLOGY_GRAPH
from luma.reports.design_in_data import CHAIN_GRAPH
from luma.reports.fmt import UNIT_NAMES
from luma.reports.md_escape import fmt, record
from luma.rules.state import DERIVED

#: Chains read per requirement (the first in the store's order beyond that; the report says so).
MAX_CHAINS = 400
_CHUNK = 200
RATES = {LUNIT + "RequestPerSecond": "request", LUNIT + "TokenPerSecond": "token"}
#: Sealed reads (DESIGN §8): boundaries and remedies from their rules' graphs, the hierarchy and
#: record keys from the ontology graph, a chain's facts from its own record graph.
_QB, _RR, _ONTOLOGY = f"<{DERIVED}qualified-boundary>", f"<{DERIVED}recurring-remedy>", f"<{ONTOLOGY_GRAPH}>"


@dataclass
class ChainFigures:
    """What one qualified chain says about cost: its states' levels and observed throughput."""

    chain: str
    intervention: str
    levels: dict[str, dict[str, object]] = field(default_factory=dict)  # "pass"/"fail" -> {key: Amount or category}
    throughput: dict[str, tuple[float, str]] = field(default_factory=dict)  # trial state -> (per s, output)
    floor: tuple[float, str] | None = None  # the contract's throughput clause (per s, output)
    architecture: str = ""
    binding: str | None = None  # record key of the resource that binds in the chain


@dataclass
class Estimate:
    """The economics of one requirement (figures per accepted output, in `currency`)."""

    chains: int = 0  # supporting chains read
    total: int = 0  # supporting chains in the KB
    added: float | None = None  # median cost per output with the resource added
    remedy: float | None = None  # median cost per output with the best recurring remedy
    remedy_name: str | None = None
    remedy_chains: int = 0  # paired chains behind `remedy`
    output: str = "output"
    currency: str | None = None
    gain: float | None = None  # (remedy - added) / remedy; 1.0 when no recurring remedy exists
    #: Median cost per output of the FAIL state at the PASS throughput: the remedy's saving of the
    #: resource without its overhead, what hardware doing the remedy's work could reach at best
    #: (the hardware's own price is unknown, so an upper bound).
    ideal: float | None = None
    remedy_gain: float | None = None  # (remedy - ideal) / remedy
    lifetime_saving: float | None = None  # per machine over the amortization period
    throughput_from: set[str] = field(default_factory=set)  # "measured", "contract floor"
    prices: dict[str, Price] = field(default_factory=dict)  # the prices used, by key
    reason: str = ""  # why a figure is missing
    unpriced: Unpriced | None = None  # the first state that has no price in a unit it needs


def _rate(c: ChainFigures, state: str) -> tuple[float, str, str] | None:
    """(outputs per second, output kind, "measured" or "contract floor") at a trial state."""
    if state in c.throughput:
        return (*c.throughput[state], "measured")
    if c.floor is not None:
        return (*c.floor, "contract floor")
    return None


def per_output(c: ChainFigures, which: str, trial_state: str, table: PriceTable, est: Estimate) -> float | None:
    """Cost per accepted output of one chain's state ("pass" or "fail") at its trials of `trial_state`."""
    rate = _rate(c, trial_state)
    if rate is None:
        est.reason = est.reason or "no throughput observed at the states and no throughput clause in the contract"
        return None
    got = price_state(c.levels.get(which, {}), table, c.architecture, c.binding)
    if isinstance(got, Unpriced):
        est.unpriced = est.unpriced or got
        est.reason = est.reason or record("no price: " + got.text())
        return None
    if est.currency not in (None, got.currency):
        est.reason = est.reason or f"the prices mix currencies ({est.currency}, {got.currency})"
        return None
    est.currency = got.currency
    est.prices.update({p.key: p for p in got.used})
    est.throughput_from.add(rate[2])
    est.output = rate[1]
    if rate[0] <= 0:
        return None
    return got.per_hour / (rate[0] * 3600.0 * table.utilisation)


def estimate(chains: list[ChainFigures], total: int, remedy: tuple[str, str] | None, table: PriceTable) -> Estimate:
    """The economics of one requirement from its supporting chains; `remedy` is the best recurring
    remedy's (intervention IRI, label), or None when no remedy recurs."""
    est = Estimate(chains=len(chains), total=total)
    if remedy is None:
        added = [x for c in chains if (x := per_output(c, "pass", "pass", table, est)) is not None]
        est.gain = 1.0 if added else None
    else:
        est.remedy_name = remedy[1]
        pairs = []
        for c in chains:
            if c.intervention != remedy[0]:
                continue
            a, r = per_output(c, "pass", "pass", table, est), per_output(c, "fail", "recovered", table, est)
            i = per_output(c, "fail", "pass", table, est)
            if a is not None and r is not None:
                pairs.append((a, r, i))
        est.remedy_chains = len(pairs)
        if pairs:
            added = [a for a, _, _ in pairs]
            est.remedy = statistics.median(r for _, r, _ in pairs)
            ideal = [i for _, _, i in pairs if i is not None]
            est.ideal = statistics.median(ideal) if ideal else None
        else:  # the remedy's chains could not be priced: the resource's figure alone, no gain
            why = est.reason or fmt("none of the chains {} recovered could be priced", remedy[1])
            added = [x for c in chains if (x := per_output(c, "pass", "pass", table, est)) is not None]
            if added:
                est.added = statistics.median(added)
                est.reason = fmt("no comparison with {}: ", remedy[1]) + why
                return est
    if not added:
        est.reason = est.reason or "no supporting chain could be priced"
        return est
    est.added = statistics.median(added)
    if est.remedy is not None and est.remedy > 0:
        est.gain = (est.remedy - est.added) / est.remedy
        if est.ideal is not None:
            est.remedy_gain = (est.remedy - est.ideal) / est.remedy
        rates = [r[0] for c in chains if c.intervention == remedy[0] and (r := _rate(c, "pass"))]
        if rates:
            outputs = statistics.median(rates) * 3600.0 * HOURS_PER_YEAR * table.years * table.utilisation
            est.lifetime_saving = (est.remedy - est.added) * outputs
    est.reason = ""
    return est


# -- reading the figures from the KB ----------------------------------------------------------------


def supporting_chains(r, resource: str, intervention: str | None = None,
                      limit: int = MAX_CHAINS) -> tuple[list[tuple[str, str, str | None]], int]:
    """([(chain, intervention, binding record key)] of the qualified boundaries binding `resource`
    or a resource under it — only those of `intervention` when given —, at most `limit`), the
    number of all of them."""
    where = (f"GRAPH {_QB} {{ ?q a luma:QualifiedBoundary ; luma:bindingResource ?b ; luma:qualifies ?chain ; "
             f"luma:intervention ?i }} GRAPH {_ONTOLOGY} {{ ?b luma:broader* <{resource}> }}")
    total = r.count(where)
    only = f"FILTER(?i = <{intervention}>)" if intervention else ""
    rows = r.select(f"SELECT ?chain ?i ?key WHERE {{ {where} {only} "
                    f"OPTIONAL {{ GRAPH {_ONTOLOGY} {{ ?b luma:recordKey ?key }} }} }} LIMIT {limit}")
    return sorted((x["chain"], x["i"], x.get("key")) for x in rows), total


def chain_figures(r, chains: list[tuple[str, str, str | None]]) -> list[ChainFigures]:
    """Throughput per trial state of the PASS trials, the contract's throughput floor and the
    architecture of each chain, then the levels of the PASS and FAIL states of the chains that
    have a throughput (the others cannot be costed per output), in VALUES batches."""
    out = {c: ChainFigures(c, i, binding=b) for c, i, b in chains}
    rates = ", ".join(f"<{u}>" for u in RATES)
    for n in range(0, len(chains), _CHUNK):
        values = " ".join(f"<{c}>" for c, _, _ in chains[n:n + _CHUNK])
        for x in r.select(f"""SELECT ?chain ?state ?unit (AVG(?v) AS ?mean) WHERE {{ VALUES ?chain {{ {values} }}
            {CHAIN_GRAPH} GRAPH ?g {{ ?chain luma:trial ?t .
              ?t luma:trialState ?state ; luma:verdict luma:Pass ; luma:observation ?o .
            ?o qudt:unit ?unit ; qudt:numericValue ?v FILTER(?unit IN ({rates})) }} }}
            GROUP BY ?chain ?state ?unit"""):
            # requests before tokens when a chain observed both (a request is the accepted output)
            have = out[x["chain"]].throughput.get(x["state"])
            if have is None or RATES[x["unit"]] == "request":
                out[x["chain"]].throughput[x["state"]] = (float(x["mean"]), RATES[x["unit"]])
        for x in r.select(f"""SELECT ?chain ?unit (MAX(?v) AS ?floor) WHERE {{ VALUES ?chain {{ {values} }}
            {CHAIN_GRAPH} GRAPH ?g {{ ?chain luma:contract ?c }}
            ?c luma:clause ?cl . ?cl luma:operator ">=" ; qudt:unit ?unit ;
            qudt:numericValue ?v FILTER(?unit IN ({rates})) }} GROUP BY ?chain ?unit"""):
            have = out[x["chain"]].floor
            if have is None or RATES[x["unit"]] == "request":
                out[x["chain"]].floor = (float(x["floor"]), RATES[x["unit"]])
    rated = [c for c, _, _ in chains if out[c].throughput or out[c].floor]
    for n in range(0, len(rated), _CHUNK):
        values = " ".join(f"<{c}>" for c in rated[n:n + _CHUNK])
        for x in r.select(f"""SELECT ?chain ?p ?key ?v ?unit ?cat WHERE {{ VALUES ?chain {{ {values} }}
            {CHAIN_GRAPH} GRAPH ?g {{ ?chain ?p ?s FILTER(?p IN (luma:passState, luma:failState)) }}
            ?s luma:level ?l . ?l luma:dimension ?d . GRAPH {_ONTOLOGY} {{ ?d luma:recordKey ?key }}
            OPTIONAL {{ ?l qudt:numericValue ?v ; qudt:unit ?unit }} OPTIONAL {{ ?l luma:category ?cat }} }}"""):
            which = "pass" if x["p"] == LUMA + "passState" else "fail"
            # a level keeps its unit: the price that applies depends on it
            level = Amount(float(x["v"]), UNIT_NAMES.get(x.get("unit"), "?")) if x.get("v") else x.get("cat")
            out[x["chain"]].levels.setdefault(which, {})[x["key"]] = level
        for x in r.select(f"""SELECT ?chain ?label WHERE {{ VALUES ?chain {{ {values} }}
            {CHAIN_GRAPH} GRAPH ?g {{ ?chain luma:architecture ?a }} ?a rdfs:label ?label }}"""):
            out[x["chain"]].architecture = x["label"]
    return [out[c] for c, _, _ in chains]


def best_remedy(r, resource: str) -> tuple[str, str, int] | None:
    """(intervention, label, chains) of the recurring remedy of `resource` that is no hardware
    intervention and recovers the most chains; None when none recurs."""
    rows = r.select(f"""SELECT ?i ?label ?chains WHERE {{ GRAPH {_RR} {{ ?rr a luma:RecurringRemedy ;
        luma:remedyResource <{resource}> ; luma:remedyIntervention ?i ; luma:supportChains ?chains }}
        ?i rdfs:label ?label
        FILTER NOT EXISTS {{ ?i luma:interventionKind luma:Hardware }} }}""")
    if not rows:
        return None
    best = max(rows, key=lambda x: (int(x["chains"]), x["label"]))
    return best["i"], best["label"], int(best["chains"])


def requirement_estimate(r, resource: str, table: PriceTable) -> Estimate:
    """The economics of the requirement on `resource` from what scope `r` sees: with a recurring
    remedy, from the chains that remedy recovered (the paired comparison needs no other); without
    one, from the supporting chains."""
    remedy = best_remedy(r, resource)
    chains, total = supporting_chains(r, resource, remedy[0] if remedy else None)
    return estimate(chain_figures(r, chains), total, remedy[:2] if remedy else None, table)
