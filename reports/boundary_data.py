"""What a Resource Boundary Report reads from the KB: one PEX chain, its record, and the sprint
trials (pex-trial records) behind it.

A chain and its sprint's trials are written by one `luma sprint run`, which stamps the same
activity start time on all of them (experiments/sprint/records.py); the trials are found by that time
together with the chain's contract, workload and architecture. A chain ingested from a file has
no sprint: the report then works from the trials inside the chain record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from luma.errors import NothingToReport, UnknownName
from luma.kb.vocab import LUMA, PROV
from luma.reports import boundary_outcomes
from luma.reports.boundary_terms import LEVEL_PATTERN, VERDICT, Level, read_levels, select
from luma.reports.fmt import class_name, dim_key
from luma.rules.derivations import Derivation, derivation
from luma.rules.explain import resolve_iri
from luma.rules.loader import load_all
from luma.rules.state import DERIVED

#: The rule that qualifies chains: the report reads what it derived, never a copy of its logic.
QUALIFYING_RULE = "qualified-boundary"
_QUALIFIED = DERIVED + QUALIFYING_RULE
#: Sealed reads (DESIGN §8): a record's facts inside its own graph (the record kind said there),
#: runner names and revocations inside the trust and revocation records' graphs.
_CHAIN_RECORD = '?g luma:recordKind "pex-chain"'
_TRIAL_RECORD = '?tg luma:recordKind "pex-trial"'


@dataclass
class TrialFact:
    """One trial: of a sprint (phase boundary/diagnosis/...) or of a chain record (phase pass/fail/recovered)."""

    iri: str
    sequence: int
    phase: str
    variant: str
    verdict: str
    cause: str | None
    levels: dict[str, Level]
    obs: dict[str, tuple[float, str]]
    evidence: str = "measured"
    attempts: int = 1


@dataclass
class Clause:
    metric: str
    op: str
    value: float
    unit: str


@dataclass
class ChainFacts:
    """Everything the report says about one chain, as read from the KB."""

    iri: str
    graph: str
    props: dict[str, str]
    entity: dict[str, str]
    clauses: list[Clause]
    pass_levels: dict[str, Level]
    fail_levels: dict[str, Level]
    record: dict[str, str]
    provenance: dict[str, str]
    environment: dict[str, list[str]]
    chain_trials: list[TrialFact]
    sprint: str | None = None
    sprint_trials: list[TrialFact] = field(default_factory=list)
    rule_status: str = ""
    #: The run of the qualifying rule whose facts the KB holds (None: the rules have not run).
    run: Derivation | None = None
    #: Whether that run derived a qualified boundary of this chain.
    qualified: bool = False
    #: What the chain record states of its outcomes (reports/boundary_outcomes.Outcomes).
    outcomes: object = None

    @property
    def crossed(self) -> str:
        return dim_key(self.props[LUMA + "crossedDimension"])

    @property
    def binding(self) -> str:
        return dim_key(self.props[LUMA + "bindingResource"])

    @property
    def evidence(self) -> str:
        return class_name(self.props.get(LUMA + "evidenceClass", ""))

    @property
    def recovered(self) -> bool:
        return self.props.get(LUMA + "recovered") == "true"

    @property
    def repetitions(self) -> int:
        return int(self.props.get(LUMA + "repetitions", 0))

    @property
    def same_context(self) -> bool:
        return self.props.get(LUMA + "passContext") == self.props.get(LUMA + "failContext")


def _lit(text: str) -> str:
    """A SPARQL string literal (JSON's escapes are SPARQL's)."""
    return json.dumps(text, ensure_ascii=False)


# -- which chain --------------------------------------------------------------------------------

def latest_qualified(kb) -> str:
    """The chain of the most recently ingested record that the rules qualified (rule
    qualified-boundary, with the parameters of its last run); synthetic chains (kb/records/synthetic.py)
    only when nothing else qualifies. NothingToReport when there is none, saying why."""
    run = derivation(kb.store, QUALIFYING_RULE)
    if run is None:
        if not select(kb, 'SELECT ?g WHERE { GRAPH ?g { ?g luma:recordKind "pex-chain" } } LIMIT 1'):
            raise NothingToReport("no qualified chain in this KB: it holds no PEX chain yet; run `luma sprint run "
                                  "CONTRACT` (e.g. `luma sprint run matvec-memory`) or ingest a measured PEX chain, "
                                  "then `luma rules run`")
        raise NothingToReport("no qualified chain in this KB yet: the rules have not run on it (`luma rules run` "
                              "qualifies its chains); or name the chain to report")
    # The derived boundaries, and the time their chain's record came in: single-pattern subqueries
    # for hash joins (DESIGN §9).
    rows = select(kb, f"""SELECT ?c ?at WHERE {{
      {{ SELECT ?c WHERE {{ GRAPH <{_QUALIFIED}> {{ ?q luma:qualifies ?c }} }} }}
      {{ SELECT ?g ?c WHERE {{ GRAPH ?g {{ ?c prov:wasDerivedFrom ?g }} }} }}
      {{ SELECT ?g ?at WHERE {{ GRAPH ?g {{ ?g luma:recordKind "pex-chain" ; prov:generatedAtTime ?at }} }} }}
      OPTIONAL {{ SELECT ?g ?c (1 AS ?synthetic) WHERE {{ GRAPH ?g {{ ?c prov:wasGeneratedBy ?act .
        ?act luma:tool ?tool FILTER(STRSTARTS(?tool, "luma synthetic")) }} }} }}
    }} ORDER BY BOUND(?synthetic) DESC(?at) DESC(STR(?c)) LIMIT 1""")
    if not rows:
        raise NothingToReport(f"no qualified chain in this KB: {run.text()} qualified none of its chains; run "
                              "`luma sprint run CONTRACT` (e.g. `luma sprint run matvec-memory`) or ingest a "
                              "measured PEX chain, then `luma rules run`")
    return rows[0]["c"]


def chain_of(kb, iri: str) -> str:
    """The chain node named by `iri`: the chain itself, its record graph or its qualified boundary."""
    iri = resolve_iri(iri)
    rows = select(kb, f"""SELECT DISTINCT ?c WHERE {{
      {{ BIND(<{iri}> AS ?c) GRAPH ?g {{ ?c a luma:BoundaryQualification . {_CHAIN_RECORD} }} }}
      UNION {{ GRAPH <{_QUALIFIED}> {{ <{iri}> luma:qualifies ?c }} }}
      UNION {{ GRAPH <{iri}> {{ ?c a luma:BoundaryQualification ; prov:wasDerivedFrom <{iri}> .
                               <{iri}> luma:recordKind "pex-chain" }} }}
    }}""")
    if not rows:
        raise UnknownName(f"{iri} is not a PEX chain in this KB (give a chain IRI, its record graph or its "
                          "qualified boundary; or report the latest qualified chain, or a sprint's)", field="chain")
    return rows[0]["c"]


def chain_of_sprint(kb, sprint: str) -> str:
    """The chain a sprint recorded (same activity start, contract, workload, architecture)."""
    rows = select(kb, f"""SELECT DISTINCT ?c WHERE {{
      GRAPH ?tg {{ ?t a luma:SprintTrial ; luma:sprint {_lit(sprint)} ; luma:contract ?k ; luma:workload ?w ;
         luma:architecture ?a ; prov:wasGeneratedBy ?ta . ?ta prov:startedAtTime ?start . {_TRIAL_RECORD} }}
      GRAPH ?g {{ ?c a luma:BoundaryQualification ; luma:contract ?k ; luma:workload ?w ; luma:architecture ?a ;
         prov:wasGeneratedBy ?ca . ?ca prov:startedAtTime ?start . {_CHAIN_RECORD} }}
    }} ORDER BY ?c""")
    if rows:
        return rows[0]["c"]
    known = select(kb, f"SELECT (COUNT(?t) AS ?n) WHERE {{ GRAPH ?tg {{ ?t luma:sprint {_lit(sprint)} . "
                        f"{_TRIAL_RECORD} }} }}")
    if not known or int(known[0]["n"]) == 0:
        raise UnknownName(f"no sprint {sprint!r} in this KB (`luma kb query` lists them: "
                          "SELECT DISTINCT ?s WHERE { ?t luma:sprint ?s })", field="sprint")
    raise NothingToReport(f"sprint {sprint!r} recorded no PEX chain (no boundary found, or no intervention "
                          "tried): its sprints/<id>/sprint.json says why", field="sprint")


# -- the chain's facts --------------------------------------------------------------------------

def gather(kb, chain: str) -> ChainFacts:
    """Read one chain, its record, provenance, trials and (when it has one) its sprint."""
    props: dict[str, str] = {}
    for r in select(kb, f"SELECT ?p ?o WHERE {{ GRAPH ?g {{ <{chain}> ?p ?o . {_CHAIN_RECORD} }} }}"):
        if r["p"] != LUMA + "trial":
            props.setdefault(r["p"], r["o"])
    ent = select(kb, f"""SELECT * WHERE {{
      OPTIONAL {{ <{props[LUMA + 'workload']}> rdfs:label ?workload ; luma:task ?task ; luma:model/rdfs:label ?model }}
      OPTIONAL {{ <{props[LUMA + 'architecture']}> rdfs:label ?architecture ; luma:vendor ?vendor ;
                  luma:architectureKind ?archKind }}
      OPTIONAL {{ <{props[LUMA + 'contract']}> rdfs:label ?contract }}
      OPTIONAL {{ <{props[LUMA + 'intervention']}> rdfs:label ?intervention ; luma:interventionKind ?ivKind }}
    }}""")
    entity = {k: v for k, v in (ent[0] if ent else {}).items()}
    clauses = [Clause(r["m"], r["op"], float(r["v"]), r["u"]) for r in sorted(select(kb, f"""
      SELECT ?c ?m ?op ?v ?u WHERE {{ <{props[LUMA + 'contract']}> luma:clause ?c . ?c luma:metric ?m ;
        luma:operator ?op ; qudt:numericValue ?v ; qudt:unit ?u }}"""), key=lambda r: int(r["c"].rsplit("/", 1)[-1]))]
    states = read_levels(select(kb, f"""SELECT ?s ?dim ?v ?u ?cat WHERE {{
      VALUES ?s {{ <{props[LUMA + 'passState']}> <{props[LUMA + 'failState']}> }} {LEVEL_PATTERN} }}"""))
    graph = props[PROV + "wasDerivedFrom"]
    rec = select(kb, f"""SELECT ?hash ?at ?who ?runner ?fingerprint ?revoked WHERE {{
      GRAPH <{graph}> {{ <{graph}> luma:contentHash ?hash ; prov:generatedAtTime ?at ; prov:wasAttributedTo ?agent }}
      OPTIONAL {{ ?agent rdfs:label ?who }}
      OPTIONAL {{ GRAPH <{graph}> {{ <{graph}> luma:attestedBy ?key }}
                  GRAPH ?tg {{ ?tg luma:recordKind "runner-trust" . ?key luma:runnerName ?runner ;
                               luma:keyFingerprint ?fingerprint }}
                  OPTIONAL {{ GRAPH ?rg {{ ?rg luma:recordKind "runner-revocation" ; luma:revokes ?key .
                                          ?key luma:revokedAt ?revoked }} }} }} }}""")
    prov, env = {}, {}
    act = props.get(PROV + "wasGeneratedBy")
    if act:
        for r in select(kb, f"SELECT ?p ?o WHERE {{ GRAPH <{graph}> {{ <{act}> ?p ?o }} }}"):
            prov.setdefault(r["p"].rsplit("#", 1)[-1].rsplit("/", 1)[-1], r["o"])
        for r in select(kb, f"SELECT ?p ?o WHERE {{ GRAPH <{graph}> {{ <{act}> luma:environment ?e . ?e ?p ?o }} }}"):
            if r["p"].startswith(LUMA):
                env.setdefault(r["p"][len(LUMA):], []).append(r["o"])
    facts = ChainFacts(chain, graph, props, entity, clauses, states.get(props[LUMA + "passState"], {}),
                       states.get(props[LUMA + "failState"], {}), rec[0] if rec else {}, prov,
                       {k: sorted(v) for k, v in env.items()}, _chain_trials(kb, chain, props))
    _qualification(kb, facts)
    _sprint(kb, facts)
    facts.outcomes = boundary_outcomes.read(kb, chain, graph)
    return facts


def _chain_trials(kb, chain: str, props: dict[str, str]) -> list[TrialFact]:
    """The trials inside the chain record: pass/fail at those states (baseline), recovered at the
    FAIL state with the intervention."""
    graph = props[PROV + "wasDerivedFrom"]  # the chain's record graph (gather read the chain there)
    heads = select(kb, f"""SELECT ?t ?state ?rep ?verdict ?cause WHERE {{ GRAPH <{graph}> {{ <{chain}> luma:trial ?t .
      ?t luma:trialState ?state ; luma:repetitionIndex ?rep ; luma:verdict ?verdict .
      OPTIONAL {{ ?t luma:failureCause ?cause }} }} }}""")
    obs = _observations(select(kb, f"""SELECT ?t ?m ?v ?u WHERE {{ GRAPH <{graph}> {{ <{chain}> luma:trial ?t .
      ?t luma:observation ?o . ?o luma:metric ?m ; qudt:numericValue ?v ; qudt:unit ?u }} }}"""))
    out = []
    for r in sorted(heads, key=lambda r: int(r["t"].rsplit("/", 1)[-1])):
        out.append(TrialFact(r["t"], int(r["t"].rsplit("/", 1)[-1]), r["state"],
                             "intervention" if r["state"] == "recovered" else "baseline",
                             VERDICT.get(r["verdict"], r["verdict"]), r.get("cause"), {}, obs.get(r["t"], {})))
    return out


def _observations(rows) -> dict[str, dict[str, tuple[float, str]]]:
    out: dict[str, dict[str, tuple[float, str]]] = {}
    for r in rows:
        out.setdefault(r["t"], {})[r["m"]] = (float(r["v"]), r["u"])
    return out


def _qualification(kb, facts: ChainFacts) -> None:
    """Whether the qualifying rule's last run derived a boundary of the chain, and that run."""
    facts.run = derivation(kb.store, QUALIFYING_RULE)
    if facts.run is None:
        facts.rule_status = "the rules have not run on this KB: `luma rules run` qualifies chains"
        return
    facts.qualified = bool(kb.store.select(
        f"SELECT ?q WHERE {{ GRAPH <{_QUALIFIED}> {{ ?q <{LUMA}qualifies> <{facts.iri}> }} }} LIMIT 1", union=False))
    status = f"{'derived' if facts.qualified else 'not derived'} by {facts.run.text()}"
    notes = [facts.run.stale_note()]
    settings = getattr(kb, "settings", None)
    if settings is not None:
        current = next((r for r in load_all(settings.home / "rules") if r.id == QUALIFYING_RULE), None)
        if current is not None and current.version != facts.run.version:
            notes.append(f"this LUMA's rule is v{current.version}: run `luma rules run`")
    facts.rule_status = "; ".join([status, *(n for n in notes if n)])


def _sprint(kb, facts: ChainFacts) -> None:
    """Attach the sprint trials recorded with the chain (same start time, contract, workload, architecture)."""
    started = facts.provenance.get("startedAtTime")
    if not started:
        return
    p = facts.props
    rows = select(kb, f"""SELECT DISTINCT ?sprint WHERE {{ GRAPH ?tg {{ ?t a luma:SprintTrial ; luma:sprint ?sprint ;
      luma:contract <{p[LUMA + 'contract']}> ; luma:workload <{p[LUMA + 'workload']}> ;
      luma:architecture <{p[LUMA + 'architecture']}> ; prov:wasGeneratedBy ?a .
      ?a prov:startedAtTime ?st . FILTER(?st = "{started}"^^xsd:dateTime) {_TRIAL_RECORD} }} }} ORDER BY ?sprint""")
    if not rows:
        return
    facts.sprint = rows[0]["sprint"]
    sprint = _lit(facts.sprint)
    heads = select(kb, f"""SELECT ?t ?seq ?phase ?variant ?verdict ?cause ?attempts ?ec WHERE {{ GRAPH ?tg {{
      ?t luma:sprint {sprint} ; a luma:SprintTrial ; luma:sequence ?seq ; luma:trialPhase ?phase ;
         luma:softwareVariant ?variant ; luma:verdict ?verdict ; luma:evidenceClass ?ec .
      OPTIONAL {{ ?t luma:failureCause ?cause }} OPTIONAL {{ ?t luma:attempts ?attempts }} {_TRIAL_RECORD} }} }}""")
    levels = read_levels(select(kb, f"""SELECT ?t ?dim ?v ?u ?cat WHERE {{ GRAPH ?tg {{ ?t luma:sprint {sprint} ;
      luma:machineState ?s . {_TRIAL_RECORD} }} {LEVEL_PATTERN} }}"""), key="t")
    obs = _observations(select(kb, f"""SELECT ?t ?m ?v ?u WHERE {{ GRAPH ?tg {{ ?t luma:sprint {sprint} ;
      luma:observation ?o . ?o luma:metric ?m ; qudt:numericValue ?v ; qudt:unit ?u . {_TRIAL_RECORD} }} }}"""))
    facts.sprint_trials = sorted(
        (TrialFact(r["t"], int(r["seq"]), r["phase"], r["variant"], VERDICT.get(r["verdict"], r["verdict"]),
                   r.get("cause"), levels.get(r["t"], {}), obs.get(r["t"], {}), class_name(r["ec"]),
                   int(r.get("attempts", 1))) for r in heads), key=lambda t: t.sequence)
