"""Checking one record graph against `ontology/shapes.ttl` at ingest speed.

pySHACL takes ~6 ms per record graph (DESIGN.md §9): ten minutes for a 100k-record batch. The
shapes only use a small subset of SHACL Core, so this module compiles them once into constraint
lists (`NodeCheck` / `PropertyCheck`) and checks a record's triples -- in the
`QuadWriter.triples` form the projection already holds -- without building any RDF graph.

Two evaluators share those lists. `PropertyCheck.explain` is the plain reference: one value and
one test at a time, and it words the error. For speed, the property checks of all shapes aimed
at one target (a class, or the objects of a predicate) are also turned into one generated Python
function that runs the same tests inline: at ~60 triples and ~55 property checks per record, a
function call per test would cost more than the whole budget (~40 us per record). The tests
check that the two evaluators agree with each other and with pySHACL.

Semantics follow SHACL (and pySHACL, which the tests use as the oracle) for that subset:
value nodes are distinct terms, a plain literal is an xsd:string, sh:class looks for the type
in the record's own triples (no subclass reasoning: the shapes only name classes without
subclasses), and sh:datatype also requires a lexical form valid for the datatype. One
deliberate difference: literals are valid by the XSD lexical rules (like Oxigraph), whereas
rdflib also accepts Python spellings such as "inf", "nan" or " 1" for numbers.

Any SHACL feature outside the subset makes `ShapeChecker.load()` raise, so a shape can never be
silently left unchecked.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox

from luma.errors import ConfigError, RecordError
from luma.kb.ingest import nquads as nq
from luma.kb.ingest.shacl_terms import LEXICAL, NUMERIC, literal, string_of
from luma.kb.vocab import PREFIXES, RDF, RDFS, SH, XSD

#: subject IRI -> predicate IRI -> its object term, or a list of them when there are several
#: (a bare term for the common single value spares a list per triple: a tenth of the budget)
Index = dict[str, dict[str, "str | list[str]"]]

#: Namespace of the shapes in shapes.ttl (only used to name them in messages).
SHAPES = "https://w3id.org/luma/shapes#"
_TYPE = RDF + "type"
_XSD_STRING = XSD + "string"

#: Parameters a property shape may carry; anything else in the SH namespace is refused.
_PROPERTY_PARAMS = {
    SH + p
    for p in ("path", "minCount", "maxCount", "datatype", "class", "nodeKind", "in", "minInclusive", "pattern", "minLength")
}
_NODE_PARAMS = {SH + "targetClass", SH + "targetObjectsOf", SH + "property"}
#: Non-validating annotations allowed on any shape.
_ANNOTATIONS = {SH + "name", SH + "description", SH + "message", RDFS + "label", RDFS + "comment"}

_NODE_KINDS = {
    SH + "IRI": ("<",),
    SH + "Literal": ('"',),
    SH + "BlankNode": ("_:",),
    SH + "BlankNodeOrIRI": ("_:", "<"),
    SH + "BlankNodeOrLiteral": ("_:", '"'),
    SH + "IRIOrLiteral": ("<", '"'),
}

def qname(iri: str) -> str:
    """`luma:workload` for a known namespace, else `<iri>`."""
    for prefix, ns in PREFIXES.items():
        if iri.startswith(ns) and "/" not in iri[len(ns) :]:
            return f"{prefix}:{iri[len(ns):]}"
    for prefix, ns in (("sh", SH), ("lsh", SHAPES)):
        if iri.startswith(ns):
            return f"{prefix}:{iri[len(ns):]}"
    return f"<{iri}>"


def _show(term: str) -> str:
    return qname(term[1:-1]) if term[:1] == "<" else term


# --- value tests ---------------------------------------------------------------------------
# A test is (kind, argument, what its failure means). `_passes` evaluates one; `_test_code`
# writes the same logic as a condition of generated code.

_IN, _STRING, _TYPED, _CLASS, _KIND, _MIN, _PATTERN, _LENGTH = range(8)
_STRING_TYPED = f'"^^<{_XSD_STRING}>'
_EMPTY: dict = {}


def _at_least(bound: float, v: str) -> bool:
    lit = literal(v)
    value = LEXICAL[lit[1]](lit[0]) if lit is not None and lit[1] in NUMERIC else None
    return value is not None and value >= bound  # not a number: a violation, as in SPARQL


def _matches(regex: re.Pattern, v: str) -> bool:
    text = string_of(v)
    return text is not None and regex.search(text) is not None


def _passes(kind: int, arg, v: str, ix: Index) -> bool:
    if kind == _IN:
        return v in arg
    if kind == _STRING:
        return v[-1:] == '"' or v.endswith(_STRING_TYPED)
    if kind == _TYPED:
        suffix, valid = arg
        return v.endswith(suffix) and valid(v[1 : -len(suffix)]) is not None
    if kind == _CLASS:
        return v[:1] == "<" and arg in _values(ix.get(v[1:-1]), _TYPE)
    if kind == _KIND:
        return v.startswith(arg)
    if kind == _MIN:
        return _at_least(arg, v)
    if kind == _PATTERN:
        return _matches(arg, v)
    text = string_of(v)
    return text is not None and len(text) >= arg


def _test_code(kind: int, arg, name: str, env: dict, numeric: bool, string: bool) -> str:
    """The condition under which generated code rejects value `v` (the logic of `_passes`).

    `numeric`: `v` already passed a numeric sh:datatype test, which left its value in `x`.
    `string`: an xsd:string datatype test is to be folded into this pattern test.
    """
    env[name] = arg
    if kind == _IN:
        return f"v not in {name}"
    if kind == _STRING:  # only a plain literal ends in a quote
        return "v[-1:] != '\"' and not v.endswith(_STRING_TYPED)"
    if kind == _TYPED:  # only a literal ends in "^^<datatype>
        suffix, valid = arg
        env[name + "s"], env[name + "f"] = suffix, valid
        return f"not v.endswith({name}s) or (x := {name}f(v[1:{-len(suffix)}])) is None"
    if kind == _CLASS:  # the type is one term, or a list of them
        types = "(t := ix.get(v[1:-1], _EMPTY).get(_TYPE))"
        return f"v[:1] != '<' or ({types} != {name} and (t.__class__ is not list or {name} not in t))"
    if kind == _KIND:
        return f"not v.startswith({name})"
    if kind == _MIN and numeric:
        return f"not x >= {name}"  # NaN is not >= anything
    if kind == _PATTERN:  # a plain literal without escapes is its own lexical form
        slow = f"not _matches({name}, v)"
        if string:
            slow = f"not ((v[-1:] == '\"' or v.endswith(_STRING_TYPED)) and _matches({name}, v))"
        return f"""({name}.search(v[1:-1]) is None if v[-1:] == '"' and "\\\\" not in v else {slow})"""
    return f"not _passes({kind}, {name}, v, ix)"


# --- compiled shapes -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PropertyCheck:
    """One property shape: cardinality plus per-value tests."""

    path: str
    field: str
    min_count: int
    max_count: int | None
    tests: tuple[tuple[int, object, str], ...]
    message: str | None = None

    def explain(self, focus: str, props: dict | None, ix: Index) -> str | None:
        """None, or a sentence describing the first violation of this property shape at `focus`."""
        values = _values(props, self.path)
        n = len(values)
        if n < self.min_count:
            return self._say(focus, f"needs at least {self.min_count} value(s), has {n} (sh:minCount)")
        if self.max_count is not None and n > self.max_count:
            shown = ", ".join(_show(v) for v in values[:4])
            return self._say(focus, f"allows at most {self.max_count} value(s), has {n}: {shown} (sh:maxCount)")
        for v in values:
            for kind, arg, what in self.tests:
                if not _passes(kind, arg, v, ix):
                    return self._say(focus, f"value {_show(v)} {what}")
        return None

    def _say(self, focus: str, reason: str) -> str:
        head = f"{_show(focus)} {qname(self.path)}: {reason}"
        return f"{self.message} ({head})" if self.message else head


@dataclass(frozen=True, slots=True)
class NodeCheck:
    """One node shape: its targets and property checks."""

    shape: str
    target_classes: tuple[str, ...]
    target_objects_of: tuple[str, ...]
    properties: tuple[PropertyCheck, ...]


def _generate(props: Sequence[PropertyCheck], name: str) -> Callable[[dict, Index], int]:
    """A function `check(props, ix)` -> index of the first property check violated, or -1.

    Straight-line code with each test inlined; the generated source is kept on the function
    (`check.source`) for reading and debugging.
    """
    env: dict = {"_EMPTY": _EMPTY, "_TYPE": _TYPE, "_STRING_TYPED": _STRING_TYPED}
    env.update(_matches=_matches, _passes=_passes)
    lines = ["def check(props, ix):", "    get = props.get"]
    for i, prop in enumerate(props):
        env[f"p{i}"] = prop.path
        lines.append(f"    v = get(p{i})")
        tab = "    "
        if prop.min_count:
            lines.append(f"    if v is None: return {i}")
        else:
            lines.append("    if v is not None:")
            tab = "        "
        if prop.max_count == 1:  # the common case: no loop
            lines.append(f"{tab}if v.__class__ is list:")
            lines.append(f"{tab}    if len(set(v)) != 1: return {i}")
            lines.append(f"{tab}    v = v[0]")
        else:
            lines.append(f"{tab}vs = list(dict.fromkeys(v)) if v.__class__ is list else [v]  # distinct value nodes")
            bounds = [f"len(vs) < {prop.min_count}"] if prop.min_count > 1 else []
            bounds += [f"len(vs) > {prop.max_count}"] if prop.max_count is not None else []
            if bounds:
                lines.append(f"{tab}if {' or '.join(bounds)}: return {i}")
            if prop.tests:
                lines.append(f"{tab}for v in vs:")
                tab += "    "
        kinds = [kind for kind, _, _ in prop.tests]
        numeric = False
        for j, (kind, arg, _) in enumerate(prop.tests):
            if kind == _STRING and _PATTERN in kinds:
                continue  # the pattern test checks the datatype too
            code = _test_code(kind, arg, f"a{i}_{j}", env, numeric, string=_STRING in kinds)
            lines.append(f"{tab}if {code}: return {i}")
            numeric = numeric or (kind == _TYPED and arg[0][4:-1] in NUMERIC)
    lines.append("    return -1")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<shapes for {name}>", "exec"), env)  # code built here from parsed shapes only
    check = env["check"]
    check.source = source
    return check


class ShapeChecker:
    """Compiled shapes; `check()` validates one record's triples."""

    def __init__(self, shapes: Sequence[NodeCheck]):
        self.shapes = tuple(shapes)
        by_class: dict[str, list] = {}
        by_objects_of: dict[str, list] = {}
        for shape in self.shapes:
            rows = [(shape, prop) for prop in shape.properties]
            for cls in shape.target_classes:
                by_class.setdefault(nq.iri(cls), []).extend(rows)
            for p in shape.target_objects_of:
                by_objects_of.setdefault(p, []).extend(rows)
        # One generated function per target (class term `<iri>`, or predicate) covers every shape
        # aimed at it; its result indexes the (shape, property check) rows.
        self._by_class = {t: (_generate([p for _, p in rows], t), rows) for t, rows in by_class.items()}
        self._by_objects_of = {t: (_generate([p for _, p in rows], t), rows) for t, rows in by_objects_of.items()}

    @classmethod
    def load(cls, extra_files: Iterable[str | Path] = ()) -> "ShapeChecker":
        """Compile the packaged shapes.ttl plus `extra_files`; raise ConfigError on unsupported SHACL."""
        root = importlib.resources.files("luma.ontology")
        files = [("shapes.ttl", (root / "shapes.ttl").read_bytes())]
        files += [(str(p), Path(p).read_bytes()) for p in extra_files]
        shapes: list[NodeCheck] = []
        for name, data in files:
            shapes += _compile(name, data)
        return cls(shapes)

    def check(
        self, triples: Sequence[tuple[str, str, str]], source: str, known: dict[str, str] | None = None
    ) -> None:
        """Raise RecordError(source=source, field=<sh:name>) at the first shape violation.

        `known`: entities (IRI -> rdf:type term) described and checked with an earlier record
        of the batch; they are not checked again, but sh:class sees their type.
        """
        # Written out rather than built on _targets(): this loop is part of the time budget.
        objects_of = self._by_objects_of
        ix, found = _index(triples, objects_of)
        if known:
            for iri, t in known.items():
                ix.setdefault(iri, {_TYPE: t})
        else:
            known = _EMPTY
        by_class = self._by_class
        for s, props in ix.items():
            if s in known:
                continue
            types = props.get(_TYPE)
            if types is not None:
                for t in types if types.__class__ is list else (types,):
                    target = by_class.get(t)
                    if target is not None:
                        failed = target[0](props, ix)
                        if failed >= 0:
                            self._fail(target[1][failed], f"<{s}>", props, ix, source)
        for p, o in found:
            if o[1:-1] in known:
                continue
            target = objects_of[p]
            props = ix.get(o[1:-1], _EMPTY) if o[:1] == "<" else _EMPTY
            failed = target[0](props, ix)
            if failed >= 0:
                self._fail(target[1][failed], o, props, ix, source)

    @staticmethod
    def _fail(row: tuple[NodeCheck, PropertyCheck], focus: str, props: dict, ix: Index, source: str) -> None:
        shape, prop = row
        problem = prop.explain(focus, props, ix) or f"{_show(focus)} {qname(prop.path)}: violation"
        raise RecordError(f"shape {qname(shape.shape)}: {problem}", source=source, field=prop.field)

    def violations(self, triples: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
        """Every (field, message), by the reference evaluator: slower, for reports and tests."""
        ix, _ = _index(triples, ())
        out = []
        for shape, focus, props in self._targets(ix):
            for prop in shape.properties:
                problem = prop.explain(focus, props, ix)
                if problem is not None:
                    out.append((prop.field, f"shape {qname(shape.shape)}: {problem}"))
        return out

    def _targets(self, ix: Index):
        """(shape, focus node term, its properties) for every target of every shape."""
        for shape in self.shapes:
            for s, props in ix.items():
                if any(nq.iri(c) in _values(props, _TYPE) for c in shape.target_classes):
                    yield shape, f"<{s}>", props
            objects = {o: None for p in shape.target_objects_of for props in ix.values() for o in _values(props, p)}
            for o in objects:
                yield shape, o, ix.get(o[1:-1], _EMPTY) if o[:1] == "<" else _EMPTY


def _index(triples: Sequence[tuple[str, str, str]], watched) -> tuple[Index, list[tuple[str, str]]]:
    """The subject index, and the (predicate, object) pairs of the `watched` predicates."""
    ix: Index = {}
    found = []
    last = props = None
    for s, p, o in triples:
        if p in watched:
            found.append((p, o))
        if s is not last:  # the projection writes a subject's triples together
            props = ix.get(s)
            if props is None:
                props = ix[s] = {}
            last = s
        had = props.setdefault(p, o)
        if had is not o:  # a second value (the very same object again is a duplicate triple)
            if had.__class__ is list:
                had.append(o)
            else:
                props[p] = [had, o]
    return ix, found


def _values(props: dict | None, p: str) -> list[str]:
    """The distinct values of `p` in an index entry."""
    v = props.get(p) if props else None
    if v is None:
        return []
    return list(dict.fromkeys(v)) if v.__class__ is list else [v]


@lru_cache(maxsize=1)
def default_checker() -> ShapeChecker:
    """The checker of the packaged shapes (compiled once per process)."""
    return ShapeChecker.load()


# --- compiling the Turtle -------------------------------------------------------------------


def _compile(name: str, data: bytes) -> list[NodeCheck]:
    try:
        triples = list(ox.parse(data, ox.RdfFormat.TURTLE))
    except SyntaxError as exc:
        raise ConfigError(f"shapes do not parse: {exc}", source=name) from None
    graph: dict[ox.NamedNode | ox.BlankNode, list[tuple[str, object]]] = {}
    for t in triples:
        graph.setdefault(t.subject, []).append((t.predicate.value, t.object))

    def fail(node, message: str):
        raise ConfigError(f"{_node_name(node)}: {message} (unsupported by kb/ingest/shacl.py)", source=name)

    node_shapes = [
        s for s, po in graph.items()
        if any(p in _NODE_PARAMS or (p == _TYPE and o == ox.NamedNode(SH + "NodeShape")) for p, o in po)
    ]
    property_nodes = {o for s in node_shapes for p, o in graph[s] if p == SH + "property"}
    list_nodes = {s for s, po in graph.items() if any(p in (RDF + "first", RDF + "rest") for p, _ in po)}
    for s, po in graph.items():
        if s not in node_shapes and s not in property_nodes and s not in list_nodes:
            for p, o in po:
                if p.startswith(SH) or (p == _TYPE and isinstance(o, ox.NamedNode) and o.value.startswith(SH)):
                    fail(s, f"{qname(p)} {o} outside a node shape with a target")

    out = []
    for s in node_shapes:
        params: dict[str, list] = {}
        for p, o in graph[s]:
            if p == _TYPE:
                if o != ox.NamedNode(SH + "NodeShape"):
                    fail(s, f"rdf:type {o} (implicit class targets)")
            elif p in _NODE_PARAMS:
                params.setdefault(p, []).append(o)
            elif p not in _ANNOTATIONS:
                fail(s, f"{qname(p)} on a node shape")
        classes = tuple(_iri(s, o, fail) for o in params.get(SH + "targetClass", []))
        objects_of = tuple(_iri(s, o, fail) for o in params.get(SH + "targetObjectsOf", []))
        if not classes and not objects_of:
            fail(s, "a node shape without sh:targetClass or sh:targetObjectsOf")
        props = [_property(graph, node, fail) for node in params.get(SH + "property", [])]
        props.sort(key=lambda c: (c.path, c.field))
        out.append(NodeCheck(_node_name(s), classes, objects_of, tuple(props)))
    out.sort(key=lambda c: c.shape)
    return out


def _node_name(node) -> str:
    return node.value if isinstance(node, ox.NamedNode) else f"_:{node.value}"


def _iri(shape, term, fail) -> str:
    if not isinstance(term, ox.NamedNode):
        fail(shape, f"expected an IRI, got {term}")
    return term.value


def _property(graph, node, fail) -> PropertyCheck:
    params: dict[str, list] = {}
    for p, o in graph.get(node, []):
        if p == _TYPE and o == ox.NamedNode(SH + "PropertyShape"):
            continue
        if p not in _PROPERTY_PARAMS and p not in _ANNOTATIONS:
            fail(node, f"{qname(p)} on a property shape")
        params.setdefault(p, []).append(o)
    for p, values in params.items():
        if len(values) > 1:
            fail(node, f"{qname(p)} given {len(values)} times")
    one = {p: v[0] for p, v in params.items()}
    if SH + "path" not in one or not isinstance(one[SH + "path"], ox.NamedNode):
        fail(node, "sh:path must be one plain IRI")
    path = one[SH + "path"].value
    field = one[SH + "name"].value if SH + "name" in one else path.rsplit("#", 1)[-1].rsplit("/", 1)[-1]

    def number(p: str, kind=int):
        lit = one[p]
        if not isinstance(lit, ox.Literal) or lit.datatype.value not in (XSD + "integer", XSD + "decimal", XSD + "double"):
            fail(node, f"{qname(p)} must be a number")
        try:
            return kind(lit.value)
        except ValueError:
            fail(node, f"{qname(p)} must be an integer")

    tests: list[tuple[int, object, str]] = []
    if SH + "nodeKind" in one:
        kind = one[SH + "nodeKind"]
        if not isinstance(kind, ox.NamedNode) or kind.value not in _NODE_KINDS:
            fail(node, f"sh:nodeKind {kind}")
        tests.append((_KIND, _NODE_KINDS[kind.value], f"is not of node kind {qname(kind.value)} (sh:nodeKind)"))
    if SH + "datatype" in one:
        dt = _iri(node, one[SH + "datatype"], fail)
        what = f"is not a valid literal of datatype {qname(dt)} (sh:datatype)"
        if dt == _XSD_STRING:
            tests.append((_STRING, None, what))
        elif dt in LEXICAL:
            tests.append((_TYPED, (f'"^^<{dt}>', LEXICAL[dt]), what))
        else:
            fail(node, f"sh:datatype {qname(dt)}")
    if SH + "class" in one:
        cls = _iri(node, one[SH + "class"], fail)
        tests.append((_CLASS, nq.iri(cls), f"is not typed {qname(cls)} in this record (sh:class)"))
    if SH + "in" in one:
        members = [_in_member(node, m, fail) for m in _rdf_list(graph, one[SH + "in"], node, fail)]
        shown = ", ".join(_show(m) for m in members)
        tests.append((_IN, frozenset(members), f"is not one of {shown} (sh:in)"))
    if SH + "minInclusive" in one:
        bound = number(SH + "minInclusive", float)
        what = f"is not a number >= {one[SH + 'minInclusive'].value} (sh:minInclusive)"
        tests.append((_MIN, bound, what))
    if SH + "pattern" in one:
        pattern = one[SH + "pattern"]
        if not isinstance(pattern, ox.Literal):
            fail(node, "sh:pattern must be a literal")
        tests.append((_PATTERN, re.compile(pattern.value), f"does not match /{pattern.value}/ (sh:pattern)"))
    if SH + "minLength" in one:
        length = number(SH + "minLength")
        tests.append((_LENGTH, length, f"is shorter than {length} characters (sh:minLength)"))
    return PropertyCheck(
        path=path,
        field=field,
        min_count=number(SH + "minCount") if SH + "minCount" in one else 0,
        max_count=number(SH + "maxCount") if SH + "maxCount" in one else None,
        tests=tuple(tests),
        message=one[SH + "message"].value if SH + "message" in one else None,
    )


def _rdf_list(graph, head, shape, fail) -> list:
    items, node = [], head
    while node != ox.NamedNode(RDF + "nil"):
        po = dict(graph.get(node, []))
        if RDF + "first" not in po or RDF + "rest" not in po or len(items) > 10_000:
            fail(shape, "sh:in is not a well-formed RDF list")
        items.append(po[RDF + "first"])
        node = po[RDF + "rest"]
    return items


def _in_member(shape, term, fail) -> str:
    """The N-Quads form of an sh:in member (IRIs and plain strings only, compared as written)."""
    if isinstance(term, ox.NamedNode):
        return nq.iri(term.value)
    if isinstance(term, ox.Literal) and term.datatype.value == _XSD_STRING:
        return nq.string(term.value)
    fail(shape, f"sh:in member {term}: only IRIs and plain strings")
