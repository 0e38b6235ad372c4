"""What the Design-In Report reads from the KB, through the scope it is made for (`owner`, or
`partner:NAME`: kb/query/scope.py runs every query over the graphs that partner may see).

Long lists (qualified boundaries, unqualified chains) are counted first and listed in full only
up to `FULL_LIST` rows, sorted here; beyond that a LIMIT without ORDER BY takes the first rows in
the store's order (DESIGN §9: Oxigraph spent 28 of 36 s sorting 36k rows by IRI).
"""

from __future__ import annotations

from luma.errors import NothingToReport
from luma.kb.records import kinds
from luma.kb.query.scope import Scope, scoped_query
from luma.kb.vocab import LUMA, ONTOLOGY_GRAPH
from luma.reports.boundary_terms import PREFIXES
from luma.rules.state import DERIVED

FULL_LIST = 2000
#: Sealed reads (DESIGN §8): each derived fact inside the graph of the rule that derives it, the
#: ontology's inside its graph, runner names inside the trust records' own graphs.
HR, RB, RR, CE = (f"<{DERIVED}{rule}>" for rule in ("hardware-requirement", "recurring-binding", "recurring-remedy",
                                                     "counter-evidence"))
QB, UNQUALIFIED = f"<{DERIVED}qualified-boundary>", f"<{DERIVED}unqualified-evidence>"
ONTOLOGY = f"<{ONTOLOGY_GRAPH}>"
#: A runner key's name, from the trust record that projects it (kb/ingest/projection.py); the caller closes the brace.
RUNNER_NAME = 'GRAPH ?tg { ?tg luma:recordKind "runner-trust" . ?key luma:runnerName ?name'
#: Binds ?g to the record graph of each ?chain first, so that its facts are then looked up in that
#: graph (GRAPH ?g { ... }): with the kind checked inside the same block as the facts, Oxigraph
#: scanned every graph (57 s instead of 0.1 s for 200 chains' trials at 1k chains).
CHAIN_GRAPH = 'GRAPH ?g { ?chain a luma:BoundaryQualification . ?g luma:recordKind "pex-chain" }'


class Reader:
    """SELECTs over what one scope may see, as rows of {variable: lexical value}."""

    def __init__(self, kb, scope: Scope | None = None):
        self.kb = kb
        self.scope = scope if scope is not None else Scope()

    @property
    def label(self) -> str:
        return self.scope.label

    def select(self, body: str) -> list[dict[str, str]]:
        answer = scoped_query(self.kb, PREFIXES + body, self.scope, trusted=True).json()
        return [{k: v["value"] for k, v in row.items()} for row in answer["results"]["bindings"]]

    def count(self, body: str) -> int:
        rows = self.select(f"SELECT (COUNT(*) AS ?n) WHERE {{ {body} }}")
        return int(rows[0]["n"]) if rows else 0


def check_ready(r: Reader) -> None:
    """NothingToReport unless the scope has PEX chains and the rules have run."""
    if r.count('GRAPH ?g { ?g luma:recordKind "pex-chain" }') == 0:
        raise NothingToReport("no PEX chains in this KB: run `luma sprint run CONTRACT` or "
                              "`luma kb ingest FILES`, then `luma rules run`")
    token = r.kb.store.select(f"SELECT ?t WHERE {{ <https://w3id.org/luma/id/rules> <{LUMA}runToken> ?t }}",
                              union=False)
    if not token:
        raise NothingToReport("the rules have not run on this KB: run `luma rules run`, then `luma report design-in`")


def requirements(r: Reader) -> list[dict]:
    return r.select(f"""SELECT ?hr ?resource ?rb ?confidence ?workloads ?architectures ?chains ?min ?median ?max
      ?unit ?key WHERE {{ GRAPH {HR} {{
        ?hr a luma:HardwareRequirement ; luma:resource ?resource ; prov:wasDerivedFrom ?rb .
        OPTIONAL {{ ?hr luma:confidence ?confidence }} OPTIONAL {{ ?hr luma:supportWorkloads ?workloads }}
        OPTIONAL {{ ?hr luma:supportArchitectures ?architectures }}
        OPTIONAL {{ ?hr luma:boundaryMin ?min ; luma:boundaryMedian ?median ; luma:boundaryMax ?max ;
                   luma:boundaryUnit ?unit }} }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?resource luma:recordKey ?key }} }}
      GRAPH {RB} {{ ?rb a luma:RecurringBinding ; luma:supportChains ?chains }} }}""")


def recurring_bindings(r: Reader) -> list[dict]:
    return r.select(f"""SELECT ?rb ?resource ?workloads ?architectures ?chains ?key WHERE {{
      GRAPH {RB} {{ ?rb a luma:RecurringBinding ; luma:resource ?resource ; luma:supportWorkloads ?workloads ;
          luma:supportArchitectures ?architectures ; luma:supportChains ?chains }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?resource luma:recordKey ?key }} }} }}""")


def counter_evidence(r: Reader) -> dict[str, dict]:
    """{recurring binding: {"n": counter-chains, "tasks": [task classes]}}."""
    out: dict[str, dict] = {}
    for row in r.select(f"""SELECT ?rb ?n ?task WHERE {{ GRAPH {CE} {{ ?ce a luma:CounterEvidence ; luma:supportOf ?rb ;
                           luma:counterChains ?n . OPTIONAL {{ ?ce luma:taskClass ?task }} }} }}"""):
        entry = out.setdefault(row["rb"], {"n": int(row["n"]), "tasks": []})
        if row.get("task"):
            entry["tasks"].append(row["task"])
    for entry in out.values():
        entry["tasks"] = sorted(set(entry["tasks"]))
    return out


def remedies(r: Reader) -> list[dict]:
    return r.select(f"""SELECT ?rr ?resource ?intervention ?kind ?chains ?workloads ?architectures ?key WHERE {{
      GRAPH {RR} {{ ?rr a luma:RecurringRemedy ; luma:remedyResource ?resource ; luma:remedyIntervention ?i ;
          luma:supportChains ?chains ; luma:supportWorkloads ?workloads ; luma:supportArchitectures ?architectures }}
      ?i rdfs:label ?intervention . OPTIONAL {{ ?i luma:interventionKind ?kind }}
      OPTIONAL {{ GRAPH {ONTOLOGY} {{ ?resource luma:recordKey ?key }} }} }}""")


#: Record kinds that are statements about other records, not evidence (luma.kb.records.kinds).
NOT_EVIDENCE = kinds.NOT_EVIDENCE


def evidence_by_class(r: Reader) -> list[dict]:
    """Records per (evidence class, kind), each read from the record's own graph; kinds that are
    no evidence (NOT_EVIDENCE) are left out."""
    kinds = ", ".join(f'"{k}"' for k in NOT_EVIDENCE)
    return r.select(f"""SELECT ?ec ?kind (COUNT(?g) AS ?records) WHERE {{
      {{ SELECT ?g ?kind WHERE {{ GRAPH ?g {{ ?g luma:recordKind ?kind }} FILTER(?kind NOT IN ({kinds})) }} }}
      {{ SELECT ?g ?ec WHERE {{ GRAPH ?g {{ ?g luma:evidenceClass ?ec }} }} }} }} GROUP BY ?ec ?kind""")


#: Chain properties a chain table shows, by the key each row gets.
_CHAIN_PROPS = {"workload": "w", "architecture": "a", "crossedDimension": "crossed", "bindingResource": "binding",
                "intervention": "i", "passLevel": "pass", "failLevel": "fail", "passUnit": "unit",
                "passCategory": "passCat", "failCategory": "failCat"}
_CHUNK = 400


def _chain_rows(r: Reader, chains: list[str]) -> list[dict]:
    """The chains' properties and their entities' labels. Read as (chain, property, value) rows for
    VALUES batches and put together here: Oxigraph evaluated the same as one pattern with
    OPTIONALs in 0.75 s for 25 chains at 20k (it scans the optional part), this way in 0.01 s."""
    rows = {c: {"chain": c} for c in chains}
    props = {LUMA + p: key for p, key in _CHAIN_PROPS.items()}
    wanted = ", ".join(f"<{p}>" for p in props)
    for i in range(0, len(chains), _CHUNK):
        values = " ".join(f"<{c}>" for c in chains[i:i + _CHUNK])
        # A chain's facts from its own record graph only.
        for x in r.select(f"SELECT ?chain ?p ?o WHERE {{ VALUES ?chain {{ {values} }} {CHAIN_GRAPH} "
                          f"GRAPH ?g {{ ?chain ?p ?o FILTER(?p IN ({wanted})) }} }}"):
            rows[x["chain"]].setdefault(props[x["p"]], x["o"])
    entities = sorted({row[k] for row in rows.values() for k in ("w", "a", "i") if k in row})
    labels = {}
    for i in range(0, len(entities), _CHUNK):
        values = " ".join(f"<{e}>" for e in entities[i:i + _CHUNK])
        for x in r.select(f"SELECT ?e ?label WHERE {{ VALUES ?e {{ {values} }} ?e rdfs:label ?label }}"):
            labels.setdefault(x["e"], x["label"])
    for row in rows.values():
        for key, name in (("w", "workload"), ("a", "architecture"), ("i", "intervention")):
            row[name] = labels.get(row.get(key, ""), "?")
        row.setdefault("crossed", "?")
        row.setdefault("binding", "?")
    return list(rows.values())


def _listed(r: Reader, where: str, evidence_iri: str, limit: int) -> tuple[list[dict], int]:
    total = r.count(where)
    first = "" if total <= FULL_LIST else f"LIMIT {limit}"
    chains = [x["chain"] for x in r.select(f"SELECT DISTINCT ?chain WHERE {{ {where} }} {first}")]
    rows = _chain_rows(r, chains)
    for row in rows:
        row["ec"] = evidence_iri
    rows.sort(key=lambda x: (x["workload"], x["architecture"], x["chain"]))
    return rows[:limit], total


_QUALIFIED = f"GRAPH {QB} {{ ?q a luma:QualifiedBoundary ; luma:qualifies ?chain }}"


def qualified(r: Reader, limit: int) -> tuple[list[dict], int]:
    """(first `limit` qualified boundaries, their number), each row naming the runner that measured it."""
    rows, total = _listed(r, _QUALIFIED, LUMA + "Measured", limit)
    if rows:
        values = " ".join(f"<{row['chain']}>" for row in rows)
        who = {x["chain"]: x["name"] for x in r.select(
            f"SELECT ?chain ?name WHERE {{ VALUES ?chain {{ {values} }} GRAPH {QB} {{ ?q luma:qualifies ?chain ; "
            f"luma:attestedBy ?key }} {RUNNER_NAME} }} }}")}
        synthetic = {x["chain"] for x in r.select(
            f"SELECT ?chain WHERE {{ VALUES ?chain {{ {values} }} {CHAIN_GRAPH} GRAPH ?g {{ "
            f'?chain prov:wasGeneratedBy ?act . ?act luma:tool ?tool FILTER(STRSTARTS(?tool, "luma synthetic")) }} }}')}
        feet = pass_footprints(r, [row["chain"] for row in rows])
        for row in rows:
            row["runner"] = who.get(row["chain"])
            row["synthetic"] = row["chain"] in synthetic
            row["footprint"] = feet.get(row["chain"])
    return rows, total


def pass_footprints(r: Reader, chains: list[str]) -> dict[str, float]:
    """{chain: the largest runtime footprint (bytes) its PASS-state trials measured}: what a
    host_memory level (a budget on top of it, reports/budget.py) needs added."""
    if not chains:
        return {}
    values = " ".join(f"<{c}>" for c in chains)
    return {x["chain"]: float(x["foot"]) for x in r.select(
        f"""SELECT ?chain (MAX(?v) AS ?foot) WHERE {{ VALUES ?chain {{ {values} }} {CHAIN_GRAPH}
        GRAPH ?g {{ ?chain luma:trial ?t . ?t luma:trialState "pass" ; luma:observation ?o .
        ?o luma:metric "runtime_footprint" ; qudt:numericValue ?v }} }} GROUP BY ?chain""") if x.get("foot")}


def synthetic_count(r: Reader) -> int:
    """Qualified boundaries whose chain says it was generated (kb/records/synthetic.py), not measured."""
    return r.count(f"""GRAPH {QB} {{ ?q a luma:QualifiedBoundary ; luma:qualifies ?chain }} {CHAIN_GRAPH}
      GRAPH ?g {{ ?chain prov:wasGeneratedBy ?act . ?act luma:tool ?tool FILTER(STRSTARTS(?tool, "luma synthetic")) }}""")


def runners(r: Reader) -> list[dict]:
    """The runner keys behind the qualified boundaries: name, fingerprint, how many."""
    return r.select(f"""SELECT ?name ?fingerprint (COUNT(?q) AS ?boundaries) WHERE {{
      GRAPH {QB} {{ ?q a luma:QualifiedBoundary ; luma:attestedBy ?key }}
      {RUNNER_NAME} ; luma:keyFingerprint ?fingerprint }}
    }} GROUP BY ?name ?fingerprint ORDER BY ?name""")


def qualified_count(r: Reader) -> int:
    return r.count(_QUALIFIED)


def unqualified(r: Reader, evidence_iri: str, limit: int) -> tuple[list[dict], int]:
    """(first `limit` unqualified chains of one evidence class, their number)."""
    return _listed(r, f"GRAPH {UNQUALIFIED} {{ ?u luma:evidenceClass <{evidence_iri}> ; a luma:UnqualifiedChain ; "
                      "luma:about ?chain }", evidence_iri, limit)


def model_errors(r: Reader) -> list[dict]:
    """The analytical model's error facts (`luma model calibrate`), with their record's class."""
    return r.select("""SELECT ?ec ?contract ?metric ?trials ?median ?max ?hmedian ?hmax WHERE {
      GRAPH ?g { ?e a luma:ModelError ; luma:contractName ?contract ; luma:metric ?metric . }
      GRAPH ?g { ?g luma:recordKind ?kind ; luma:evidenceClass ?ec }
      OPTIONAL { ?e luma:trials ?trials } OPTIONAL { ?e luma:medianRelativeError ?median }
      OPTIONAL { ?e luma:maxRelativeError ?max } OPTIONAL { ?e luma:heldOutMedianRelativeError ?hmedian }
      OPTIONAL { ?e luma:heldOutMaxRelativeError ?hmax } } ORDER BY ?contract ?metric""")


def machines(r: Reader) -> list[dict]:
    """Machine records: name, class, architecture, largest memory capacity and bandwidth, power, source."""
    return r.select("""SELECT ?m ?name ?ec ?architecture ?devices ?source (MAX(?cap) AS ?capacity)
      (MAX(?bw) AS ?bandwidth) (MAX(?w) AS ?power) WHERE {
      GRAPH ?g { ?g luma:recordKind "machine" .
        ?m a luma:MachineParameters ; luma:machineName ?name ; luma:evidenceClass ?ec ; luma:architecture ?a ;
           luma:deviceCount ?devices .
        OPTIONAL { ?m luma:sourceTitle ?source }
        OPTIONAL { ?m luma:figure ?f1 . ?f1 luma:figureKind "memory_capacity" ; qudt:numericValue ?cap }
        OPTIONAL { ?m luma:figure ?f2 . ?f2 luma:figureKind "memory_bandwidth" ; qudt:numericValue ?bw }
        OPTIONAL { ?m luma:figure ?f3 . ?f3 luma:figureKind "power_tdp" ; qudt:numericValue ?w } }
      ?a rdfs:label ?architecture .
    } GROUP BY ?m ?name ?ec ?architecture ?devices ?source ORDER BY ?name ?m""")
