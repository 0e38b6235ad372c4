"""Partitioned rules: recompute only the keys a run's upstream changes touch.

A rule that states `# partition: ?key` (rules/loader.py `Partition`) promises that its answer
falls apart by `?key`: every node it derives belongs to one value, and what it derives for a
value rests only on upstream facts whose subject its `# partition_keys:` pattern maps to that
value. When every upstream rule that changed says exactly which quads it added and removed (a
delta run over new record graphs, or another partitioned run), the engine then:

1. takes the subjects of those quads and looks their keys up with the pattern, in the upstream
   derived graphs as they are now (for what was added or kept) and in the removed quads (for
   what went away), so a subject whose key changed counts under both;
2. reads what the rule's graph holds for those keys (each derived node carries its key as
   `luma:partitionKey`, written with it);
3. runs the rule with `VALUES ?key { those keys }` where its body says `${partition}`, and
   writes the difference.

The rule reads only derived graphs it names by IRI (rules/analysis.py refuses a graph variable
or the default graph), and the engine gives the store those graphs alone in every mode, so a
full run and a partitioned one read the same facts; the tests check that they derive the same
graph. Past a size (too many changed quads or keys) the full run is
cheaper and is used instead.
"""

from __future__ import annotations

import re

import pyoxigraph as ox

from luma.kb.vocab import ID, LUMA
from luma.rules.loader import Rule

#: The predicate linking each node a partitioned rule derives to its key.
PARTITION_KEY = LUMA + "partitionKey"
#: Changed upstream quads past which a downstream partitioned rule runs in full instead.
MAX_CHANGES = 200_000
#: Changed subjects (and touched keys) past which looking them up costs more than a full run.
MAX_SUBJECTS = 20_000
MAX_KEYS = 5_000

_ACTIVITY = f"<{ID}derivation/".encode()
_PREFIX = re.compile(r"^\s*PREFIX\s+[A-Za-z0-9_.-]*:\s*<[^>\s]*>\s*$", re.IGNORECASE | re.MULTILINE)
# A term as Oxigraph's TSV writes it, and nothing else: an IRI, or a literal with its escapes, a
# language tag or a datatype IRI. A key goes into a query's VALUES, so anything else (a blank
# node, a stray quote) makes the run a full one rather than being spliced into SPARQL.
_IRI = r"<[^<>\"{}|^`\\\x00-\x20]*>"
_TERM = re.compile(rf'{_IRI}|"(?:[^"\\\n\r]|\\.)*"(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*|\^\^{_IRI})?')


def key_links(rule: Rule, sparql: str, construct_end: int) -> str:
    """The CONSTRUCT with `?derived luma:partitionKey ?key` added to its template (after position
    `construct_end`, the template's opening brace) for each variable the rule derives."""
    assert rule.partition is not None and rule.derives
    links = " ".join(f"{var} <{PARTITION_KEY}> ?{rule.partition.var} ." for var in rule.derives.split())
    return f"{sparql[:construct_end]} {links} {sparql[construct_end:]}"


def changed_subjects(changes: set[bytes]) -> set[bytes] | None:
    """The subjects of changed N-Quads lines, the derivations' own left out; None when one is a
    blank node (it cannot be named in a query) or there are too many to look up."""
    out = set()
    for line in changes:
        s = line.split(b" ", 1)[0]
        if not s.startswith(b"<"):
            return None
        if not s.startswith(_ACTIVITY):
            out.add(s)
    return out if len(out) <= MAX_SUBJECTS else None


def lookup_query(rule: Rule, subjects: set[bytes]) -> str:
    """SPARQL selecting the keys the rule's `partition_keys` pattern gives `subjects`."""
    assert rule.partition is not None
    prefixes = "\n".join(m.group(0).strip() for m in _PREFIX.finditer(rule.body))
    values = " ".join(s.decode() for s in sorted(subjects))
    return (f"{prefixes}\nSELECT DISTINCT ?{rule.partition.var} WHERE {{ VALUES ?changed {{ {values} }} "
            f"{rule.partition.keys} }}")


def parse_keys(tsv: bytes) -> list[str] | None:
    """The terms of a one-column TSV answer, each checked to be a plain IRI or literal; None
    when one is not (the run is then a full one)."""
    out = []
    for line in tsv.decode().splitlines()[1:]:
        term = line.strip()
        if not term:
            continue
        if not _TERM.fullmatch(term):
            return None
        out.append(term)
    return out


def keys_in(rule: Rule, subjects: set[bytes], lines: set[bytes]) -> list[str] | None:
    """The keys the pattern gives `subjects` in the changed quads `lines` alone, evaluated in
    memory: how the removed ones, no longer in the store, are looked up."""
    if not lines:
        return []
    store = ox.Store()
    triples = b"\n".join(line[:line.rindex(b" <")] + b" ." for line in lines) + b"\n"
    store.load(triples, format=ox.RdfFormat.N_TRIPLES)
    answer = store.query(lookup_query(rule, subjects))
    return parse_keys(answer.serialize(format=ox.QueryResultsFormat.TSV))


def old_facts_query(graph: str, keys: list[str]) -> str:
    """SPARQL (CONSTRUCT) for every statement of the nodes the rule's graph files under `keys`."""
    return (f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ VALUES ?k {{ {' '.join(keys)} }} "
            f"GRAPH <{graph}> {{ ?s <{PARTITION_KEY}> ?k . ?s ?p ?o }} }}")
