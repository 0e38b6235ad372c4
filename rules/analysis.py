"""What each rule reads and writes, the dependency graph of the rule set, and its strata.

A rule's reads and writes are *keys*: `type <Class>` for `?x a <Class>` patterns (so rules that
derive different classes do not all depend on each other through rdf:type), otherwise the
predicate IRI, with the classes of its subject where the same pattern types it (see
`keys_meet`); a variable predicate reads everything. A read inside `FILTER NOT EXISTS`, `MINUS`
or an aggregate is *negative*: the reader may only run once its writer has reached its fixpoint,
so a cycle through a negative edge cannot be stratified and is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
from rdflib import BNode, URIRef, Variable
from rdflib.namespace import RDF
from rdflib.paths import Path as RdfPath
from rdflib.plugins.sparql.algebra import translateQuery
from rdflib.plugins.sparql.parser import parseQuery
from rdflib.plugins.sparql.parserutils import CompValue

from luma.errors import QueryError, QueryRefused, RuleError
from luma.kb.query import safety as query_safety
from luma.kb.query.safety import CheckedQuery, check_query
from luma.rules.loader import Rule, render
from luma.rules.state import DERIVED

ANY = ("any",)


@dataclass
class Analysed:
    """A rule with the keys it reads (positively / negatively) and writes."""

    rule: Rule
    writes: set = field(default_factory=set)
    reads: set = field(default_factory=set)
    negative: set = field(default_factory=set)
    outside_graph: bool = False  # some pattern reads the (union) default graph
    #: Keys read outside any GRAPH, with whether the read is negated (FILTER NOT EXISTS, MINUS).
    outside: list = field(default_factory=list)
    #: The class the template types the first `derives` variable with (`?hr a luma:HardwareRequirement`):
    #: what the rule's results are, and what `luma rules run` counts. None when the rule types none.
    result_class: str | None = None
    #: Keys read only to require their absence (FILTER NOT EXISTS, MINUS): facts the rule's results
    #: do not rest on (rules/empty_answer.py follows what they rest on).
    absent: set = field(default_factory=set)
    #: The graphs its GRAPH patterns name: IRIs, or "?name" for a variable.
    graphs: set = field(default_factory=set)
    #: A `reads: records` rule's record-graph variable (without "?") and how many GRAPH patterns
    #: read it, when no other GRAPH pattern uses that variable (the engine may then bind it with
    #: VALUES for a run over some records: rules/engine.py `_record_batches`); else None and 0.
    record_var: str | None = None
    record_reads: int = 0


def _key(s, p, o):
    if p == RDF.type and isinstance(o, URIRef):
        return ("type", str(o))
    if isinstance(p, URIRef):
        return ("pred", str(p))
    return ANY


def path_iris(p) -> list:
    """The IRIs a property path (or a plain predicate) names."""
    if isinstance(p, URIRef):
        return [p]
    out = []
    for attr in ("args", "arg", "path"):
        sub = getattr(p, attr, None)
        for x in sub if isinstance(sub, (list, tuple)) else ([sub] if sub is not None else []):
            out += path_iris(x)
    return out


def _triples_keys(triples) -> list:
    flat, keys = [], []
    for t in triples:
        # Translated BGPs hold (s, p, o); the untranslated bodies of FILTER (NOT) EXISTS keep the
        # parser's flat list [s1, p1, o1, s2, p2, o2, ...] (a `;` list expanded).
        t = list(t)
        if not t or len(t) % 3:
            keys.append(ANY)  # a shape not understood: depend on everything (never wrong, only slower)
            continue
        flat += zip(t[0::3], t[1::3], t[2::3])
    # The classes each subject is typed with in the same pattern (`?x a luma:C ; luma:p ?v`).
    classes: dict = {}
    for s, p, o in flat:
        if p == RDF.type and isinstance(o, URIRef):
            classes.setdefault(s, set()).add(str(o))
    for s, p, o in flat:
        if isinstance(p, RdfPath):
            keys += [("pred", str(i)) for i in path_iris(p)] or [ANY]
            continue
        key = _key(s, p, o)
        if key[0] == "pred" and s in classes:
            key = (*key, frozenset(classes[s]))
        keys.append(key)
    return keys


def keys_meet(reads: set, writes: set) -> bool:
    """Whether facts written under `writes` can match patterns read under `reads`. A predicate
    key may carry the classes its subject is typed with in the same pattern: a read of luma:resource
    on luma:RecurringBinding nodes does not meet a write of luma:resource on
    luma:HardwareRequirement nodes (rules mint their own nodes, so a node one rule types C is not
    given a second rule's predicates under another class); a key without classes meets any."""
    if ANY in reads or ANY in writes and reads:
        return True
    by_base: dict = {}
    for w in writes:
        by_base.setdefault(w[:2], []).append(w[2] if len(w) > 2 else None)
    for r in reads:
        rc = r[2] if len(r) > 2 else None
        for wc in by_base.get(r[:2], ()):
            if rc is None or wc is None or rc & wc:
                return True
    return False


def _walk(node, negative: bool, out: Analysed, in_graph: bool = False, absent: bool = False) -> None:
    if isinstance(node, CompValue):
        name = node.name
        if name in ("Graph", "GraphGraphPattern") and node.get("term") is not None:
            term = node.get("term")
            out.graphs.add(f"?{term}" if isinstance(term, Variable) else str(term))
        if name in ("BGP", "TriplesBlock") and node.get("triples"):
            keys = _triples_keys(node["triples"])
            (out.negative if negative else out.reads).update(keys)
            if absent:
                out.absent.update(keys)
            if not in_graph:
                out.outside_graph = True
                out.outside += [(k, negative) for k in keys]
        for key, value in node.items():
            gone = absent or (name == "Minus" and key == "p2") or (name == "Builtin_NOTEXISTS" and key == "graph")
            neg = negative or gone or name == "AggregateJoin"
            _walk(value, neg, out, in_graph or name in ("Graph", "GraphGraphPattern"), gone)
    elif isinstance(node, (list, tuple)):
        for x in node:
            _walk(x, negative, out, in_graph, absent)
    elif isinstance(node, dict):
        for x in node.values():
            _walk(x, negative, out, in_graph, absent)


def analyse(rule: Rule) -> Analysed:
    """Check the rule's SPARQL (parameters at their defaults) as a query is checked, and collect
    its keys from the parse tree the check made."""
    text = render(rule)
    checked = check_rule_text(rule, text)
    try:
        # translateQuery changes the tree it is given; the check translated it already when the
        # query has a dataset clause (FROM), so that one is parsed again.
        query = translateQuery(checked.tree if not checked.has_dataset else parseQuery(text))
    except Exception as exc:  # noqa: BLE001 - rdflib raises pyparsing and other errors
        msg = str(exc).splitlines()[0][:300]
        raise RuleError(f"SPARQL does not parse: {msg}", source=rule.path, field=f"line {rule.body_line}") from None
    alg = query.algebra
    if any(isinstance(t, BNode) for triple in alg.template for t in triple):
        raise RuleError("the template holds a blank node: derive IRIs (e.g. IRI(CONCAT(...))) so that a re-run "
                        "derives the same facts", source=rule.path, field=f"line {rule.body_line}")
    for var in (rule.derives or "").split():
        if Variable(var[1:]) not in {t for triple in alg.template for t in triple}:
            raise RuleError(f"derives {var} does not appear in the CONSTRUCT template", source=rule.path,
                            field="derives")
    out = Analysed(rule, writes=set(_triples_keys(alg.template)), result_class=_result_class(rule, alg.template))
    _walk(alg["p"], False, out)
    if rule.reads == "records":
        # The one exception: a negated read of a declared context predicate (`# context:`), which
        # the engine watches so that a change of those facts reruns the rule in full.
        stray = [k for k, neg in out.outside if not (neg and k[0] == "pred" and k[1] in rule.context)]
        if stray:
            raise RuleError("`reads: records` needs every pattern inside GRAPH ?g { } (a source-record graph), "
                            "or a FILTER NOT EXISTS on a `# context:` predicate", source=rule.path, field="reads")
        out.record_var, out.record_reads = _check_per_graph(rule, alg["p"])
        out.reads, out.negative, out.absent = set(), set(), set()  # asserted facts only: no rule feeds it
    if rule.partition is not None:
        _check_partitioned(rule, out)
    return out


def _check_partitioned(rule: Rule, out: Analysed) -> None:
    """A partitioned rule reads derived graphs it names and nothing else: the engine gives the
    store those graphs alone, in every mode, and follows only their changes (rules/partition.py)."""
    named = [g for g in out.graphs if not g.startswith("?")]
    if out.outside_graph or len(named) != len(out.graphs) or not all(g.startswith(DERIVED) for g in named):
        raise RuleError("a partitioned rule reads every pattern inside GRAPH <a derived graph>, named by its IRI "
                        "(derived:qualified-boundary), never a graph variable or the default graph",
                        source=rule.path, field="partition")


def _result_class(rule: Rule, template) -> str | None:
    """The class of the rule's results: the first `derives` variable's rdf:type in the template."""
    first = (rule.derives or "").split()[:1]
    types = sorted(str(o) for s, p, o in template
                   if first and s == Variable(first[0][1:]) and p == RDF.type and isinstance(o, URIRef))
    return types[0] if types else None


#: What `analyse` and the checks compute depends on this file's code and the query checks': a cached
#: analysis or verdict made by other code is not read.
_CODE = hashlib.sha256(Path(__file__).read_bytes() + Path(query_safety.__file__).read_bytes()).hexdigest()


def analyse_cached(rule: Rule, cache: Path | None, shared: Path | None = None) -> Analysed:
    """`analyse`, remembered in `cache` (the project's: one JSON file per rule text), in `shared`
    (the machine's, `luma.settings.rules_cache`: every project runs the same shipped rules) and in
    this process: rdflib parses a rule in 0.1-0.3 s, which every `luma rules run` would otherwise
    pay again for the same files (2 s of a 4 s incremental run at 100k chains), and every fresh
    project's first run in its sandboxed child (a new process: ~3 s for the 14 shipped rules). A
    rule that does not analyse is never cached, so its error is raised every time; an unreadable
    cache file is analysed again."""
    key = hashlib.sha256(json.dumps([_CODE, rule.id, rule.path, render(rule), rule.derives, rule.reads,
                                     list(rule.context), repr(rule.partition)]).encode()).hexdigest()
    name = f"{rule.id}-{key[:24]}.json"
    folders = [f for f in (cache, shared) if f is not None]
    data, out, broken = _ANALYSED.get(key), None, set()
    if data is None:
        for folder in folders:
            try:
                data = json.loads((folder / name).read_text())
                out = _analysed_from(rule, data)
                break
            except OSError:
                data = None
            except (ValueError, KeyError, TypeError):
                data = None
                broken.add(folder)
    if data is None:
        out = analyse(rule)
        data = {"writes": _keys_out(out.writes), "reads": _keys_out(out.reads), "negative": _keys_out(out.negative),
                "outside_graph": out.outside_graph, "outside": [[_key_out(k), neg] for k, neg in out.outside],
                "result_class": out.result_class, "absent": _keys_out(out.absent), "graphs": sorted(out.graphs),
                "record_var": out.record_var, "record_reads": out.record_reads}
    elif out is None:  # remembered in this process
        out = _analysed_from(rule, data)
    if key not in _ANALYSED:
        _ANALYSED[key] = json.loads(json.dumps(data))  # a copy: the caller's Analysed may be changed
    for folder in folders:  # for the next process
        _keep(folder / name, json.dumps(data, sort_keys=True), replace=folder in broken)
    return out


def _keep(path: Path, text: str, replace: bool = False) -> None:
    """Write a cache file unless it is there (or `replace`: it did not read), atomically: a reader
    never sees half of one; a folder that cannot be written (a read-only project) only means
    parsing again next time."""
    if path.is_file() and not replace:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError:
        pass


#: What `analyse_cached` found in this process, by the digest of the rule and the analysing code.
_ANALYSED: dict[str, dict] = {}


def _analysed_from(rule: Rule, data: dict) -> Analysed:
    """The analysis `analyse_cached` keeps as JSON, for `rule`."""
    return Analysed(rule, writes=_keys_in(data["writes"]), reads=_keys_in(data["reads"]),
                    negative=_keys_in(data["negative"]), outside_graph=data["outside_graph"],
                    outside=[(_key_in(k), neg) for k, neg in data["outside"]],
                    result_class=data["result_class"], absent=_keys_in(data["absent"]),
                    graphs=set(data["graphs"]), record_var=data["record_var"],
                    record_reads=data["record_reads"])


def _key_out(key: tuple) -> list:
    return [key[0], key[1], sorted(key[2])] if len(key) > 2 else list(key)


def _key_in(key: list) -> tuple:
    return (key[0], key[1], frozenset(key[2])) if len(key) > 2 else tuple(key)


def _keys_out(keys: set) -> list:
    return sorted(_key_out(k) for k in keys)


def _keys_in(keys: list) -> set:
    return {_key_in(k) for k in keys}


def check_rule_text(rule: Rule, text: str) -> CheckedQuery:
    """The checks of a user's query (kb/query/safety.py: no escapes, the lexical SERVICE scan,
    rdflib's parse tree) on the rule's SPARQL as it will run, and a CONSTRUCT; RuleError naming
    the file and line otherwise."""
    where = f"line {rule.body_line}"
    try:
        checked = check_query(text, rule.path, first_line=rule.body_line)
    except QueryRefused as exc:  # SERVICE, an escape, an update
        raise RuleError(f"rules never fetch remote data or write: {exc.message}", source=rule.path,
                        field=where) from None
    except QueryError as exc:
        raise RuleError(f"SPARQL does not parse: {exc.message}", source=rule.path, field=where) from None
    if checked.form != "construct":
        raise RuleError(f"a rule body must be a CONSTRUCT query, not {checked.form.upper()}", source=rule.path,
                        field=where)
    return checked


#: Digests of the rule texts that passed `check_rule_text` in this process (see `check_rule_cached`).
_PASSED: set[str] = set()


def check_rule_cached(rule: Rule, text: str, cache: Path | None, shared: Path | None = None) -> None:
    """`check_rule_text` on the text the engine is about to run, remembered in `cache` (the
    project's), `shared` (the machine's) and this process by a digest of that exact text (and of
    the checking code): rdflib parses a rule in 0.1-0.3 s, which every run with the same
    parameters, and every fresh project (every test's, a `--home` of one's own) would otherwise
    pay again. Only a text that passed is remembered, so a refused one is refused every time."""
    digest = hashlib.sha256(f"{_CODE}\0{text}".encode()).hexdigest()[:40]
    marks = [f / digest for f in (cache, shared) if f is not None]
    if digest not in _PASSED:
        if not any(mark.is_file() for mark in marks):
            check_rule_text(rule, text)
        _PASSED.add(digest)
    for mark in marks:  # for the next process
        _keep(mark, f"{rule.id}\n")


LUMA_RECORD_KIND = "https://w3id.org/luma/ns#recordKind"


def _reads_only(node, keys: set) -> bool:
    """Whether every pattern under `node` reads one of `keys`."""
    found: list = []

    def collect(n) -> None:
        if isinstance(n, CompValue):
            if n.name in ("BGP", "TriplesBlock") and n.get("triples"):
                found.extend(_triples_keys(n["triples"]))
            for v in n.values():
                collect(v)
        elif isinstance(n, (list, tuple)):
            for x in n:
                collect(x)
        elif isinstance(n, dict):
            for x in n.values():
                collect(x)

    collect(node)
    return bool(found) and all(k[:2] in keys for k in found)


def _check_per_graph(rule: Rule, alg) -> tuple[str | None, int]:
    """A `reads: records` rule must derive from each record graph alone (so the engine may run it
    over new records only): one graph variable, carried out of every subquery and grouping that
    reads a graph, so that nothing joins or aggregates across two records. Returns that variable
    and the number of GRAPH patterns that read it, or (None, 0) when a context read uses the same
    variable (it must then not be bound to some records)."""
    terms: set = set()
    reads = [0]
    context_terms: list = []  # (graph term, whether it reads a context predicate)
    # A graph read for the rule's declared context (the revocation records' graphs: `# context:`
    # predicates and the record kind that names them) is read whole, once, and subtracted: it is
    # not a record the rule derives from.
    context = {("pred", p) for p in rule.context} | {("pred", LUMA_RECORD_KIND)}

    def visit(node) -> bool:  # True when the subtree reads a graph
        found = False
        if isinstance(node, CompValue):
            if node.name == "Graph" and rule.context and _reads_only(node, context):
                # Only a read of a declared context predicate must see every graph; one of the
                # record kind alone (`GRAPH ?g { ?g luma:recordKind "pex-chain" }`) is per record.
                whole = not _reads_only(node, {("pred", LUMA_RECORD_KIND)})
                context_terms.append((node["term"], whole))
                return False
            if node.name == "Graph":
                terms.add(node["term"])
                reads[0] += 1
                found = True
            for value in node.values():
                found = visit(value) or found
            if found and node.name == "Project" and terms and not set(node.get("PV") or []) & terms:
                raise RuleError("`reads: records`: a subquery reads a record graph without selecting its graph "
                                "variable, so it would join records together", source=rule.path, field="reads")
            if found and node.name == "Group" and not set(node.get("expr") or []) & terms:
                raise RuleError("`reads: records`: an aggregate over record graphs must group by the graph "
                                "variable", source=rule.path, field="reads")
        elif isinstance(node, (list, tuple)):
            for x in node:
                found = visit(x) or found
        elif isinstance(node, dict):
            for x in node.values():
                found = visit(x) or found
        return found

    visit(alg)
    if len(terms) != 1 or not isinstance(next(iter(terms)), Variable):
        raise RuleError("`reads: records` needs one graph variable for every GRAPH pattern (GRAPH ?g), so that "
                        "each record is read alone", source=rule.path, field="reads")
    var = next(iter(terms))
    if any(term == var and whole for term, whole in context_terms):
        return None, 0
    return str(var), reads[0] + sum(1 for term, _ in context_terms if term == var)


def _reads_from(reader: Analysed, writer: Analysed) -> tuple[bool, bool]:
    """(depends, negatively)"""
    def hits(keys):
        return keys_meet(keys, writer.writes)
    return hits(reader.reads) or hits(reader.negative), hits(reader.negative)


def dependency_graph(rules: list[Analysed]) -> nx.DiGraph:
    """writer -> reader edges, `negative=True` where the reader negates or aggregates the facts."""
    g = nx.DiGraph()
    by_id = {a.rule.id: a for a in rules}
    for a in rules:
        g.add_node(a.rule.id)
        for other in a.rule.after:
            if other not in by_id:
                raise RuleError(f"`after: {other}` names no rule", source=a.rule.path, field="after")
            g.add_edge(other, a.rule.id, negative=True)
    for w in rules:
        for r in rules:
            dep, neg = _reads_from(r, w)
            if dep:
                prev = g.get_edge_data(w.rule.id, r.rule.id, {}).get("negative", False)
                g.add_edge(w.rule.id, r.rule.id, negative=neg or prev)
    return g


def supports(reader: Analysed, rules: list[Analysed]) -> list[Analysed]:
    """The rules whose results `reader`'s results rest on: those it reads, aggregates or joins,
    not those it reads only to require their absence (FILTER NOT EXISTS, MINUS)."""
    present = reader.reads | {k for k in reader.negative if k not in reader.absent}
    return [w for w in rules if w is not reader and keys_meet(present, w.writes)]


def strata(rules: list[Analysed]) -> list[list[Analysed]]:
    """Groups of rules to run in order, each to its own fixpoint; refuses a cycle through negation
    or aggregation."""
    g = dependency_graph(rules)
    by_id = {a.rule.id: a for a in rules}
    cond = nx.condensation(g)
    for scc in cond.nodes:
        members = cond.nodes[scc]["members"]
        for u, v, data in g.subgraph(members).edges(data=True):
            if data["negative"]:
                cycle = " -> ".join(nx.shortest_path(g, v, u)) + f" -> {v}" if u != v else f"{u} -> {u}"
                raise RuleError(f"cycle through negation or aggregation: {cycle}", source=by_id[u].rule.path,
                                field="dependencies")
    order = list(nx.lexicographical_topological_sort(cond, key=lambda n: min(cond.nodes[n]["members"])))
    return [[by_id[m] for m in sorted(cond.nodes[n]["members"])] for n in order]
