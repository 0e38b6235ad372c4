"""Run the rule set over the knowledge base: strata in order, each to a fixpoint, every rule's
facts in its own derived graph, every derived node linked to its derivation.

Each run recomputes the derived graphs from the asserted facts (so removing a record and
re-running removes what depended on it) and reports, per rule, what is new and what went away
against the previous run (so a re-run on unchanged data reports nothing new). Rules are CONSTRUCT
queries evaluated by the store over the union of all graphs; their answer is loaded as N-Quads
into `…/graph/derived/<rule id>`. The derivation of a rule run is a `prov:Activity` IRI built from
the rule id, version, body digest and parameters: each derived node gets `prov:wasGeneratedBy`
it, and rules link derived nodes to their support with `prov:wasDerivedFrom`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import pyoxigraph as ox

from luma.errors import RuleError
from luma.kb.vocab import ID, LUMA, PROV
from luma.rules import partition as part
from luma.rules import quad_buckets as qb
from luma.rules.analysis import Analysed, analyse_cached, check_rule_cached, dependency_graph, keys_meet, strata
from luma.rules.loader import Rule, load_all, render, resolve_params
from luma.rules.results import Results
from luma.rules.run_report import RuleRun, RunReport
from luma.rules.schedule import default_workers, each, priority
from luma.rules.sealing import refuse_unsealed
from luma.rules.state import DERIVED, RunState, StateStore
from luma.settings import rules_cache

MAX_ROUNDS = 50
#: Record graphs bound with VALUES per query of a `reads: records` rule. Oxigraph looks each up
#: by index up to about this many; at 2,000 it changed plan and took 50x longer.
RECORD_BATCH = 1000
#: A delta run binds its new record graphs with VALUES while they are at most this share of all
#: graphs (or 2 batches): bound, the cost follows the new graphs (0.25 s per 1,000 at 100k); as a
#: dataset it follows the whole KB (0.4-0.8 s at 100k, whatever the delta), so past ~1/40 the
#: dataset is the cheaper.
DELTA_BOUND_SHARE = 1 / 40
#: A `reads: records` rule whose new graphs are more than 1/DELTA_FULL_SHARE of all runs in full:
#: a delta over a dataset of 25,000 of 100,000 record graphs took the qualification rule 75 s,
#: its full run 8 s.
DELTA_FULL_SHARE = 4
#: Record graphs past which a full run of a `reads: records` rule is evaluated a RECORD_BATCH at a
#: time: the whole-KB query holds every subquery's hash table (1.2 GB for the qualification rule
#: at 100k chains, ~12 GB at 1M); batches hold one batch's, and cost ~2.5x the time.
BATCH_FULL_ABOVE = 250_000
#: Record graphs below which a delta stays one batch: a batch of the qualification rule is
#: evaluated on one core, so 1,000 new graphs go as two batches of 500 on two threads (0.70 ->
#: 0.35-0.38 s at 100k chains); a small delta is not worth the second query's fixed cost.
MIN_SPLIT = 200
#: Up to this many quads are added in one transaction rather than by the bulk loader.
SMALL_WRITE = 20_000
_CONSTRUCT = re.compile(r"\bCONSTRUCT\s*\{", re.I)


def graph_of(rule_id: str) -> str:
    return DERIVED + rule_id


def activity_of(rule: Rule, values: dict) -> str:
    key = json.dumps({"v": rule.version, "body": rule.digest(), "params": values}, sort_keys=True)
    return f"{ID}derivation/{rule.id}/v{rule.version}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _with_provenance(rule: Rule, sparql: str, activity: str) -> str:
    """The CONSTRUCT with `?derived prov:wasGeneratedBy <activity>` added to its template for each
    variable the rule derives (and, for a partitioned rule, `?derived luma:partitionKey ?key`)."""
    if not rule.derives:
        return sparql
    m = _CONSTRUCT.search(sparql)
    links = " ".join(f"{var} <{PROV}wasGeneratedBy> <{activity}> ." for var in rule.derives.split())
    sparql = f"{sparql[:m.end()]} {links} {sparql[m.end():]}"
    return part.key_links(rule, sparql, m.end()) if rule.partition else sparql


def _activity_quads(rule: Rule, activity: str, values: dict) -> set[bytes]:
    g = f"<{graph_of(rule.id)}>"
    lines = [f"<{activity}> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{PROV}Activity> {g} .",
             f"<{activity}> <{LUMA}rule> {json.dumps(rule.id)} {g} .",
             f"<{activity}> <{LUMA}ruleVersion> \"{rule.version}\"^^<http://www.w3.org/2001/XMLSchema#integer> {g} ."]
    lines += [f"<{activity}> <{LUMA}parameter> {json.dumps(f'{k}={v}')} {g} ." for k, v in sorted(values.items())]
    return {line.encode() for line in lines}


def _to_quads(ntriples: bytes, graph: str) -> set[bytes]:
    tail = f" <{graph}> .".encode()
    return {line[:-2].rstrip() + tail for line in ntriples.splitlines() if line.endswith(b" .")}


class Engine:
    """The rule set (shipped rules plus `$LUMA_HOME/rules/*.rq`) bound to one knowledge base."""

    def __init__(self, kb, rules: list[Rule] | None = None, cache: Path | None = None):
        self.kb = kb
        #: Where a run keeps what it derived (to skip unchanged work next time).
        self.cache = cache or kb.settings.home / "cache" / "rules"
        rules = rules if rules is not None else load_all(kb.settings.home / "rules")
        #: The machine's cache of rule analyses and checked texts, beside the project's.
        self.shared_cache = rules_cache()
        self.analysed: list[Analysed] = [analyse_cached(r, self.cache / "analysis", self.shared_cache / "analysis")
                                         for r in rules]
        self._by_id = {a.rule.id: a for a in self.analysed}
        #: Record graphs past which a full run of a `reads: records` rule goes a batch of records at
        #: a time (memory bounded by the batch, not the KB: see `_full`).
        self.batch_full_above = BATCH_FULL_ABOVE
        #: Threads for independent strata and for the batches of one rule (`run` may set it).
        self.workers = default_workers()
        refuse_unsealed(self.analysed)  # a project's own rule reads sealed terms only where they are stated
        self.strata = strata(self.analysed)  # refuses cycles through negation before anything runs

    def _delta_query(self, rule_id: str, sparql: str, ctx) -> bytes:
        """A `reads: records` rule's answer over the new record graphs alone.

        Their IRIs are bound to the rule's record-graph variable with VALUES, in batches of at
        most RECORD_BATCH, one per worker (MIN_SPLIT): each pattern is then an index lookup per
        graph. A named-graph dataset instead makes Oxigraph scan every graph's facts and keep
        those of the dataset (0.5-0.8 s for the same delta), and is what is left when the rule's
        text cannot be bound (see `_record_batches`) or the new graphs are many. Such a rule
        reads nothing outside GRAPH ?g (rules/analysis.py refuses it otherwise), so no union
        default graph is asked for: `oxigraph serve` refuses one beside named graphs (HTTP 400)."""
        few = len(ctx.added) <= max(2 * RECORD_BATCH, DELTA_BOUND_SHARE * len(ctx.asserted))
        size = min(RECORD_BATCH, max(MIN_SPLIT, -(-len(ctx.added) // self.workers)))
        batches = self._record_batches(rule_id, sparql, ctx.added, size) if few else None
        if batches is None:
            return self.kb.store.query(sparql, named_graphs=ctx.delta_graphs, union=False).body
        return b"".join(each(batches, lambda text: self.kb.store.query(text, union=False).body, self.workers))

    def _record_batches(self, rule_id: str, sparql: str, graphs: list[str],
                        size: int = RECORD_BATCH) -> Iterator[str] | None:
        """The rule's text once per `size` (at most RECORD_BATCH) of `graphs`, each with `VALUES ?g { those }`
        first in every `GRAPH ?g { }` of its record-graph variable; None when the rule has no
        such variable, reads it in one GRAPH block only, or the text does not show it exactly
        where the analysis found it (a comment or a string that looks like one).

        Only a rule written as many single-pattern subqueries gains: Oxigraph hash-joins their
        scans, and a named-graph dataset still scans every record (the qualification rule over
        1,000 new chains at 100k: 0.25 s bound, 0.39 s as a dataset). One pattern block is looked
        up from its most selective pattern already, and bound it went the other way
        (unrecovered-boundary: 0.5 s bound, 0.08 s as a dataset)."""
        a = self._by_id[rule_id]
        if not a.record_var or a.record_reads < 2:
            return None
        pattern = re.compile(r"\bGRAPH\s+\?" + re.escape(a.record_var) + r"\s*\{", re.I)
        if len(pattern.findall(sparql)) != a.record_reads:
            return None

        def texts() -> Iterator[str]:  # one at a time: each holds its batch once per GRAPH block
            for i in range(0, len(graphs), size):
                values = f"VALUES ?{a.record_var} {{ {' '.join(f'<{g}>' for g in graphs[i:i + size])} }} "
                yield pattern.sub(lambda m: m.group(0) + " " + values, sparql)

        return texts()

    def _derived(self, rule_id: str) -> set[bytes]:
        out = self.kb.store.query(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph_of(rule_id)}> {{ ?s ?p ?o }} }}",
                                  union=False)
        return _to_quads(out.body, graph_of(rule_id))

    def run(self, overrides: dict[str, str] | None = None, full: bool = False, workers: int | None = None,
            exploratory: bool = False) -> RunReport:
        """Bring every derived graph up to date; `overrides`: {"name" or "rule-id.name": value}.

        Work is skipped where nothing it depends on changed since the last run (see
        `rules/state.py`): a rule whose derivation (version, body, parameters) is the same, whose
        asserted inputs kept their graphs and whose upstream rules derived nothing new or removed.
        A `reads: records` rule that only gained record graphs runs over the new graphs alone.
        `full` recomputes everything from the store. Strata that do not depend on each other run
        at the same time on `workers` threads (the store answers queries without holding the GIL).
        Parameters below their rule's floor are refused (`BelowFloor`) unless `exploratory`, which
        only rules/exploratory.py sets, on a copy of the KB."""
        rules = [a.rule for a in self.analysed]
        values = resolve_params(rules, overrides or {}, exploratory=exploratory)
        report, t0 = RunReport(), time.perf_counter()
        state = StateStore(self.kb.store, self.cache, tuple(p for a in self.analysed for p in a.rule.context),
                           ledger=getattr(self.kb, "ledger", None))
        prev = RunState() if full else state.load()
        graphs = state.asserted_graphs(prev)
        report.changes_from = state.changes_from
        # The text each rule runs, parameter values in place, checked as a user's query is: all of
        # them here, before anything is written, and on this thread (rdflib's parser is not
        # thread-safe: two strata parsing at once broke each other's parse).
        queries = {}
        for r in rules:
            queries[r.id] = _with_provenance(r, render(r, values[r.id]), activity_of(r, values[r.id]))
            check_rule_cached(r, queries[r.id], self.cache / "checked", self.shared_cache / "checked")
        deps = dependency_graph(self.analysed)
        ctx = _Context(values, prev, sorted(graphs - prev.graphs), prev.graphs - graphs, state, state.context_graphs(),
                       queries, upstream={a.rule.id: sorted(a.graphs) for a in self.analysed if a.rule.partition},
                       asserted=graphs)
        index = {a.rule.id: i for i, stratum in enumerate(self.strata) for a in stratum}
        needs = {i: {index[p] for a in stratum for p in deps.predecessors(a.rule.id)} - {i}
                 for i, stratum in enumerate(self.strata)}
        first = priority(needs, {i: sum(prev.rules.get(a.rule.id, {}).get("seconds", 0.0) for a in stratum)
                                  for i, stratum in enumerate(self.strata)})
        changed: set[str] = set()
        kept: dict[str, dict] = {}
        outputs: dict[str, set[bytes]] = {}
        appends: dict[str, set[bytes]] = {}
        results: dict[int, list[RuleRun]] = {}
        dropped: set[str] = set()  # partitioned runs: their cached output is no longer whole
        state.begin()
        shutil.rmtree(self.cache / "work", ignore_errors=True)  # what a run that failed left behind
        self.workers = workers or default_workers()
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            todo, running = list(range(len(self.strata))), {}
            while todo or running:
                ready = sorted((i for i in todo if needs[i] <= results.keys()), key=first)
                for i in ready[:self.workers - len(running)]:
                    todo.remove(i)
                    # Decided here, once every stratum it reads from has finished.
                    modes = {a.rule.id: self._mode(a.rule, values, prev, ctx, deps, changed) for a in self.strata[i]}
                    running[pool.submit(self._guarded, i + 1, self.strata[i], modes, ctx)] = i
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    i = running.pop(future)
                    results[i] = []
                    for run, after, activity, grown, change in future.result():
                        if run.new or run.removed:
                            changed.add(run.rule)
                            # What it added and removed, when known and small: a downstream
                            # partitioned rule recomputes only the keys these touch.
                            ctx.changes[run.rule] = change
                        if run.mode == "partition":
                            dropped.add(run.rule)
                        if after is not None and (run.new or run.removed or not prev.valid or run.rule not in prev.rules):
                            outputs[run.rule] = after
                            if grown is not None:  # the cache file grows by the new facts alone
                                appends[run.rule] = grown
                        # How long it took when it ran (a skipped rule keeps its last time).
                        took = run.seconds if run.mode != "skip" else prev.rules.get(run.rule, {}).get("seconds", 0.0)
                        kept[run.rule] = {"activity": activity, "facts": run.facts, "derived": run.derived,
                                          "seconds": round(took, 3)}
                        results[i].append(run)
        report.runs = [run for i in sorted(results) for run in results[i]]
        # The graph list grows by the new graphs alone when none went (1M names: ~100 MB to rewrite).
        state.commit(graphs, kept, outputs, appends, dropped, grown_by=ctx.added if prev.valid and not ctx.gone else None)
        shutil.rmtree(self.cache / "work", ignore_errors=True)  # full runs' answers and differences
        report.seconds = time.perf_counter() - t0
        return report

    def _guarded(self, n: int, stratum: list[Analysed], mode: dict[str, str], ctx: "_Context") -> list:
        """`_stratum`, with what the store raises past its own errors (pyoxigraph's ValueError or
        RuntimeError, a SyntaxError of a text it was handed) as one RuleError naming the rules."""
        try:
            return self._stratum(n, stratum, mode, ctx)
        except (OSError, ValueError, RuntimeError, SyntaxError) as exc:
            names = ", ".join(a.rule.id for a in stratum)
            raise RuleError(f"stratum {n} ({names}) failed in the store: {type(exc).__name__}: {exc}",
                            source=stratum[0].rule.path) from None

    def _stratum(self, n: int, stratum: list[Analysed], mode: dict[str, str], ctx: "_Context") -> list:
        """Bring one stratum up to date: [(RuleRun, its derived quads or None if skipped or
        partitioned, activity, the quads a delta run added or None, the quads added and removed
        when known and at most part.MAX_CHANGES, else None)]."""
        members = [a.rule for a in stratum]
        results = {a.rule.id: Results(graph_of(a.rule.id), a.result_class) for a in stratum}
        runs = {r.id: RuleRun(r.id, n, mode=mode[r.id], result_class=results[r.id].result_class) for r in members}
        acts = {r.id: activity_of(r, ctx.values[r.id]) for r in members}
        if all(m == "skip" for m in mode.values()):
            for r in members:
                self._unchanged(runs[r.id], ctx.prev.rules[r.id], results[r.id])
            return [(runs[r.id], None, acts[r.id], None, None) for r in members]
        queries = {r.id: ctx.queries[r.id] for r in members}  # checked by `run`
        own = {r.id: _activity_quads(r, acts[r.id], ctx.values[r.id]) for r in members}
        if _recursive(stratum):
            before = {r.id: self._before(ctx.state, r.id, ctx.prev) for r in members}
            for r in members:
                runs[r.id].mode = "full"
            after = self._fixpoint(n, members, queries, own, runs)
            out = []
            for r in members:
                new, gone = after[r.id] - before[r.id], before[r.id] - after[r.id]
                run = runs[r.id]
                run.facts, run.new, run.removed = len(after[r.id]), len(new), len(gone)
                run.derived, run.derived_new, run.derived_changed, run.derived_removed = \
                    results[r.id].tally(before[r.id], after[r.id])
                out.append((run, after[r.id], acts[r.id], None, None))
            return out
        # Nothing in the stratum reads its own output, so one evaluation is its fixpoint, and the
        # old facts may stay in place while it runs: only the difference is written (a re-run on
        # unchanged data writes nothing).
        out = []
        for r in members:
            t, run, g = time.perf_counter(), runs[r.id], graph_of(r.id)
            if mode[r.id] == "skip":
                self._unchanged(run, ctx.prev.rules[r.id], results[r.id])
                out.append((run, None, acts[r.id], None, None))
                continue
            if mode[r.id] == "partition":
                done = self._partitioned(r, run, results[r.id], acts[r.id], ctx)
                if done is not None:
                    run.seconds = time.perf_counter() - t
                    out.append(done)
                    continue
                run.mode = "full"  # the keys could not be told: the whole answer instead
            if mode[r.id] == "delta" and ctx.state.has_derived(r.id):
                # New record graphs only: their facts add to the old. What is new is told by asking
                # the store about the fresh quads, not by reading the rule's whole cached output
                # back (660k quads of qualified-boundary at 100k chains: 0.6 s on every run).
                fresh = _to_quads(self._delta_query(r.id, queries[r.id], ctx), g)
                new = fresh - self._present(g, fresh)
                self._apply(r.id, set(), new, set())
                run.facts, run.new, run.rounds = ctx.prev.rules[r.id]["facts"] + len(new), len(new), 1
                self._grown(run, ctx.prev.rules[r.id], results[r.id], new)
                run.seconds = time.perf_counter() - t
                out.append((run, set(), acts[r.id], new, _change(new, set())))
                continue
            if mode[r.id] == "delta":  # no cached output to append to: the old facts and the new
                before = self._before(ctx.state, r.id, ctx.prev)
                t = time.perf_counter()
                after = before | _to_quads(self._delta_query(r.id, queries[r.id], ctx), g)
                new, gone = after - before, before - after
                self._apply(r.id, before, new, gone)
                run.rounds, run.seconds = 1, time.perf_counter() - t
                run.facts, run.new, run.removed = len(after), len(new), len(gone)
                run.derived, run.derived_new, run.derived_changed, run.derived_removed = \
                    results[r.id].tally(before, after)
                out.append((run, after, acts[r.id], None, _change(new, gone)))
                continue
            out.append(self._full(r, run, results[r.id], acts[r.id], queries[r.id], own[r.id], ctx))
        return out

    def _full(self, rule: Rule, run: RuleRun, results: Results, activity: str, sparql: str, own: set[bytes],
              ctx: "_Context") -> tuple:
        """The rule evaluated over the whole KB, compared with what its graph held, and the
        difference written. Neither side is held in memory: the store writes its answer to a
        file, and both sides are compared a bucket of subjects at a time (rules/quad_buckets.py).
        The new side becomes the rule's cache (the `after` of the stratum's result tuple is then
        its Buckets)."""
        t, g = time.perf_counter(), graph_of(rule.id)
        work = self.cache / "work" / rule.id
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            answer = work / "answer.nt"
            records = sorted(name for name in ctx.asserted if "://" in name) if rule.reads == "records" else []
            batches = self._record_batches(rule.id, sparql, records) if len(records) > self.batch_full_above else None
            if batches is not None:
                def evaluate(numbered: tuple[int, str]) -> Path:
                    path = work / f"part-{numbered[0]}.nt"
                    self.kb.store.construct_to_file(numbered[1], path, union=False)
                    return path

                with open(answer, "wb") as out:
                    for path in each(enumerate(batches), evaluate, self.workers):
                        with open(path, "rb") as part_file:
                            shutil.copyfileobj(part_file, out)
                        path.unlink()
            elif rule.partition is None:
                self.kb.store.construct_to_file(sparql, answer)
            else:  # its upstream graphs alone, in this mode as in a partitioned run (rules/partition.py)
                self.kb.store.construct_to_file(sparql, answer, named_graphs=ctx.upstream[rule.id], union=False)
            before = self._before_buckets(ctx, rule.id)
            k = qb.bucket_count(max(answer.stat().st_size, before.size() if before else 0))
            if before is None:  # not cached: what the store's graph holds
                held = work / "held.nt"
                self.kb.store.construct_to_file(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{g}> {{ ?s ?p ?o }} }}",
                                                held, union=False)
                before = qb.Buckets.from_ntriples(work / "before", held, g, k)
            elif before.k != k:
                before = qb.rebucket(before, k, work / "before")
            after = qb.Buckets.from_ntriples(work / "after", answer, g, k, own)
            answer.unlink()
            diff = qb.compare(before, after, results, work)
            self._apply_files(rule.id, diff, after)
            change = None
            if diff.new + diff.removed <= part.MAX_CHANGES:
                change = set(qb.read_lines(diff.added_file)) | set(qb.read_lines(diff.removed_file))
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        run.rounds, run.seconds = 1, time.perf_counter() - t
        run.facts, run.new, run.removed = diff.facts, diff.new, diff.removed
        run.derived, run.derived_new, run.derived_changed, run.derived_removed = diff.tally()
        return run, after, activity, None, change

    def _before_buckets(self, ctx: "_Context", rule_id: str) -> "qb.Buckets | None":
        """The rule's cached quads when the cache is valid for it, else None."""
        if ctx.prev.valid and rule_id in ctx.prev.rules:
            return ctx.state.buckets(rule_id)
        return None

    def _apply_files(self, rule_id: str, diff: "qb.Difference", after: "qb.Buckets") -> None:
        """`_apply` for a difference kept in files: most of the graph gone, the graph is dropped
        and the new set bulk-loaded bucket by bucket; else the removed quads are deleted and the
        new ones added, a block at a time."""
        store, g = self.kb.store, graph_of(rule_id)
        if diff.removed > diff.before_quads // 2:
            store.update(f"DROP SILENT GRAPH <{g}>")
            for i in range(after.k):
                if after.path(i).exists():
                    store.load_nquads_file(after.path(i))
            return
        self._delete(g, qb.read_lines(diff.removed_file))
        if diff.new > SMALL_WRITE:
            store.load_nquads_file(diff.added_file)
        elif diff.new:  # a bulk load costs ~0.3 s whatever its size; a small transaction much less
            store.load_nquads(diff.added_file.read_bytes())

    def _delete(self, graph: str, lines: Iterable[bytes]) -> None:
        """Delete N-Quads lines of `graph` from it, 5,000 to a DELETE DATA."""
        tail, it = len(f" <{graph}> ."), iter(lines)
        while block := list(islice(it, 5000)):
            triples = b"\n".join(line[:-tail] + b" ." for line in block).decode()
            self.kb.store.update(f"DELETE DATA {{ GRAPH <{graph}> {{ {triples} }} }}")

    def _partitioned(self, rule: Rule, run: RuleRun, results: Results, activity: str, ctx: "_Context"):
        """A partitioned rule brought up to date for the keys its upstream changes touch (see
        rules/partition.py): the stratum's result tuple, or None when the keys cannot be told (a
        blank node, too many) and the whole answer must be computed instead."""
        store, g, prev = self.kb.store, graph_of(rule.id), ctx.prev.rules[rule.id]
        changes = set().union(*(ctx.changes[p] for p in ctx.upstream_rules(rule.id) if p in ctx.changes))
        subjects = part.changed_subjects(changes)
        if subjects is None:
            return None
        keys: set[str] = set()
        if subjects:
            now = part.parse_keys(store.query(part.lookup_query(rule, subjects), union=False,
                                              default_graphs=ctx.upstream[rule.id], results="tsv").body)
            # And in the changed quads themselves: the removed ones are no longer in the store.
            before = part.keys_in(rule, subjects, changes)
            if now is None or before is None:
                return None
            keys = set(now) | set(before)
        if len(keys) > part.MAX_KEYS:
            return None
        ordered = sorted(keys)
        old = _to_quads(store.query(part.old_facts_query(g, ordered), union=False).body, g) if keys else set()
        sparql = _with_provenance(rule, render(rule, ctx.values[rule.id], ordered), activity)
        fresh = _to_quads(store.query(sparql, named_graphs=ctx.upstream[rule.id], union=False).body, g) if keys else set()
        new, gone = fresh - old, old - fresh
        self._apply(rule.id, old, new, gone, whole=False)
        n_now, n_new, n_changed, n_removed = results.tally(old, fresh)
        n_old = len(results.nodes(old))
        run.rounds, run.new, run.removed = 1, len(new), len(gone)
        run.facts = prev["facts"] + len(new) - len(gone)
        run.derived = prev["derived"] - n_old + n_now if "derived" in prev else self._count(results)
        run.derived_new, run.derived_changed, run.derived_removed = n_new, n_changed, n_removed
        return run, None, activity, None, new | gone

    def _unchanged(self, run: RuleRun, prev: dict, results: Results) -> None:
        """A skipped rule: its quads and results as the last run left them (a cache written before
        results were counted: counted in the store)."""
        run.facts = prev["facts"]
        run.derived = prev["derived"] if "derived" in prev else self._count(results)

    def _grown(self, run: RuleRun, prev: dict, results: Results, new: set[bytes]) -> None:
        """A delta run added `new` quads: its new results, and the old results they add to."""
        fresh = results.nodes(new)
        old = results.touched(new) - fresh
        run.derived_new = len(fresh)
        run.derived_changed = len(self._present(results.graph, results.type_lines(old))) if old else 0
        run.derived = prev["derived"] + len(fresh) if "derived" in prev else self._count(results)

    def _count(self, results: Results) -> int:
        rows = self.kb.store.select(results.count_query(), union=False)
        return int(rows[0]["n"]) if rows else 0

    def _present(self, graph: str, quads: set[bytes]) -> set[bytes]:
        """Those of `quads` (N-Quads lines in `graph`) that the store's `graph` holds already."""
        out: set[bytes] = set()
        lines = sorted(quads)
        for i in range(0, len(lines), 2000):
            chunk = lines[i:i + 2000]
            rows = " ".join(f"({q.subject} {q.predicate} {q.object})"
                            for q in ox.parse(b"\n".join(chunk) + b"\n", format=ox.RdfFormat.N_QUADS))
            answer = self.kb.store.query(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ VALUES (?s ?p ?o) {{ {rows} }} "
                                         f"GRAPH <{graph}> {{ ?s ?p ?o }} }}", union=False).body
            out |= _to_quads(answer, graph)
        return out & quads

    def _mode(self, rule: Rule, values: dict, prev: RunState, ctx: "_Context", deps, changed: set) -> str:
        """"skip", "delta" (a `reads: records` rule over the new record graphs), "partition" (a
        partitioned rule over the keys its upstream changes touch) or "full"."""
        same = prev.valid and prev.rules.get(rule.id, {}).get("activity") == activity_of(rule, values[rule.id])
        if not same:
            return "full"
        if rule.partition is not None:
            # It reads its upstream rules' graphs alone: only their changes matter, and when each
            # that changed said what it added and removed, only the keys those touch.
            moved = [p for p in deps.predecessors(rule.id) if p in changed]
            if not moved:
                return "skip"
            return "partition" if all(ctx.changes.get(p) is not None for p in moved) else "full"
        if any(p in changed for p in deps.predecessors(rule.id)):
            return "full"
        if rule.reads == "records":
            if ctx.added and len(ctx.added) * DELTA_FULL_SHARE > len(ctx.asserted):
                return "full"  # most of the KB is new: the whole answer costs less than a delta
            return "full" if ctx.gone else ("delta" if ctx.added else "skip")
        return "full" if ctx.added or ctx.gone else "skip"

    def _before(self, state: StateStore, rule_id: str, prev: RunState) -> set[bytes]:
        """What the rule's derived graph holds now: the cache when it is valid, else the store."""
        cached = state.derived(rule_id) if prev.valid and rule_id in prev.rules else None
        return cached if cached is not None else self._derived(rule_id)

    def _fixpoint(self, n: int, members: list[Rule], queries: dict, own: dict, runs: dict) -> dict[str, set[bytes]]:
        """A recursive stratum from scratch (stale facts could otherwise keep deriving themselves)."""
        store = self.kb.store
        for r in members:
            store.update(f"DROP SILENT GRAPH <{graph_of(r.id)}>")
            store.bulk_load_nquads([b"\n".join(own[r.id]) + b"\n"])
        current = {r.id: set(own[r.id]) for r in members}
        for _ in range(MAX_ROUNDS):
            grew = False
            for r in members:
                t = time.perf_counter()
                fresh = _to_quads(store.query(queries[r.id]).body, graph_of(r.id)) - current[r.id]
                if fresh:
                    store.bulk_load_nquads([b"\n".join(fresh) + b"\n"])
                    current[r.id] |= fresh
                    grew = True
                runs[r.id].rounds += 1
                runs[r.id].seconds += time.perf_counter() - t
            if not grew:
                return current
        raise RuleError(f"stratum {n} ({', '.join(current)}) did not reach a fixpoint in {MAX_ROUNDS} rounds",
                        field="rules")

    def _apply(self, rule_id: str, before: set[bytes], added: set[bytes], removed: set[bytes],
               whole: bool = True) -> None:
        """Take the rule's derived graph from `before` to `before - removed | added`, writing only
        the difference. Large writes are bulk loads, not transactions: ~10x faster here (DESIGN §9);
        a graph a crash leaves half-written is recomputed by the next run (the cache token is only
        written at the end). `whole`: `before` is the whole graph (not one partition's part of it),
        so that the graph may be dropped and rewritten when most of it goes."""
        store, g = self.kb.store, graph_of(rule_id)
        if whole and len(removed) > len(before) // 2:
            store.update(f"DROP SILENT GRAPH <{g}>")
            removed, added = set(), (before - removed) | added
        self._delete(g, sorted(removed))
        if len(added) > SMALL_WRITE:
            store.bulk_load_nquads([b"\n".join(added) + b"\n"])
        elif added:  # a bulk load costs ~0.3 s whatever its size; a small transaction much less
            store.load_nquads(b"\n".join(added) + b"\n")


@dataclass
class _Context:
    """What every stratum of one run shares."""

    values: dict
    prev: RunState
    added: list  # asserted graphs new since the last run
    gone: set  # asserted graphs gone since the last run
    state: StateStore
    context: list = field(default_factory=list)  # the graphs that state the rules' `# context:` facts
    queries: dict = field(default_factory=dict)  # rule id -> the checked text it runs
    upstream: dict = field(default_factory=dict)  # partitioned rule id -> the derived graphs it reads
    asserted: set = field(default_factory=set)  # every asserted graph (and digest) this run sees
    #: rule id -> the quads its run this time added and removed (None: not known, or too many).
    changes: dict = field(default_factory=dict)

    def upstream_rules(self, rule_id: str) -> list[str]:
        """The ids of the rules whose derived graphs the partitioned rule `rule_id` reads."""
        return [g[len(DERIVED):] for g in self.upstream[rule_id]]

    @property
    def delta_graphs(self) -> list:
        """What a delta run reads: the new graphs, and the graphs of the context it reads in them."""
        return self.added + [g for g in self.context if g not in set(self.added)]


def _change(new: set[bytes], gone: set[bytes]) -> set[bytes] | None:
    """What a run added and removed, for the partitioned rules downstream; None past
    part.MAX_CHANGES (they then run in full)."""
    return new | gone if len(new) + len(gone) <= part.MAX_CHANGES else None


def _recursive(stratum: list[Analysed]) -> bool:
    """True when a rule of the stratum reads what the stratum writes (it needs another round)."""
    writes = set().union(*(a.writes for a in stratum))
    return any(keys_meet(a.reads | a.negative, writes) for a in stratum)
