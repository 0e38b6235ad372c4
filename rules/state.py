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

Listing every graph name costs ~0.5 s at 100k records (the store decodes each name), on every
run. So a run first asks what the ledger says came in since the last one: the records beyond the
watermark that run saw, whose graphs carry their content hash (`luma:contentHash`), looked up by
that hash. When the store's count of named graphs (counted without decoding a name: ~10 ms) is
the last run's count plus those new graphs, nothing else came or went, and the new list is the old
one plus them; any other count (a partner retraction dropped graphs, a graph reloaded, a writer
still loading, a raw update) lists every graph as before.
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
    #: The store's count of named graphs when the last run committed, and the ledger watermark it
    #: read (None when unknown: the next run lists every graph).
    graph_count: int | None = None
    through: int | None = None


class StateStore:
    """The cache folder of one project bound to its knowledge base's store."""

    def __init__(self, store, folder: Path, context: tuple[str, ...] = (), ledger=None):
        self.store = store
        self.folder = folder
        #: The KB's ledger (`hashes_after`), through which a run learns which records came in.
        self.ledger = ledger
        #: How the last `asserted_graphs` found them: "ledger" or "listing".
        self.changes_from = "listing"
        #: The `# context:` predicates of the rule set (see context_digest).
        self.context = tuple(sorted(set(context)))
        #: The ledger watermark this run read, before its graphs: what it saw of the KB.
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

    def graph_count(self) -> int:
        """How many named graphs the store holds (derived ones too), counted without decoding a name."""
        rows = self.store.select("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { } }", union=False)
        return int(rows[0]["n"])

    def asserted_graphs(self, prev: RunState | None = None) -> set[str]:
        """Every named graph that rules do not write (records, entities, ontology, documents), and the
        ontology's digest. With the last run's state, from it and the ledger's new records when the
        store's graph count says nothing else changed (see the module's docstring)."""
        # Read before the graphs: a record committed meanwhile is looked up again by the next run.
        self._through = self.watermark()
        out = self._since(prev, self._through) if prev is not None else None
        self.changes_from = "listing" if out is None else "ledger"
        if out is None:
            out = self._listed()
        return self._with_digests(out)

    def _listed(self) -> set[str]:
        rows = self.store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", union=False, results="tsv").body
        out = set()
        for line in rows.splitlines()[1:]:
            iri = line.decode().strip()[1:-1]
            if iri and not iri.startswith(DERIVED):
                out.add(iri)
        return out

    def _since(self, prev: RunState, through: int | None) -> set[str] | None:
        """The last run's graphs plus those of the ledger's records since its watermark, or None
        when the graph count shows another change (or the state cannot tell)."""
        if not prev.valid or prev.graph_count is None or prev.through is None or self.ledger is None:
            return None
        if through is None or through < prev.through:
            return None
        count = self.graph_count()
        rows = self.ledger.hashes_after(prev.through, LOOKUP_MAX + 1)
        if rows is None or len(rows) > LOOKUP_MAX:
            return None  # not known, or as many lookups as a listing costs: list
        hashes = [row[1] for row in rows if row[0] <= through]
        if not all(h.isalnum() for h in hashes):
            return None  # not content hashes (hex): never spliced into a query
        new: set[str] = set()
        for i in range(0, len(hashes), _LOOKUP_BATCH):
            values = " ".join(f'"{h}"' for h in hashes[i:i + _LOOKUP_BATCH])
            found = self.store.select(f"SELECT DISTINCT ?g WHERE {{ VALUES ?h {{ {values} }} "
                                      f"GRAPH ?g {{ ?g <{LUMA}contentHash> ?h }} }}", union=False)
            new.update(row["g"] for row in found)
        old = {g for g in prev.graphs if not g.startswith(_DIGESTS)}  # the digests are recomputed
        new = {g for g in new if not g.startswith(DERIVED)} - old
        if count != prev.graph_count + len(new):
            return None
        return old | new

    def _with_digests(self, out: set[str]) -> set[str]:
        # The ontology is reloaded in place when its files change: its digest stands for it.
        for row in self.store.select(f"SELECT ?h WHERE {{ <{_KB}> <{LUMA}ontologyHash> ?h }}", union=False):
            out.add(ONTOLOGY_DIGEST + row["h"])
        # Context facts (`# context:` predicates, e.g. a runner key's revocation) bear on every
        # record at once: their digest stands for them, so that a change reads as a graph gone
        # and the rules that read them run in full.
        out.add(CONTEXT_DIGEST + self.context_digest())
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
        return RunState(True, {g for g in graphs if g}, dict(meta.get("rules", {})), meta.get("graph_count"),
                        meta.get("through"))

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
        if self._through is None:  # (asserted_graphs read it with the graphs)
            self._through = self.watermark()
        self._set_token(None)

    def commit(self, graphs: set[str], rules: dict[str, dict], outputs: dict[str, "set[bytes] | Buckets"],
               appends: dict[str, set[bytes]] | None = None, dropped: set[str] = frozenset(),
               grown_by: list[str] | None = None) -> None:
        """Write the cache (changed rule outputs: a set of quads, or Buckets a full run wrote and
        that move into place; those in `appends` only grew by its quads; those `dropped` are no
        longer cached: the next run reads their graph from the store; `graphs`, or when it is the
        loaded list plus `grown_by`, only those appended), then the matching token in the store.
        Safe without renames of the whole: the token that validates the cache is written after it,
        and `begin` cleared the old one."""
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
        listed = self.folder / "graphs.txt"
        if grown_by is not None and listed.is_file():
            if grown_by:
                with open(listed, "ab") as out:
                    out.write(("\n" + "\n".join(grown_by)).encode())
        else:
            _atomic_write(listed, "\n".join(sorted(graphs)).encode())
        token = secrets.token_hex(16)
        # Counted after every write of the run: the next run compares the store's count with it.
        meta = {"format": _FORMAT, "token": token, "rules": rules, "graph_count": self.graph_count(),
                "through": self._through}
        _atomic_write(self.folder / "state.json", json.dumps(meta, indent=1).encode())
        self._set_token(token, self._through)


def cached_through(folder: Path) -> int | None:
    """The ledger watermark the last run's cache in `folder` says it saw (not checked against the
    store: `StateStore.load` does that), None when there is none."""
    try:
        through = json.loads((folder / "state.json").read_text()).get("through")
    except (OSError, ValueError, AttributeError):
        return None
    return through if isinstance(through, int) else None


class LedgerRows:
    """The ledger's records after one id, read by a process that has the ledger, for a rule run in
    one that does not (rules/isolated_run.py: the sandboxed child reaches no database server)."""

    def __init__(self, since: int, rows: list):
        self.since, self.rows = since, [(int(i), str(h)) for i, h in rows]

    def hashes_after(self, last_id: int, limit: int | None = None) -> list[tuple[int, str]] | None:
        """(id, content hash) of the records after `last_id` (the first `limit`); None when these
        rows cannot tell."""
        if last_id < self.since:
            return None
        return [row for row in self.rows if row[0] > last_id][:limit]


#: The entries of the graph list that stand for facts, not graphs (recomputed by every run).
ONTOLOGY_DIGEST, CONTEXT_DIGEST = "ontology-digest:", "context-digest:"
_DIGESTS = (ONTOLOGY_DIGEST, CONTEXT_DIGEST)
#: New records looked up by content hash per query, and past how many a listing is cheaper.
_LOOKUP_BATCH = 1_000
LOOKUP_MAX = 20_000


def _safe(rule_id: str) -> str:
    # Rule ids are slugs already; the digest keeps two ids that differ only in case apart.
    return f"{rule_id}-{hashlib.sha256(rule_id.encode()).hexdigest()[:8]}"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
