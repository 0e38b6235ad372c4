"""`luma kb bench`: ingest N synthetic PEX-chain records end to end, run the rules, and time the
named queries.

Each size runs in a fresh child process (so peak memory is per size) against a fresh project:
SQLite ledger + embedded on-disk Oxigraph. Baselines measured in the same child on the same
triples: (1) a raw pyoxigraph `bulk_load` of the exported N-Quads into a fresh on-disk store,
(2) rdflib's in-memory Dataset (parse + its own SPARQL engine) where that finishes in time.
qualified-boundaries is also timed as a user pages and exports it: the first page (`--limit
100`) and the whole answer as CSV (rows/s), in the store and through `luma kb query`'s isolated
query process (which adds its start-up). The child that ingests and queries is
rules/pipeline_bench_child.py; the rdflib baseline's child is this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from luma.kb.query.named import named_queries
from luma.kb.records.dimensions import ontology_files


def rss_mb() -> float:
    """This process's peak resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_rdflib(workdir: Path, per_query_timeout: float) -> dict:
    """Run in a child process: rdflib's in-memory Dataset on the same N-Quads."""
    import rdflib  # rdflib's SPARQL engine is only this baseline's

    t0 = time.perf_counter()
    ds = rdflib.Dataset(default_union=True)
    ds.parse(str(workdir / "records.nq"), format="nquads")
    for _, data in ontology_files():
        ds.graph(rdflib.URIRef("https://w3id.org/luma/id/graph/ontology")).parse(data=data, format="turtle")
    load_s = time.perf_counter() - t0
    out = {"load_s": load_s, "queries": {}, "peak_rss_mb": rss_mb()}
    for q in named_queries().values():
        box: dict = {}
        th = threading.Thread(target=_rdflib_query, args=(ds, q.sparql, box), daemon=True)
        th.start()
        th.join(per_query_timeout)
        if th.is_alive():
            out["queries"][q.name] = {"timeout_s": per_query_timeout}
            break  # the abandoned thread keeps the GIL busy; later timings would be meaningless
        out["queries"][q.name] = box
    return out


def _rdflib_query(ds, sparql: str, box: dict) -> None:
    """Time one query on rdflib into `box`: {"s", "rows"}, or {"error"} naming what rdflib raised.
    rdflib's engine refuses some standard SPARQL LUMA's store answers (GROUP_CONCAT(DISTINCT ?x)
    over rows where ?x is unbound raises NotBoundError in `capabilities`): that query's baseline
    is reported as failed and the other queries' figures still show."""
    t = time.perf_counter()
    try:
        rows = len(list(ds.query(sparql)))
    except Exception as exc:  # noqa: BLE001 - any failure of the baseline engine is a result to report
        box["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())
        return
    box.update(s=time.perf_counter() - t, rows=rows)


def run_bench(sizes: list[int], repeat: int = 5, rdflib_max: int = 10_000, rdflib_timeout: float = 120.0,
              keep: Path | None = None, progress=None) -> list[dict]:
    """Run every size in its own child process; return one result dict per size."""
    results = []
    for n in sizes:
        with scratch(f"luma-bench-{n}-", keep) as workdir:
            if progress:
                progress(f"{n} records: ingest + queries + raw bulk-load baseline")
            res = run_child("luma.rules.pipeline_bench_child", [str(n), str(workdir), str(repeat)])
            if n <= rdflib_max:
                if progress:
                    progress(f"{n} records: rdflib in-memory baseline")
                res["rdflib"] = run_child("luma.rules.pipeline_bench", [str(workdir), str(rdflib_timeout)],
                                          timeout=rdflib_timeout * 6 + 600)
            else:
                res["rdflib"] = {"skipped": f"over --rdflib-max {rdflib_max}"}
        results.append(res)
    return results


@contextlib.contextmanager
def scratch(prefix: str, keep: Path | None = None) -> Iterator[Path]:
    """A fresh work directory for one size (under `keep`, kept, when given; else in the system's
    temporary folder), removed on the way out however the run ends: a Ctrl-C used to leave a
    63 MB `/tmp/luma-bench-*` behind."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix, dir=keep))
    try:
        yield workdir
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def run_child(module: str, args: list[str], timeout: float | None = None) -> dict:
    """Run `python -m module args…` in a fresh process; the JSON on its last stdout line, or an
    {"error": …} naming the time-out or the last line of stderr."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # the rdflib baseline's child process
    print(json.dumps(child_rdflib(Path(sys.argv[1]), float(sys.argv[2]))))
