"""Rule files: a header of `# key: value` lines, then a SPARQL CONSTRUCT.

    # id: recurring-binding
    # version: 1
    # description: A resource binding in qualified chains across enough workloads and architectures.
    # derives: ?rb
    # param: min_workloads = 3 : integer : distinct workloads a recurrence needs
    # reads: records          (optional: the rule reads only source-record graphs; see Rule.reads)
    PREFIX luma: <https://w3id.org/luma/ns#>
    CONSTRUCT { ?rb a luma:RecurringBinding ; prov:wasDerivedFrom ?chain } WHERE { ... ${min_workloads} ... }

`derives` names the variable (or variables) bound to each derived node: the engine attaches the
derivation (rule, version, parameters) to it. A parameter is used as `${name}` and substituted as a typed
literal before the query is parsed. Every problem is a `RuleError` naming the file and line.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import BadParam, BelowFloor, RuleError
from luma.kb.vocab import LUMA

_HEADER = re.compile(r"^#\s*([a-z_]+)\s*:\s*(.*?)\s*$")
_PARAM = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\S+)\s*:\s*(integer|decimal|string|boolean)\s*:\s*(.+)$")
_USE = re.compile(r"\$\{([^}]*)\}")
_ID = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
_KEYS = {"id", "version", "description", "derives", "param", "floor", "after", "reads", "context", "partition",
         "partition_keys"}
#: The placeholder a partitioned rule's body marks its key restriction with (`${partition}`).
PARTITION = "partition"
_VAR = re.compile(r"\?[A-Za-z_][A-Za-z0-9_]*")
_FLOOR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*>=\s*(\S+)\s*:\s*(.+)$")


@dataclass(frozen=True)
class Param:
    name: str
    default: object
    kind: str
    doc: str


@dataclass(frozen=True)
class Partition:
    """A rule whose answer falls apart by one variable (`# partition: ?key`): each derived node
    belongs to one value of it, and what is derived for a value rests only on upstream facts whose
    subject `keys` (`# partition_keys:`, a pattern over `?changed` and the variable, read in the
    upstream rules' derived graphs) maps to that value. The body says where the restriction goes
    with `${partition}`: nothing in a full run, `VALUES ?key { ... }` when the engine recomputes only
    the values that changed (rules/partition.py)."""

    var: str  # without the "?"
    keys: str  # the lookup pattern, SPARQL, the rule's prefixes apply


@dataclass
class Rule:
    """One rule as loaded (the SPARQL still holds `${param}` placeholders)."""

    id: str
    version: int
    description: str
    body: str
    path: str
    body_line: int
    derives: str | None = None
    params: dict[str, Param] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    #: {parameter: (lowest value an official run accepts, why)} from `# floor: name >= value : why`.
    floors: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: "records": every pattern is scoped to source-record graphs (GRAPH ?g joined with
    #: `?g luma:recordKind`), so the rule reads asserted facts only and depends on no other rule.
    reads: str = "all"
    #: Predicates (full IRIs) a `reads: records` rule may read outside the record graph, negated
    #: only (`# context: luma:revokedAt`): facts about every record, such as a revoked runner key.
    #: A change in them makes the engine run the rule over all records again (rules/state.py).
    context: tuple[str, ...] = ()
    #: `# partition: ?key`: the variable the rule's answer is partitioned by (see `Partition`).
    partition: "Partition | None" = None

    def digest(self) -> str:
        return hashlib.sha256(self.body.encode()).hexdigest()[:12]


def _convert(kind: str, text: str, where: str, error: type[RuleError] = RuleError):
    try:
        if kind == "integer":
            return int(text)
        if kind == "decimal":
            return float(text)
        if kind == "boolean":
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        return text
    except ValueError:
        article = "an" if kind[0] in "aeiou" else "a"
        raise error(f"{text!r} is not {article} {kind}", field=where) from None


def literal(value, kind: str) -> str:
    """A parameter value as a SPARQL literal of its type."""
    if kind == "integer":
        return str(int(value))
    if kind == "decimal":
        return repr(float(value))
    if kind == "boolean":
        return "true" if value else "false"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse(text: str, path: str) -> Rule:
    """A rule from its file text; the header is checked here, the SPARQL by `analysis`."""
    head: dict[str, str] = {}
    params: dict[str, Param] = {}
    floors: dict[str, tuple[float, str]] = {}
    after: list[str] = []
    lines = text.splitlines()
    body_start = len(lines) + 1
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            body_start = n
            break
        m = _HEADER.match(stripped)
        if not m:
            continue  # a plain comment
        key, value = m.groups()
        where = f"line {n}"
        if key not in _KEYS:
            raise RuleError(f"unknown header key {key!r} (known: {', '.join(sorted(_KEYS))})", source=path, field=where)
        if key == "param":
            pm = _PARAM.match(value)
            if not pm:
                raise RuleError("a parameter reads `name = default : integer|decimal|string|boolean : description`",
                                source=path, field=where)
            name, default, kind, doc = pm.groups()
            if name in params:
                raise RuleError(f"parameter {name!r} declared twice", source=path, field=where)
            try:
                params[name] = Param(name, _convert(kind, default, where), kind, doc)
            except RuleError as exc:
                raise RuleError(exc.message, source=path, field=where) from None
        elif key == "floor":
            fm = _FLOOR.match(value)
            if not fm:
                raise RuleError("a floor reads `name >= value : why`", source=path, field=where)
            name, low, why = fm.groups()
            try:
                floors[name] = (float(low), why)
            except ValueError:
                raise RuleError(f"floor {low!r} is not a number", source=path, field=where) from None
        elif key == "after":
            after += value.split()
        elif key in head:
            raise RuleError(f"header key {key!r} given twice", source=path, field=where)
        else:
            head[key] = value
    for key in ("id", "version", "description"):
        if key not in head:
            raise RuleError(f"the header has no `# {key}:` line", source=path, field="line 1")
    if not _ID.match(head["id"]):
        raise RuleError(f"rule id {head['id']!r} must be lower-case letters, digits and dashes", source=path,
                        field="id")
    try:
        version = int(head["version"])
    except ValueError:
        raise RuleError(f"version {head['version']!r} is not a whole number", source=path, field="version") from None
    derives = head.get("derives")
    if derives is not None and not re.fullmatch(r"\?[A-Za-z_][A-Za-z0-9_]*(\s+\?[A-Za-z_][A-Za-z0-9_]*)*", derives):
        raise RuleError(f"derives {derives!r} must name variables, like ?rb (or ?q ?group)", source=path,
                        field="derives")
    body = "\n".join(lines[body_start - 1:]) if body_start <= len(lines) else ""
    if not body.strip():
        raise RuleError("the rule has no SPARQL body", source=path, field=f"line {body_start}")
    partition = _partition(head, body, body_start, derives, path)
    if partition is not None and PARTITION in params:
        raise RuleError("a partitioned rule cannot have a parameter named `partition`: ${partition} is the "
                        "engine's", source=path, field="param")
    for m in _USE.finditer(body):
        if m.group(1) == PARTITION and partition is not None:
            continue
        if m.group(1) not in params:
            line = body_start + body[: m.start()].count("\n")
            raise RuleError(f"unknown parameter ${{{m.group(1)}}} (declared: {', '.join(sorted(params)) or 'none'})",
                            source=path, field=f"line {line}")
    reads = head.get("reads", "all")
    if reads not in ("all", "records"):
        raise RuleError(f"reads {reads!r} must be `all` or `records`", source=path, field="reads")
    for name, (low, _why) in floors.items():
        if name not in params or params[name].kind not in ("integer", "decimal"):
            raise RuleError(f"floor for {name!r}, which is not a numeric parameter of this rule", source=path,
                            field="floor")
        if params[name].default < low:
            raise RuleError(f"the default {name} = {params[name].default} is below its own floor {low:g}",
                            source=path, field="floor")
    context = tuple(_expand(term, path) for term in head.get("context", "").split())
    return Rule(head["id"], version, head["description"], body, path, body_start, derives, params, tuple(after),
                floors=floors, reads=reads, context=context, partition=partition)


def _partition(head: dict, body: str, body_start: int, derives: str | None, path: str) -> Partition | None:
    """The `# partition:` and `# partition_keys:` lines, checked together."""
    var, keys = head.get("partition"), head.get("partition_keys")
    if var is None and keys is None:
        return None
    if var is None or keys is None:
        raise RuleError("a partitioned rule states both `# partition: ?var` and `# partition_keys: <pattern>`",
                        source=path, field="partition")
    if not _VAR.fullmatch(var):
        raise RuleError(f"partition {var!r} must name one variable, like ?key", source=path, field="partition")
    if not derives:
        raise RuleError("a partitioned rule names the nodes it derives (`# derives:`): the engine files each under "
                        "its key", source=path, field="partition")
    if head.get("reads") == "records":
        raise RuleError("a partitioned rule reads what other rules derived, not record graphs (`reads: records` "
                        "rules already run over the new graphs alone)", source=path, field="partition")
    mentioned = set(_VAR.findall(keys))
    if mentioned != {"?changed", var}:
        raise RuleError(f"partition_keys must relate ?changed to {var} and use no other variable "
                        f"(it uses {', '.join(sorted(mentioned)) or 'none'})", source=path, field="partition_keys")
    if "${" + PARTITION + "}" not in body:
        raise RuleError("a partitioned rule marks where its key is restricted with ${partition} in its body",
                        source=path, field="partition")
    if not re.search(re.escape(var) + r"\b", body):
        raise RuleError(f"the partition variable {var} does not occur in the body", source=path, field="partition")
    return Partition(var[1:], keys)


def _expand(term: str, path: str) -> str:
    """A `# context:` predicate: `luma:name` or `<iri>`."""
    if term.startswith("<") and term.endswith(">"):
        return term[1:-1]
    if term.startswith("luma:"):
        return LUMA + term[len("luma:"):]
    raise RuleError(f"context {term!r} must be luma:name or <iri>", source=path, field="context")


def render(rule: Rule, values: dict[str, object] | None = None, keys: list[str] | None = None) -> str:
    """The rule's SPARQL with its parameters substituted (defaults unless `values` says otherwise);
    for a partitioned rule, `${partition}` becomes nothing (the whole answer) or, given `keys`
    (terms in SPARQL syntax, checked by the caller), `VALUES ?var { keys }`."""
    values = values or {}

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name == PARTITION and rule.partition is not None:
            return "" if keys is None else f"VALUES ?{rule.partition.var} {{ {' '.join(keys)} }}"
        return literal(values.get(name, rule.params[name].default), rule.params[name].kind)

    return _USE.sub(sub, rule.body)


def resolve_params(rules: list[Rule], overrides: dict[str, str], *,
                   exploratory: bool = False) -> dict[str, dict[str, object]]:
    """{rule id: {param: value}} with `name=value` overrides applied to every rule declaring `name`
    (or `rule-id.name` for one rule). An override no rule declares is an error; one below its
    rule's floor is `BelowFloor` unless the run is `exploratory`."""
    out = {r.id: {p.name: p.default for p in r.params.values()} for r in rules}
    for key, text in overrides.items():
        rule_id, _, name = key.rpartition(".")
        hits = [r for r in rules if name in r.params and (not rule_id or r.id == rule_id)]
        if not hits:
            known = sorted({p for r in rules for p in r.params})
            raise BadParam(f"no rule has a parameter {key!r} (known: {', '.join(known)}; `luma rules list` shows them)",
                           field="param")
        for r in hits:
            out[r.id][name] = value = _convert(r.params[name].kind, text, key, BadParam)
            if name in r.floors and value < r.floors[name][0] and not exploratory:
                low, why = r.floors[name]
                raise BelowFloor(f"{r.id}: {name} = {text} is below its floor {low:g} ({why}); only an "
                                 "exploratory run looks below it, outside the official results", field="param")
    return out


def packaged_files() -> list[tuple[str, str]]:
    """(file name, text) of the rule files shipped in `rules/`, in name order."""
    root = importlib.resources.files("luma.rules")
    return sorted((p.name, p.read_text(encoding="utf-8")) for p in root.iterdir() if p.name.endswith(".rq"))


def load_all(extra_dir: Path | None = None) -> list[Rule]:
    """The shipped rules, then the project's `$LUMA_HOME/rules/*.rq`; ids must be unique."""
    files = packaged_files()
    if extra_dir is not None and extra_dir.is_dir():
        files += sorted((str(p), p.read_text(encoding="utf-8")) for p in extra_dir.glob("*.rq"))
    rules, seen = [], {}
    for name, text in files:
        rule = parse(text, name)
        if rule.id in seen:
            raise RuleError(f"rule id {rule.id!r} is also used by {seen[rule.id]}", source=name, field="id")
        seen[rule.id] = name
        rules.append(rule)
    return rules
