"""What the last rule run saw and derived, so the next run does only the work that changed.

Kept in two places that must agree:

* the project's cache folder (`$LUMA_HOME/cache/rules/`): the asserted (non-derived) named graphs
  the last run saw, and each rule's derived quads — the "before" of the next run's difference,
  so derived graphs are never read back from the store (24 s at 100k chains);
* a token in the store's bookkeeping (default) graph, written last. A cache whose token is not
  the store's (another project wrote the rules, the KB was rebuilt or restored, a run was killed
  half-way) is ignored, and the run starts from what the store holds.

The asserted-graph list is how a run notices change: source records are content-addressed and
never edited in place, so a new record is a new graph and a removed one a missing graph. A raw
update that edits an existing graph in place is not seen; `luma rules run --full` recomputes
everything.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from luma.kb.vocab import ID, LUMA
from luma.rules.quad_buckets import Buckets, bucket_count, replace_dir

DERIVED = ID + "graph/derived/"
_RULES = ID + "rules"
_KB = ID + "kb"  # the KB's own bookkeeping node (kb/knowledge_base.py)
_FORMAT = 2  # 2: each rule's quads in buckets of subjects (rules/quad_buckets.py)


@dataclass
class RunState:
    """The cache as loaded: `valid` when it matches the store; `graphs` the asserted named graphs
    the last run saw; `rules` {rule id: {"activity": IRI of the derivation its graph holds,
    "facts": how many}}."""

    valid: bool = False
    graphs: set[str] = field(default_factory=set)
    rules: dict[str, dict] = field(default_factory=dict)


class StateStore:
    """The cache folder of one project bound to its knowledge base's store."""

    def __init__(self, store, folder: Path, context: tuple[str, ...] = ()):
        self.store = store
        self.folder = folder
        #: The `# context:` predicates of the rule set (see context_digest).
        self.context = tuple(sorted(set(context)))
        self._through: int | None = None

    # -- the store side --------------------------------------------------------------------

    def token(self) -> str | None:
        rows = self.store.select(f"SELECT ?t WHERE {{ <{_RULES}> <{LUMA}runToken> ?t }}", union=False)
        return rows[0]["t"] if rows else None

    def _set_token(self, token: str | None, through: int | None = None) -> None:
        """Set (or clear) the token; with a token, `through` is the KB's ledger watermark the run
        saw, so that readers of derived facts can tell what came in after it (rules/derivations.py)."""
        insert = ""
        if token:
            mark = f' ; <{LUMA}runThrough> {int(through)}' if through is not None else ""
            insert = f'; INSERT DATA {{ <{_RULES}> <{LUMA}runToken> "{token}"{mark} }}'
        self.store.update(f"DELETE WHERE {{ <{_RULES}> <{LUMA}runToken> ?t }} ; "
                          f"DELETE WHERE {{ <{_RULES}> <{LUMA}runThrough> ?n }} {insert}")

    def watermark(self) -> int | None:
        """The ledger watermark of the KB (kb/knowledge_base.py), None when it has none."""
        rows = self.store.select(f"SELECT ?n WHERE {{ <{_KB}> <{LUMA}projectedThrough> ?n }}", union=False)
        return int(rows[0]["n"]) if rows else None

    def asserted_graphs(self) -> set[str]:
        """Every named graph that rules do not write (records, entities, ontology, documents), and the
        ontology's digest."""
        rows = self.store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", union=False, results="tsv").body
        out = set()
        for line in rows.splitlines()[1:]:
            iri = line.decode().strip()[1:-1]
            if iri and not iri.startswith(DERIVED):
                out.add(iri)
        # The ontology is reloaded in place when its files change: its digest stands for it.
        for row in self.store.select(f"SELECT ?h WHERE {{ <{_KB}> <{LUMA}ontologyHash> ?h }}", union=False):
            out.add("ontology-digest:" + row["h"])
        # Context facts (`# context:` predicates, e.g. a runner key's revocation) bear on every
        # record at once: their digest stands for them, so that a change reads as a graph gone
        # and the rules that read them run in full.
        out.add("context-digest:" + self.context_digest())
        return out

    def context_digest(self) -> str:
        """A digest of every fact whose predicate some rule declares as context."""
        if not self.context:
            return "none"
        values = " ".join(f"<{p}>" for p in self.context)
        rows = self.store.select(f"SELECT ?s ?p ?o WHERE {{ VALUES ?p {{ {values} }} ?s ?p ?o }}")
        text = "\n".join(sorted(f"{r['s']} {r['p']} {r['o']}" for r in rows))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def context_graphs(self) -> list[str]:
        """The named graphs that hold a fact of some `# context:` predicate (the revocation records'
        graphs): a delta run reads them beside the new record graphs, since a rule reads its context
        inside the graph that states it, never from the union of all graphs."""
        if not self.context:
            return []
        values = " ".join(f"<{p}>" for p in self.context)
        rows = self.store.select(f"SELECT DISTINCT ?g WHERE {{ VALUES ?p {{ {values} }} GRAPH ?g {{ ?s ?p ?o }} }}",
                                 union=False)
        return sorted(row["g"] for row in rows)

    # -- the cache side --------------------------------------------------------------------

    def load(self) -> RunState:
        try:
            meta = json.loads((self.folder / "state.json").read_text())
            graphs = (self.folder / "graphs.txt").read_text().split("\n")
        except (OSError, ValueError):
            return RunState()
        if meta.get("format") != _FORMAT or not meta.get("token") or meta["token"] != self.token():
            return RunState()
        return RunState(True, {g for g in graphs if g}, dict(meta.get("rules", {})))

    def buckets(self, rule_id: str) -> Buckets | None:
        """The rule's derived quads as the last run left them, on disk (None when not cached)."""
        return Buckets.open(self._dir(rule_id))

    def derived(self, rule_id: str) -> set[bytes] | None:
        """The rule's derived quads as the last run left them, in memory (None when not cached)."""
        kept = self.buckets(rule_id)
        return set(kept.lines()) if kept is not None else None

    def has_derived(self, rule_id: str) -> bool:
        """Whether the rule's derived quads are cached (a delta run then only appends to them)."""
        return self.buckets(rule_id) is not None

    def _dir(self, rule_id: str) -> Path:
        return self.folder / f"{_safe(rule_id)}.quads"

    def begin(self) -> None:
        """Called before the first write: a run killed half-way leaves no valid cache behind."""
        self._through = self.watermark()  # what this run reads: the KB as it is now
        self._set_token(None)

    def commit(self, graphs: set[str], rules: dict[str, dict], outputs: dict[str, "set[bytes] | Buckets"],
               appends: dict[str, set[bytes]] | None = None, dropped: set[str] = frozenset()) -> None:
        """Write the cache (changed rule outputs: a set of quads, or Buckets a full run wrote and
        that move into place; those in `appends` only grew by its quads; those `dropped` are no
        longer cached: the next run reads their graph from the store), then the matching token in
        the store. Safe without renames of the whole: the token that validates the cache is
        written after it, and `begin` cleared the old one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        appends = appends or {}
        for old in self.folder.glob("*.nq"):  # the cache of LUMA before format 2: one file a rule
            old.unlink(missing_ok=True)
        for rule_id in dropped:
            shutil.rmtree(self._dir(rule_id), ignore_errors=True)
        for rule_id, quads in outputs.items():
            target = self._dir(rule_id)
            kept = Buckets.open(target)
            if rule_id in appends and kept is not None:
                kept.append(appends[rule_id])
            elif isinstance(quads, Buckets):
                replace_dir(quads.folder, target)
            else:  # (Buckets.write replaces the folder)
                Buckets.write(target, quads, bucket_count(sum(len(q) + 1 for q in quads)))
        _atomic_write(self.folder / "graphs.txt", "\n".join(sorted(graphs)).encode())
        token = secrets.token_hex(16)
        _atomic_write(self.folder / "state.json",
                      json.dumps({"format": _FORMAT, "token": token, "rules": rules}, indent=1).encode())
        self._set_token(token, self._through)


def _safe(rule_id: str) -> str:
    # Rule ids are slugs already; the digest keeps two ids that differ only in case apart.
    return f"{rule_id}-{hashlib.sha256(rule_id.encode()).hexdigest()[:8]}"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
