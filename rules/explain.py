"""Explain a node: its derivation tree down to the ingested records (`luma kb explain IRI`).

Every derived node names its rule run (`prov:wasGeneratedBy` an activity with `luma:rule`,
`luma:ruleVersion`, `luma:parameter`) and its support (`prov:wasDerivedFrom`: another derived
node or a PEX chain node); a chain node is `prov:wasDerivedFrom` its record graph, which
describes itself inside its own graph (`luma:recordKind`, `luma:contentHash`, ...).

The tree is fetched level by level, a handful of queries per level whatever its width (VALUES
batches), and built depth first so that a node reached twice is described at its first
appearance in reading order and later only referenced (`{"iri": ..., "see_above": true}`); that
also stops cycles. A node lists at most `max_supports` supports (in IRI order) with the total in
`supports_total`; the records behind the root are still all named, uncapped, in the root's
`records` (walked level by level, like the tree).

Sealed (DESIGN §8): a node's facts are read only where they are stated -- a derived node's (its
types, rule run and supports) inside a rule's derived graph, a record node's inside its own
record graph, labels there or in the entities and ontology graphs -- so no loaded document can add
a support, a rule run or a record to a derivation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from luma.errors import QueryError, UnknownName
from luma.kb.vocab import ENTITY_GRAPH, EVIDENCE_CLASSES, LUMA, ONTOLOGY_GRAPH, PREFIXES, PROV, RDF, RDFS
from luma.rules.state import DERIVED

#: IRIs per VALUES block (keeps every query text small).
CHUNK = 400

_DERIVED_FROM = f"<{PROV}wasDerivedFrom>"
_RECORD_KIND = f"<{LUMA}recordKind>"
_IS_RECORD = f"GRAPH ?s {{ ?s {_RECORD_KIND} ?rk }}"
#: Graphs that hold a node's label besides its own (sealed) graphs.
_LABEL_GRAPHS = (ENTITY_GRAPH, ONTOLOGY_GRAPH)
#: What a rule run states (rules/engine.py writes it into the rule's derived graph).
_RUN_FACTS = ("rule", "version", "param", "exploratory")
_BAD_IRI = re.compile(r'[\s<>"{}|^`\\]')
_PREFIXED = re.compile(r"^([A-Za-z][\w-]*):(.*)$")
_CLASS_NAMES = {iri: name for name, iri in EVIDENCE_CLASSES.items()}
_RECORD_FIELDS = {
    LUMA + "recordKind": "record_kind",
    LUMA + "contentHash": "content_hash",
    LUMA + "evidenceClass": "evidence_class",
    PROV + "generatedAtTime": "ingested_at",
    PROV + "wasAttributedTo": "submitter",
}


def resolve_iri(text: str) -> str:
    """A full IRI from `text`: `<iri>`, a full IRI, or a prefixed name (`id:chain/…`, `luma:…`)."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        text = text[1:-1]
    m = _PREFIXED.match(text)
    if m and m.group(1) in PREFIXES and not m.group(2).startswith("//"):
        text = PREFIXES[m.group(1)] + m.group(2)
    if not text or _BAD_IRI.search(text) or ":" not in text:
        raise QueryError(f"{text!r} is not an IRI (give a full IRI or a prefixed name such as id:chain/…)")
    return text


def _values(var: str, iris: Iterable[str]) -> str:
    return f"VALUES ?{var} {{ {' '.join(f'<{i}>' for i in iris)} }}"


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield items[i:i + CHUNK]


def _class_name(iri: str) -> str:
    return _CLASS_NAMES.get(iri, iri)


class _Graphs:
    """Which graphs may state a node's facts, judged from the graph each fact was read in: a
    rule's derived graph (a derived node's types, rule run and supports), or a record's own graph
    (one that names its kind inside itself; a loaded document's is none) for a record node's.
    Each query reads `GRAPH ?g { ... }` and this keeps the rows of admitted graphs: the same
    index lookups as before, where a graph condition inside the query made Oxigraph scan every
    graph (0.1 s -> 17 s for a recurring binding at 1k chains)."""

    def __init__(self, store):
        self.store = store
        self._record: dict[str, bool] = {}

    @staticmethod
    def derived(graph: str) -> bool:
        return graph.startswith(DERIVED)

    def sealed(self, graphs: Iterable[str]) -> set[str]:
        """Those of `graphs` that are derived graphs or records' own graphs."""
        graphs = set(graphs)
        unknown = sorted(g for g in graphs if not self.derived(g) and g not in self._record)
        for chunk in _chunks(unknown):
            rows = self.store.select(f"SELECT ?g WHERE {{ {_values('g', chunk)} GRAPH ?g {{ ?g {_RECORD_KIND} ?k }} "
                                     f'FILTER(?k != "rdf-document") }}')
            found = {r["g"] for r in rows}
            self._record.update((g, g in found) for g in chunk)
        return {g for g in graphs if self.derived(g) or self._record.get(g)}

    def links(self, rows: list[dict]) -> list[dict]:
        """The rows (with ?g) whose link is stated in an admitted graph."""
        ok = self.sealed(r["g"] for r in rows)
        return [r for r in rows if r["g"] in ok]


class _Fetcher:
    """The facts of nodes, level by level (a few queries per level, not per node)."""

    def __init__(self, kb, max_supports: int):
        self.store = kb.store
        self.graphs = _Graphs(kb.store)
        self.max_supports = max_supports
        self.nodes: dict[str, dict] = {}       # iri -> description (without supports)
        self.supports: dict[str, list[str]] = {}  # iri -> listed supports (non-record), sorted

    def describe(self, iris: list[str]) -> None:
        """Types, label, evidence class, rule run, direct records and support count of each node."""
        for iri in iris:
            self.nodes[iri] = {"iri": iri, "types": [], "derived_by": None, "record": None, "supports_total": 0}
        acts: dict[str, dict[str, dict]] = {}
        records: dict[str, list[str]] = {}
        for chunk in _chunks(iris):
            rows = self.store.select(
                f"SELECT DISTINCT ?n ?k ?v ?x ?g WHERE {{ {_values('n', chunk)}\n"
                f"  {{ GRAPH ?g {{ ?n <{RDF}type> ?v }} BIND(\"type\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{RDFS}label> ?v }} BIND(\"label\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{LUMA}evidenceClass> ?v }} BIND(\"evidence\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{PROV}wasGeneratedBy> ?v . ?v <{LUMA}rule> ?x }} BIND(\"rule\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{PROV}wasGeneratedBy> ?v . ?v <{LUMA}ruleVersion> ?x }} "
                f"BIND(\"version\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{PROV}wasGeneratedBy> ?v . ?v <{LUMA}rule> ?r ; <{LUMA}parameter> ?x }} "
                f"BIND(\"param\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n <{PROV}wasGeneratedBy> ?v . ?v <{LUMA}exploratory> ?x }} "
                f"BIND(\"exploratory\" AS ?k) }}\n"
                f"  UNION {{ GRAPH ?g {{ ?n {_DERIVED_FROM} ?v }} GRAPH ?v {{ ?v {_RECORD_KIND} ?rk }} "
                f"BIND(\"record\" AS ?k) }}\n"
                f"}}")
            sealed = self.graphs.sealed(r["g"] for r in rows)
            # A rule run is stated in the rule's graph alone; a label also where entities are described.
            rows = [r for r in rows if (self.graphs.derived(r["g"]) if r["k"] in _RUN_FACTS else
                                        r["g"] in sealed or (r["k"] == "label" and r["g"] in _LABEL_GRAPHS))]
            # One row per fact, wherever else it is stated too.
            rows = list({(r["n"], r["k"], r["v"], r.get("x")): r for r in rows}.values())
            for row in rows:
                node, kind, value = self.nodes[row["n"]], row["k"], row["v"]
                if kind == "type":
                    node["types"].append(value)
                elif kind in ("label", "evidence"):  # one of several, the same one every time
                    key, value = ("label", value) if kind == "label" else ("evidence_class", _class_name(value))
                    node[key] = min(node.get(key, value), value)
                elif kind == "record":
                    records.setdefault(row["n"], []).append(value)
                else:
                    act = acts.setdefault(row["n"], {}).setdefault(
                        value, {"rule": None, "version": None, "parameters": [], "activity": value})
                    if kind == "exploratory":  # a run below the rules' floors (rules/exploratory.py)
                        act["exploratory"] = row["x"] == "true"
                    elif kind == "rule":
                        act["rule"] = row["x"]
                    elif kind == "version":
                        act["version"] = int(row["x"])
                    else:
                        act["parameters"].append(row["x"])
        for iri in iris:
            self.nodes[iri]["types"].sort()
        for iri, by_act in acts.items():
            runs = sorted(by_act.values(), key=lambda a: (a["rule"] or "", a["activity"]))
            for run in runs:
                run["parameters"].sort()
            self.nodes[iri]["derived_by"] = runs[0]
            if len(runs) > 1:  # two rules derive the same node
                self.nodes[iri]["also_derived_by"] = runs[1:]
        described = self.records(sorted({g for gs in records.values() for g in gs}))
        for iri, graphs in records.items():
            recs = [described[g] for g in sorted(set(graphs))]
            self.nodes[iri]["record"] = recs[0]
            if len(recs) > 1:  # a node derived from several records: the others as record leaves
                self.nodes[iri]["extra_records"] = recs[1:]
        self._count(iris)

    def records(self, graphs: list[str]) -> dict[str, dict]:
        """{record graph: its ledger description} (submitter by name where the agent has a label)."""
        out = {g: {"graph": g, "content_hash": None, "record_kind": None, "evidence_class": None,
                   "ingested_at": None, "submitter": None} for g in graphs}
        fields = ", ".join(f"<{p}>" for p in _RECORD_FIELDS)  # FILTER IN: a second VALUES is 50x slower
        for chunk in _chunks(graphs):
            rows = self.store.select(
                f"SELECT ?g ?p ?v ?name WHERE {{ {_values('g', chunk)} GRAPH ?g {{ ?g ?p ?v }} FILTER(?p IN ({fields})) "
                f"OPTIONAL {{ ?v <{RDFS}label> ?name }} }}")
            for row in rows:
                key = _RECORD_FIELDS[row["p"]]
                value = row.get("name", row["v"]) if key == "submitter" else row["v"]
                out[row["g"]][key] = _class_name(value) if key == "evidence_class" else value
        return out

    def _count(self, iris: list[str]) -> None:
        for chunk in _chunks(iris):
            rows = self.graphs.links(self.store.select(
                f"SELECT DISTINCT ?n ?s ?g WHERE {{ {_values('n', chunk)} GRAPH ?g {{ ?n {_DERIVED_FROM} ?s }} "
                f"FILTER NOT EXISTS {{ {_IS_RECORD} }} }}"))
            for n in chunk:
                self.nodes[n]["supports_total"] = len({r["s"] for r in rows if r["n"] == n})

    def list_supports(self, iris: list[str]) -> None:
        """The supports of each node that are not records: all of them up to `max_supports`,
        else the first `max_supports` in IRI order."""
        small = [i for i in iris if 0 < self.nodes[i]["supports_total"] <= self.max_supports]
        for chunk in _chunks(small):
            rows = self.graphs.links(self.store.select(
                f"SELECT DISTINCT ?n ?s ?g WHERE {{ {_values('n', chunk)} GRAPH ?g {{ ?n {_DERIVED_FROM} ?s }} "
                f"FILTER NOT EXISTS {{ {_IS_RECORD} }} FILTER(isIRI(?s)) }}"))
            for n, s in sorted({(row["n"], row["s"]) for row in rows}):
                self.supports.setdefault(n, []).append(s)
        for iri in iris:
            if self.nodes[iri]["supports_total"] > self.max_supports:
                # Sorted here, not by ORDER BY ... LIMIT: Oxigraph sorts 20k IRIs ~5x slower than
                # it streams them (measured: 1.4 s vs 0.25 s).
                rows = self.graphs.links(self.store.select(
                    f"SELECT DISTINCT ?s ?g WHERE {{ GRAPH ?g {{ <{iri}> {_DERIVED_FROM} ?s }} "
                    f"FILTER NOT EXISTS {{ {_IS_RECORD} }} FILTER(isIRI(?s)) }}"))
                self.supports[iri] = sorted({r["s"] for r in rows})[:self.max_supports]
        for iri in iris:
            self.supports[iri] = sorted(self.supports.get(iri, []))


def _check_known(kb, iri: str) -> bool:
    """True when the IRI is a record graph; UnknownName when the KB does not mention it at all."""
    rows = kb.store.select(
        f"SELECT ?known ?record WHERE {{ "
        f"BIND(EXISTS {{ {{ <{iri}> ?p ?o }} UNION {{ ?s ?p <{iri}> }} UNION {{ GRAPH <{iri}> {{ ?a ?b ?c }} }} }} AS ?known) "
        f"BIND(EXISTS {{ GRAPH <{iri}> {{ <{iri}> {_RECORD_KIND} ?k }} }} AS ?record) }}")
    if not rows or rows[0].get("known") != "true":
        raise UnknownName(f"{iri} is not in the knowledge base")
    return rows[0].get("record") == "true"


def supporting_records(kb, iri: str) -> list[str]:
    """Content hashes of every record the node derives from, at any depth (uncapped). Walked a
    level at a time over the sealed links (a property path would cross every graph), a few
    VALUES batches per level whatever its width."""
    record = f"OPTIONAL {{ GRAPH ?s {{ ?s {_RECORD_KIND} ?k ; <{LUMA}contentHash> ?h }} }}"
    rows = kb.store.select(f"SELECT ?s ?h WHERE {{ BIND(<{iri}> AS ?s) {record} }}")
    hashes = {r["h"] for r in rows if "h" in r}
    seen, level = {iri}, [] if hashes else [iri]
    while level:
        found: set[str] = set()
        for i in range(0, len(level), _WALK_CHUNK):
            # The link's graph judged in the same query (as _Graphs does): one lookup per link.
            rows = kb.store.select(
                f"SELECT DISTINCT ?s ?h ?g ?gk WHERE {{ {_values('n', level[i:i + _WALK_CHUNK])} "
                f"GRAPH ?g {{ ?n {_DERIVED_FROM} ?s }} FILTER(isIRI(?s)) {record} "
                f"OPTIONAL {{ GRAPH ?g {{ ?g {_RECORD_KIND} ?gk }} }} }}")
            for r in rows:
                if not (_Graphs.derived(r["g"]) or r.get("gk", "rdf-document") != "rdf-document"):
                    continue
                if "h" in r:
                    hashes.add(r["h"])  # a record graph: nothing derives further
                    seen.add(r["s"])
                elif r["s"] not in seen:
                    found.add(r["s"])
        seen |= found
        level = sorted(found)
    return sorted(hashes)


#: Nodes per VALUES block when walking to the records (wider than CHUNK: one short pattern each).
_WALK_CHUNK = 2000


def explain(kb, iri: str, max_depth: int = 20, max_supports: int = 50) -> dict:
    """The derivation tree of `iri` (see the module docstring); the root also carries `records`,
    the content hashes of every supporting record. Raises UnknownName for an IRI the KB lacks."""
    if max_depth < 0 or max_supports < 1:
        raise QueryError("max_depth must be >= 0 and max_supports >= 1")
    iri = resolve_iri(iri)
    is_record = _check_known(kb, iri)
    fetch = _Fetcher(kb, max_supports)
    fetch.describe([iri])
    if is_record:  # the record graph itself: describe it as its own record
        fetch.nodes[iri]["record"] = fetch.records([iri])[iri]
    # Breadth first: each node is fetched once, at the shallowest depth it appears.
    level, depth = [iri], 0
    while level and depth < max_depth:
        fetch.list_supports(level)
        nxt = sorted({s for n in level for s in fetch.supports[n]} - fetch.nodes.keys())
        if nxt:
            fetch.describe(nxt)
        level, depth = nxt, depth + 1

    seen: set[str] = set()

    def build(node_iri: str, d: int) -> dict:
        if node_iri in seen:
            return {"iri": node_iri, "see_above": True}
        seen.add(node_iri)
        facts = fetch.nodes[node_iri]
        node = {k: facts[k] for k in _ORDER if k in facts}
        extra = facts.get("extra_records", [])
        listed = fetch.supports.get(node_iri) if d < max_depth else None
        node["supports"] = [build(s, d + 1) for s in listed or []]
        node["supports"] += [_record_leaf(r) for r in extra]
        if listed is None and node["supports_total"]:
            node["truncated"] = True  # deeper than max_depth
        return node

    tree = build(iri, 0)
    tree["records"] = supporting_records(kb, iri)
    return tree


_ORDER = ("iri", "types", "label", "evidence_class", "derived_by", "also_derived_by", "record", "supports_total")


def _record_leaf(record: dict) -> dict:
    return {"iri": record["graph"], "types": [LUMA + "SourceRecord"], "derived_by": None, "record": record,
            "supports_total": 0, "supports": []}


def records(tree: dict) -> list[str]:
    """Sorted content hashes of every supporting record: the root's uncapped `records` (from
    `explain`) together with every record shown anywhere in the tree."""
    found = set(tree.get("records", []))
    stack = [tree]
    while stack:
        node = stack.pop()
        rec = node.get("record")
        if rec and rec.get("content_hash"):
            found.add(rec["content_hash"])
        stack.extend(node.get("supports", []))
    return sorted(found)
