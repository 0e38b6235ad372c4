"""`luma rules bench`: the rule set to fixpoint on N synthetic chains, a re-run on unchanged data,
an incremental run after adding more chains, and rdflib's in-memory store running the same rule
set where it finishes in time. Every size runs in a fresh child process and project.

A share of the chains (SOFTWARE_SHARE) names the software it was measured with and when, as a
sprint's chains do, so that the closed loop (stale boundaries) runs on them at scale too."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import rdflib

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations import runner_keys
from luma.kb.records.synthetic import BENCH_NOTE, mark_bench_project, write_jsonl
from luma.kb.trust import runners
from luma.rules.analysis import analyse, strata
from luma.rules.engine import Engine
from luma.rules.loader import load_all, render
from luma.rules.pipeline_bench import run_child, scratch
from luma.settings import Settings

#: Share of the synthetic chains that name their software (kb/records/synthetic.py).
SOFTWARE_SHARE = 0.3


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _runs(report) -> dict:
    return {r.rule: {"facts": r.facts, "new": r.new, "removed": r.removed, "how": r.mode,
                     "seconds": round(r.seconds, 3)}
            for r in report.runs}


def child_luma(n: int, extra: int, workdir: Path, dump: bool, repeat: int = 5) -> dict:
    home = workdir / "project"
    settings = Settings.local(home)
    # A throwaway project, marked as one: only there may synthetic chains be measured (signed by a key
    # it trusts), which the rules need to derive anything at scale.
    mark_bench_project(home)
    with KnowledgeBase.open(settings) as kb:
        signer = runners.signer(home, runner_keys.keygen(kb, "synthetic-bench").name)
    with KnowledgeBase.open(settings) as kb:
        kb.ingest([write_jsonl(workdir / "records.jsonl", n, signer=signer, software_share=SOFTWARE_SHARE)], submitter="bench")
        quads = kb.store.count()
        if dump:  # for the rdflib baseline: the same n chains, before any rule ran on them
            (workdir / "kb.nq").write_bytes(kb.store.dump("nquads"))
    out = {"records": n, "note": BENCH_NOTE, "quads": quads, "software_share": SOFTWARE_SHARE}
    with KnowledgeBase.open(settings) as kb:
        engine = Engine(kb)
        t0 = time.perf_counter()
        cold = engine.run()
        out["full_s"] = time.perf_counter() - t0
        out["full"] = _runs(cold)
        t0 = time.perf_counter()
        again = engine.run()
        out["rerun_s"] = time.perf_counter() - t0
        out["rerun_new"], out["rerun_removed"] = again.new, again.removed
    # The incremental run, `repeat` times: each adds `extra` new chains (their own seed) and brings
    # the rules up to date (Engine built anew, as `luma rules run` does). Timing on a shared host
    # is noisy, so the figure is the median with the minimum beside it, the rules of the median run.
    runs = []
    for i in range(repeat if extra else 0):
        with KnowledgeBase.open(settings) as kb:
            kb.ingest([write_jsonl(workdir / f"more-{i}.jsonl", extra, seed=8 + i, signer=signer,
                                   software_share=SOFTWARE_SHARE)], submitter="bench")
        with KnowledgeBase.open(settings) as kb:
            t0 = time.perf_counter()
            inc = Engine(kb).run()
            runs.append((time.perf_counter() - t0, _runs(inc)))
    if runs:
        ordered = sorted(runs, key=lambda r: r[0])
        median = ordered[(len(ordered) - 1) // 2]
        out["incremental_s"], out["incremental"] = median
        out["incremental_min_s"] = ordered[0][0]
        out["incremental_all_s"] = [round(r[0], 3) for r in runs]
        out["incremental_records"] = extra
    out["peak_rss_mb"] = _rss_mb()
    return out


def child_rdflib(workdir: Path) -> dict:
    """The same rules, in stratum order, by rdflib's own SPARQL engine over its in-memory Dataset."""
    ds = rdflib.Dataset(default_union=True)
    t0 = time.perf_counter()
    ds.parse(workdir / "kb.nq", format="nquads")
    for g in list(ds.graphs()):  # the derived graphs LUMA wrote: rdflib derives its own
        if str(g.identifier).startswith("https://w3id.org/luma/id/graph/derived/"):
            ds.remove_graph(g)
    out = {"parse_s": time.perf_counter() - t0, "rules": {}}
    t0 = time.perf_counter()
    for stratum in strata([analyse(r) for r in load_all()]):
        for a in stratum:
            t = time.perf_counter()
            graph = ds.graph(rdflib.URIRef(f"urn:rdflib-bench:{a.rule.id}"))
            facts = 0
            for triple in ds.query(render(a.rule)):
                graph.add(triple)
                facts += 1
            out["rules"][a.rule.id] = {"facts": facts, "seconds": round(time.perf_counter() - t, 3)}
            # What finished so far, for a run stopped at the time limit.
            (workdir / "rdflib-progress.json").write_text(json.dumps(out["rules"]))
    out["full_s"] = time.perf_counter() - t0
    return out


def run_bench(sizes: list[int], extra: int = 1000, rdflib_max: int = 1000, rdflib_timeout: float = 600,
              progress=None, repeat: int = 5) -> list[dict]:
    results = []
    for n in sizes:
        with scratch(f"luma-rules-bench-{n}-") as workdir:  # removed even on Ctrl-C
            if progress:
                progress(f"{n} chains: ingest, full run, re-run, {repeat} x +{extra} chains")
            res = _child(["luma", str(n), str(extra), str(workdir), "1" if n <= rdflib_max else "0", str(repeat)])
            if n <= rdflib_max and "error" not in res:
                if progress:
                    progress(f"{n} chains: rdflib in-memory")
                res["rdflib"] = _child(["rdflib", str(workdir)], timeout=rdflib_timeout)
                progress_file = workdir / "rdflib-progress.json"
                if "error" in res["rdflib"] and progress_file.exists():
                    res["rdflib"]["rules_finished"] = json.loads(progress_file.read_text())
            else:
                res["rdflib"] = {"skipped": f"over --rdflib-max {rdflib_max}"}
        results.append(res)
    return results


def _child(args: list[str], timeout: float | None = None) -> dict:
    return run_child("luma.rules.engine_bench", args, timeout)


if __name__ == "__main__":
    if sys.argv[1] == "luma":
        print(json.dumps(child_luma(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), sys.argv[5] == "1",
                                    int(sys.argv[6]))))
    else:
        print(json.dumps(child_rdflib(Path(sys.argv[2]))))
