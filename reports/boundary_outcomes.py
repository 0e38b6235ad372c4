"""The chain outcomes a Resource Boundary Report reads from the KB (issue 16): the diagnosis table,
co-binding resources, frontier shift, next binding and deployment decision, as the runner wrote
them on the chain and ingest checked them against its trials (kb/ingest/projection_outcomes.py). Read
from the chain's own record graph (entity descriptions, levels and software configurations, from
the shared graph); the report states them and never recomputes them."""

from __future__ import annotations

from dataclasses import dataclass, field

from luma.kb.vocab import LUMA
from luma.reports.boundary_terms import LEVEL_PATTERN, VERDICT, Level, read_levels, select
from luma.reports.fmt import dim_key

VERDICT_OF = {**VERDICT, LUMA + "NotTested": "not-tested"}


@dataclass
class Restoration:
    """One row of a diagnosis table."""

    dimension: str
    level: Level | None
    verdict: str
    reason: str | None
    trials: list[tuple[str, str | None]] = field(default_factory=list)  # (verdict, cause)


@dataclass
class Frontier:
    dimension: str
    before: Level
    after: Level
    absolute: float | None
    relative: float | None
    below_range: bool
    variant: str | None


@dataclass
class Outcomes:
    """What the chain record states of its outcomes (empty lists / None where it states nothing)."""

    diagnosis: list[Restoration] = field(default_factory=list)
    co_binding: list[str] = field(default_factory=list)
    frontier: Frontier | None = None
    next_binding: str | None = None
    next_none: bool = False
    next_co_binding: list[str] = field(default_factory=list)
    next_note: str | None = None
    next_diagnosis: list[Restoration] = field(default_factory=list)
    #: (software config IRI, its variant, {dimension: level}) per deployment decision.
    decisions: list[tuple[str, str, dict[str, Level]]] = field(default_factory=list)

    def decided(self, software: str | None) -> dict[str, Level] | None:
        """The minimum state decided for the software configuration `software` (IRI), if any."""
        return next((levels for sc, _, levels in self.decisions if sc == software), None)

    @property
    def stated(self) -> bool:
        return bool(self.diagnosis or self.frontier or self.decisions)


def read(kb, chain: str, graph: str) -> Outcomes:
    """The outcomes of `chain`, from its record graph `graph`."""
    out = Outcomes()
    multi = select(kb, f"""SELECT ?p ?o WHERE {{ GRAPH <{graph}> {{ <{chain}> ?p ?o
      FILTER(?p IN (luma:coBindingResource, luma:nextCoBindingResource, luma:nextBindingResource,
                    luma:nextBindingNone, luma:nextBindingNote)) }} }} ORDER BY ?o""")
    for r in multi:
        p, o = r["p"][len(LUMA):], r["o"]
        if p == "coBindingResource":
            out.co_binding.append(dim_key(o))
        elif p == "nextCoBindingResource":
            out.next_co_binding.append(dim_key(o))
        elif p == "nextBindingResource":
            out.next_binding = dim_key(o)
        elif p == "nextBindingNone":
            out.next_none = o == "true"
        else:
            out.next_note = o
    out.diagnosis, out.next_diagnosis = _restorations(kb, chain, graph, "restoration"), _restorations(
        kb, chain, graph, "nextRestoration")
    out.frontier = _frontier(kb, chain, graph)
    rows = select(kb, f"""SELECT ?d ?sc ?variant ?s WHERE {{ GRAPH <{graph}> {{ <{chain}> luma:deploymentDecision ?d .
      ?d luma:softwareConfig ?sc ; luma:minimumState ?s }} ?sc luma:softwareVariant ?variant }}""")
    if rows:
        levels = read_levels(select(kb, "SELECT ?s ?dim ?v ?u ?cat WHERE { VALUES ?s { "
                                 + " ".join(f"<{r['s']}>" for r in rows) + f" }} {LEVEL_PATTERN} }}"))
        for r in sorted(rows, key=lambda r: int(r["d"].rsplit("/", 1)[-1])):
            out.decisions.append((r["sc"], r["variant"], levels.get(r["s"], {})))
    return out


def _restorations(kb, chain: str, graph: str, link: str) -> list[Restoration]:
    rows = select(kb, f"""SELECT ?r ?dim ?verdict ?reason ?v ?u ?cat WHERE {{
      GRAPH <{graph}> {{ <{chain}> luma:{link} ?r . ?r luma:restoredDimension ?dim ; luma:restorationVerdict ?verdict .
        OPTIONAL {{ ?r luma:reason ?reason }} OPTIONAL {{ ?r luma:restoredLevel ?l }} }}
      OPTIONAL {{ ?l qudt:numericValue ?v ; qudt:unit ?u }} OPTIONAL {{ ?l luma:category ?cat }} }}""")
    if not rows:
        return []
    trials = select(kb, f"""SELECT ?r ?t ?verdict ?cause WHERE {{ GRAPH <{graph}> {{ <{chain}> luma:{link} ?r .
      ?r luma:trial ?t . ?t luma:verdict ?verdict OPTIONAL {{ ?t luma:failureCause ?cause }} }} }}""")
    by_row: dict[str, list] = {}
    for t in sorted(trials, key=lambda t: int(t["t"].rsplit("/", 1)[-1])):
        by_row.setdefault(t["r"], []).append((VERDICT.get(t["verdict"], t["verdict"]), t.get("cause")))
    out = []
    for r in sorted(rows, key=lambda r: int(r["r"].rsplit("/", 1)[-1])):
        level = Level(float(r["v"]), r["u"]) if "v" in r else Level(category=r["cat"]) if "cat" in r else None
        out.append(Restoration(dim_key(r["dim"]), level, VERDICT_OF.get(r["verdict"], r["verdict"]), r.get("reason"),
                               by_row.get(r["r"], [])))
    return out


def _frontier(kb, chain: str, graph: str) -> Frontier | None:
    rows = select(kb, f"""SELECT * WHERE {{ GRAPH <{graph}> {{ <{chain}> luma:frontierShift ?f .
      ?f luma:shiftDimension ?d ; luma:belowRange ?below .
      OPTIONAL {{ ?f luma:levelBefore ?lb ; luma:levelAfter ?la }} OPTIONAL {{ ?f luma:shiftUnit ?u }}
      OPTIONAL {{ ?f luma:categoryBefore ?cb ; luma:categoryAfter ?ca }}
      OPTIONAL {{ ?f luma:absoluteChange ?abs }} OPTIONAL {{ ?f luma:relativeChange ?rel }}
      OPTIONAL {{ ?f luma:softwareConfig ?sc }} }}
      OPTIONAL {{ ?sc luma:softwareVariant ?variant }} }}""")
    if not rows:
        return None
    r = rows[0]
    if "lb" in r:
        before, after = Level(float(r["lb"]), r.get("u")), Level(float(r["la"]), r.get("u"))
    else:
        before, after = Level(category=r.get("cb")), Level(category=r.get("ca"))
    return Frontier(dim_key(r["d"]), before, after, float(r["abs"]) if "abs" in r else None,
                    float(r["rel"]) if "rel" in r else None, r["below"] == "true", r.get("variant"))
