"""Why a named query (kb/queries/*.rq) answered no rows, from the KB's own counts: the results of
the rules it reads and of the rules those rest on, where that derivation stops (with the
parameters it ran with), and the records a record-reading rule or query had to work with, by
evidence class. One sentence for `luma kb query --name` to print beside an empty answer."""

from __future__ import annotations

import re

from luma.kb.records.kinds import KINDS
from luma.kb.vocab import EVIDENCE, LUMA
from luma.rules.analysis import Analysed, supports
from luma.rules.derivations import derivation
from luma.rules.results import Results
from luma.rules.state import DERIVED

_KIND = re.compile(r'recordKind\s+"([a-z][a-z0-9-]*)"')
_CLASS_NAMES = {c.iri: c.name for c in EVIDENCE}
#: Kinds that count as evidence (not statements about other records, such as a runner revocation).
_EVIDENCE = {k.name for k in KINDS if k.evidence}


def why_empty(store, named, analysed: list[Analysed]) -> str:
    """A sentence on why `named` (kb/query/named.py NamedQuery) found no rows in `store`."""
    if not named.derived_by:
        kinds = record_kinds(named.template)
        if not kinds:
            return "the KB holds nothing this query reads"
        counts = record_counts(store, kinds)
        text = "; ".join(_records(kind, counts.get(kind, {})) for kind in kinds)
        return text + (", none with what this query reads" if any(counts.values()) else "")
    by_id = {a.rule.id: a for a in analysed}
    primary = by_id.get(named.derived_by[0])
    if primary is None:
        return f"rule {named.derived_by[0]} is not in this rule set"
    chain = _resting_on(primary, analysed)
    results = result_counts(store, chain)
    parts = [f"rule {primary.rule.id} derived {results[primary.rule.id]} {_local(primary.result_class)}"]
    if results[primary.rule.id]:
        return parts[0] + ", none of which the query's other conditions keep"
    # Where the derivation stops: rules with no results although everything they rest on has some.
    # The first of them in run order is told; the others are named.
    stops = [a for a in chain if not results[a.rule.id] and all(results[b.rule.id] for b in supports(a, chain))]
    if not stops:
        return parts[0]
    first, below = stops[0], supports(stops[0], chain)
    if first is not primary:
        parts.append(f"; it rests on {first.rule.id}, which derived 0 {_local(first.result_class)}")
    if first.rule.reads == "records" or not below:
        parts.append(" " + _from_records(store, first))
    else:
        parts.append(" from " + ", ".join(f"{results[b.rule.id]} {_local(b.result_class)}" for b in below)
                     + _parameters(store, first))
    if first is not primary and primary.rule.reads != "records" and record_kinds(primary.rule.body):
        # A rule that reads records besides what other rules derived (model-agreement: predictions).
        counts = record_counts(store, record_kinds(primary.rule.body))
        parts.append(f"; {primary.rule.id} also reads " + "; ".join(
            _records(kind, counts.get(kind, {})) for kind in record_kinds(primary.rule.body)))
    others = [a.rule.id for a in stops[1:] if a is not primary]
    if others:
        parts.append(f" (also empty upstream: {', '.join(others)})")
    return "".join(parts)


def _resting_on(primary: Analysed, analysed: list[Analysed]) -> list[Analysed]:
    """`primary` and the rules its results rest on, transitively, in the rule set's order."""
    seen, todo = {primary.rule.id}, [primary]
    while todo:
        for w in supports(todo.pop(), analysed):
            if w.rule.id not in seen:
                seen.add(w.rule.id)
                todo.append(w)
    return [a for a in analysed if a.rule.id in seen]


def _from_records(store, a: Analysed) -> str:
    kinds = record_kinds(a.rule.body)
    counts = record_counts(store, kinds)
    text = "from " + "; ".join(_records(kind, counts.get(kind, {})) for kind in kinds)
    if f"<{LUMA}Measured>" in a.rule.body or "luma:Measured" in a.rule.body:
        # Read from the rule's text: it takes measured records only.
        measured = sum(c.get("measured", 0) for c in counts.values())
        text += f": only measured evidence counts (vendor claims, simulations and projections never do), " \
                f"and {measured} {'is' if measured == 1 else 'are'} measured"
    return text + _parameters(store, a)


def _parameters(store, a: Analysed) -> str:
    run = derivation(store, a.rule.id)
    if run is None or not run.parameters:
        return ""
    return " (run with " + ", ".join(f"{k}={v}" for k, v in sorted(run.parameters.items())) + ")"


def _records(kind: str, by_class: dict[str, int]) -> str:
    total = sum(by_class.values())
    if not total:
        return f"0 {kind} records in this KB"
    classes = ", ".join(f"{n} {c}" for c, n in sorted(by_class.items()))
    return f"{total} {kind} record(s) ({classes})"


def record_kinds(text: str) -> list[str]:
    """The evidence record kinds a query or rule reads (`luma:recordKind "pex-chain"`), in order."""
    return list(dict.fromkeys(k for k in _KIND.findall(text) if k in _EVIDENCE))


def record_counts(store, kinds: list[str]) -> dict[str, dict[str, int]]:
    """{kind: {evidence class: records}} in the store, for `kinds`."""
    if not kinds:
        return {}
    values = " ".join(f'"{k}"' for k in kinds)
    rows = store.select(
        f"SELECT ?kind ?ec (COUNT(?g) AS ?n) WHERE {{ {{ SELECT ?g ?kind WHERE {{ VALUES ?kind {{ {values} }} "
        f"GRAPH ?g {{ ?g <{LUMA}recordKind> ?kind }} }} }} {{ SELECT ?g ?ec WHERE {{ GRAPH ?g {{ ?g "
        f"<{LUMA}evidenceClass> ?ec }} }} }} }} GROUP BY ?kind ?ec", union=False)
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["kind"], {})[_CLASS_NAMES.get(row["ec"], _local(row["ec"]))] = int(row["n"])
    return out


def result_counts(store, rules: list[Analysed]) -> dict[str, int]:
    """{rule id: the results its derived graph holds} (rules/results.py counts the same in a run)."""
    out = {}
    for a in rules:
        rows = store.select(Results(DERIVED + a.rule.id, a.result_class).count_query(), union=False)
        out[a.rule.id] = int(rows[0]["n"]) if rows else 0
    return out


def _local(iri: str | None) -> str:
    return (iri or "result").rsplit("#", 1)[-1].rsplit("/", 1)[-1]
