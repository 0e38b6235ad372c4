"""Where a query may read each sealed term: derived facts only inside the graph of the rule that
derived them, ontology facts only inside the ontology graph, runner trust and record facts only
inside a record's own graph (kb/records/sealed.py has the marks; DESIGN §8, "conclusions are sealed").

`unsealed_reads(sparql)` lists every triple pattern of a query that reads a sealed term anywhere
else, so a plain RDF document, which always lands in a graph of its own, can never add a fact to
what a rule, a named query or a report reads. tests/rules/test_sealed_reads.py runs it over every
shipped rule, every named query and every query the reports and `luma kb explain` send.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rdflib import URIRef, Variable
from rdflib.namespace import RDF
from rdflib.paths import Path as RdfPath
from rdflib.plugins.sparql import prepareQuery
from rdflib.plugins.sparql.parserutils import CompValue

from luma.errors import RuleError
from luma.kb.records.sealed import sealed
from luma.kb.vocab import LUMA, ONTOLOGY_GRAPH, PROV, RECORD_GRAPH
from luma.rules.analysis import analyse_cached, path_iris
from luma.rules.loader import Rule, load_all, packaged_files, render
from luma.rules.state import DERIVED
from luma.settings import rules_cache

#: What the engine itself writes into every derived graph (rules/engine.py: the derivation node).
_ENGINE_WRITES = (PROV + "Activity", PROV + "wasGeneratedBy", LUMA + "rule", LUMA + "ruleVersion")


@dataclass(frozen=True)
class Writers:
    """Term IRI (predicate, or class as rdf:type object) -> ids of the rules whose template writes it."""

    by_term: dict[str, frozenset[str]]
    rules: frozenset[str]


def writers(rules: list[Rule] | None = None) -> Writers:
    """Who writes what, from the rules' CONSTRUCT templates (the shipped rules unless given).
    Their analyses come from the machine's cache, as `luma rules run` keeps them: parsing the 14
    shipped rules again cost ~3 s in every process that checked a project's own rule."""
    rules = rules if rules is not None else load_all()
    shared = rules_cache() / "analysis"
    out: dict[str, set[str]] = {}
    for rule in rules:
        for key in analyse_cached(rule, None, shared).writes:
            if key[0] in ("type", "pred"):
                out.setdefault(key[1], set()).add(rule.id)
    ids = frozenset(r.id for r in rules)
    for term in _ENGINE_WRITES:
        out.setdefault(term, set()).update(ids)
    return Writers({t: frozenset(r) for t, r in out.items()}, ids)


@lru_cache(maxsize=1)
def _shipped_writers() -> Writers:
    return writers()


def unsealed_reads(sparql: str, who_writes: Writers | None = None) -> list[str]:
    """Every pattern of `sparql` that reads a sealed term outside the graphs allowed for it, as
    `term (in GRAPH x): why` lines; empty when the query is sealed."""
    who_writes = who_writes or _shipped_writers()
    algebra = prepareQuery(sparql).algebra
    values, records = _values(algebra), _record_graph_variables(algebra)
    # A graph variable the query returns is judged by its caller, row by row (`luma kb explain`
    # keeps a fact only when its graph is the derived graph of its rule or a record's own graph:
    # graph conditions inside the query made Oxigraph scan every graph).
    records |= _projected(algebra)
    problems: list[str] = []

    def check(triples, graph) -> None:
        for term in _terms(triples):
            why = _problem(term, graph, values, records, who_writes)
            if why:
                problems.append(f"<{term}> (in {_where(graph)}): {why}")

    def walk(node, graph) -> None:
        if isinstance(node, CompValue):
            if node.name in ("BGP", "TriplesBlock") and node.get("triples"):
                check(node["triples"], graph)
            if node.name in ("Graph", "GraphGraphPattern"):
                graph = node["term"]
            for key, value in node.items():
                if node.name in ("Graph", "GraphGraphPattern") and key == "term":
                    continue
                walk(value, graph)
        elif isinstance(node, (list, tuple)):
            for x in node:
                walk(x, graph)
        elif isinstance(node, dict):
            for x in node.values():
                walk(x, graph)

    walk(algebra.get("p"), None)
    return problems


def _terms(triples) -> list[str]:
    """The predicates (path IRIs included) and rdf:type classes a block of patterns reads."""
    out = []
    for t in triples:
        t = list(t)
        for s, p, o in zip(t[0::3], t[1::3], t[2::3]):
            if isinstance(p, RdfPath):
                out += [str(i) for i in path_iris(p)]
            elif isinstance(p, URIRef):
                out.append(str(p))
                if p == RDF.type and isinstance(o, URIRef):
                    out.append(str(o))
    return out


def _problem(term: str, graph, values: dict, records: set, who_writes: Writers) -> str | None:
    who = set(sealed().who(term))
    rules = who_writes.by_term.get(term, frozenset())
    if rules:
        who.add("rules")
        if term not in sealed() and not term.startswith("https://w3id.org/luma/"):
            who.add("ledger")  # an outside vocabulary term (prov:) the projection writes too
    if not who:
        return None
    if graph is None:
        return f"stated only by {', '.join(sorted(who))}, read from the union of all graphs"
    allowed = {DERIVED + r for r in rules} if "rules" in who else set()
    if "ontology" in who:
        allowed.add(ONTOLOGY_GRAPH)
    if isinstance(graph, URIRef):
        own = str(graph).startswith(RECORD_GRAPH) or graph in records
        if str(graph) in allowed or (own and who != {"ontology"}):
            return None  # the graph that states it, or one record's own graph
        return f"not stated in <{graph}>"
    if isinstance(graph, Variable):
        bound = values.get(graph)
        if bound is not None:
            stray = {str(g) for g in bound} - allowed
            if stray and not ({"ledger", "trust"} & who):
                return f"?{graph} may be <{min(stray)}>, which does not state it"
            return None
        if graph in records and who != {"ontology"}:
            return None  # a record's own graph: the query names its kind inside it
        return (f"?{graph} is neither bound to the graphs that state it (VALUES ?{graph} {{ … }}) nor a record's "
                f"own graph (GRAPH ?{graph} {{ ?{graph} luma:recordKind … }})")
    return "an unexpected graph term"


def _values(algebra) -> dict:
    """{variable: the IRIs a VALUES clause binds it to} across the whole query."""
    out: dict = {}

    def walk(node) -> None:
        if isinstance(node, CompValue):
            if node.name == "values" and node.get("res"):
                for row in node["res"]:
                    for var, value in row.items():
                        out.setdefault(var, set()).add(value)
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            for x in node.values():
                walk(x)

    walk(algebra)
    return out


def _record_graph_variables(algebra) -> set:
    """The graph terms the query pins to a record's own graph: `GRAPH ?g { ?g luma:recordKind … }`
    (only the projection writes a record node's kind, into its own graph, and no document can
    describe a record node)."""
    kind = URIRef(LUMA + "recordKind")
    out: set = set()

    def walk(node, graph) -> None:
        if isinstance(node, CompValue):
            if node.name in ("BGP", "TriplesBlock") and isinstance(graph, (Variable, URIRef)):
                for t in node.get("triples") or []:
                    t = list(t)
                    if any(s == graph and p == kind for s, p in zip(t[0::3], t[1::3])):
                        out.add(graph)
            if node.name in ("Graph", "GraphGraphPattern"):
                graph = node["term"]
            for value in node.values():
                walk(value, graph)
        elif isinstance(node, (list, tuple, dict)):
            for x in node.values() if isinstance(node, dict) else node:
                walk(x, graph)

    walk(algebra, None)
    return out


def _projected(algebra) -> set:
    """The variables a SELECT returns."""
    return {v for v in (algebra.get("PV") or []) if isinstance(v, Variable)}


def _where(graph) -> str:
    if graph is None:
        return "the default graph"
    return f"GRAPH ?{graph}" if isinstance(graph, Variable) else f"GRAPH <{graph}>"


def refuse_unsealed(analysed: list) -> None:
    """RuleError for a project rule (`$LUMA_HOME/rules/*.rq`) that reads a sealed term outside the
    graphs that state it: a rule file is untrusted like a query, and a rule that read derived facts
    from the union of all graphs would let any graph's facts into what it derives. The shipped rules
    are checked by their tests (tests/rules/test_sealed_reads.py), not on every run."""
    shipped = {name for name, _ in packaged_files()}
    own = [a for a in analysed if a.rule.path not in shipped]
    if not own:
        return
    who_writes = Writers(_merge(_shipped_writers(), analysed), frozenset(a.rule.id for a in analysed))
    for a in own:
        found = unsealed_reads(render(a.rule), who_writes)
        if found:
            raise RuleError(f"reads a sealed term outside the graphs that state it: {found[0]} (read derived facts "
                            "inside GRAPH derived:<rule id>, the hierarchy inside the ontology graph, records and "
                            "trust inside a record's own graph)", source=a.rule.path, field=f"line {a.rule.body_line}")


def _merge(shipped: Writers, analysed: list) -> dict:
    out = {t: set(r) for t, r in shipped.by_term.items()}
    for a in analysed:
        for key in a.writes:
            if key[0] in ("type", "pred"):
                out.setdefault(key[1], set()).add(a.rule.id)
    return {t: frozenset(r) for t, r in out.items()}
