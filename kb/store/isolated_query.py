"""A user's query in a child process of its own: bounded in time, memory and answer size, with
no network.

Oxigraph cannot cancel a running query nor cap what it allocates, and a three-way cartesian
product with ORDER BY grew to 5 GB in-process. So `luma kb query` on the embedded store runs the
query in a child that

* installs the no-network filter first (kb/store/sandbox.py: no socket can reach anything, whatever
  the query says);
* opens the store read-only (the parent holds the project's read lock, so nothing writes it);
* runs under RLIMIT_DATA = what it holds after opening + the memory limit (an allocation past it
  ends the child; Rust aborts, Python raises MemoryError) and RLIMIT_FSIZE = the answer limit;
* streams the answer to a spool file, never holding it whole.

The parent waits `timeout` seconds, then kills the child's process group: the query stops, its
memory is returned. Usage: `python -m luma.kb.store.isolated_query` with a JSON spec on stdin.

A fresh interpreter that imports the store takes ~60 ms, most of a page of a named query. A
command that knows it will run one query (`luma kb query`) calls `prestart()` first: the child
starts then, loads its modules while the parent checks the query and opens the KB, and waits
for its spec on stdin; everything it does with the spec (sandbox, limits, store) is as above.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from luma.errors import QueryError, QueryTimeout, StoreError
from luma.kb.store.base import QueryLimits, QueryOutput, answer_message, mib
from luma.kb.store.sandbox import deny_network

#: What the child prints when Rust's allocator gives up (then it aborts).
_RUST_OOM = "memory allocation of"


#: A child started ahead of its query by `prestart`, waiting for its spec (at most one).
_waiting: list[subprocess.Popen] = []


def _spawn() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "luma.kb.store.isolated_query"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def prestart() -> None:
    """Start the next query's child now, so its start-up overlaps the caller's own work; the next
    `run_isolated` hands it its query. Unused, it is killed when the process exits."""
    if not _waiting:
        _waiting.append(_spawn())


def _take() -> subprocess.Popen:
    """The waiting child if it is still alive, else a new one."""
    while _waiting:
        proc = _waiting.pop()
        if proc.poll() is None:
            return proc
        kill_group(proc)
    return _spawn()


@atexit.register
def _discard_waiting() -> None:
    while _waiting:
        kill_group(_waiting.pop())


def run_isolated(store_path: Path, text: str, spool: Path, limits: QueryLimits, *, results: str = "json",
                 union: bool = True, default_graphs: list[str] | None = None,
                 named_graphs: list[str] | None = None):
    """Run one checked read-only query on the on-disk store at `store_path` in a child process;
    the answer is spooled to a file under `spool`. Returns a QueryOutput."""
    spool.mkdir(parents=True, exist_ok=True)
    out = spool / f"answer-{os.getpid()}-{id(text):x}"
    spec = {"path": str(store_path), "query": text, "results": results, "union": union,
            "default_graphs": default_graphs, "named_graphs": named_graphs, "out": str(out),
            "memory_bytes": limits.memory_bytes, "answer_bytes": limits.answer_bytes,
            "require_sandbox": limits.require_sandbox}
    proc = _take()
    try:
        stdout, stderr = proc.communicate(json.dumps(spec).encode(), timeout=limits.timeout or None)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out.unlink(missing_ok=True)
        raise QueryTimeout(f"query ran longer than {limits.timeout:g} s and was stopped") from None
    except BaseException:
        kill_group(proc)
        out.unlink(missing_ok=True)
        raise
    status = last_json(stdout)
    if proc.returncode == 0 and status.get("kind"):
        return QueryOutput(status["kind"], status["media_type"], file=out)
    out.unlink(missing_ok=True)
    err = stderr.decode(errors="replace")
    if status.get("error"):
        cls = {"syntax": QueryError, "answer-size": QueryError, "memory": QueryError}.get(status.get("class"), StoreError)
        raise cls(status["error"], field="memory" if status.get("class") == "memory" else None)
    if _RUST_OOM in err or proc.returncode == -signal.SIGABRT:
        raise QueryError(_memory_message(limits), field="memory")
    if proc.returncode == -signal.SIGXFSZ:
        raise QueryError(answer_message(limits))
    last = err.strip().splitlines()[-1][:300] if err.strip() else f"exit status {proc.returncode}"
    raise StoreError(f"the query process failed: {last}")


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a child started with start_new_session=True, with every process it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def last_json(stdout: bytes) -> dict:
    """The last line of a child's output that is a JSON object (its status), or {}."""
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _memory_message(limits: QueryLimits) -> str:
    return (f"the query needed more than {mib(limits.memory_bytes)} of memory and was stopped "
            "(its memory limit: LUMA_QUERY_MEMORY)")


# -- the child ---------------------------------------------------------------------------------


def vm_data() -> int:
    """What this process holds of RLIMIT_DATA now (VmData), in bytes."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(spec: dict) -> dict:
    import resource

    installed, why = deny_network()  # before the engine starts a thread
    if not installed and spec.get("require_sandbox"):
        return {"error": f"no network sandbox: {why}", "class": "store"}
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (spec["answer_bytes"], spec["answer_bytes"]))
    import pyoxigraph as ox

    try:
        store = ox.Store.read_only(spec["path"])
    except OSError as exc:
        return {"error": f"cannot open the knowledge base: {exc}", "class": "store"}
    resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + spec["memory_bytes"], resource.RLIM_INFINITY))
    dataset: dict = {"use_default_graph_as_union": spec["union"]}
    if spec["default_graphs"] is not None:
        dataset = {"default_graph": [ox.NamedNode(g) for g in spec["default_graphs"]]}
    if spec["named_graphs"] is not None:
        dataset["named_graphs"] = [ox.NamedNode(g) for g in spec["named_graphs"]]
    limits = QueryLimits(None, spec["memory_bytes"], spec["answer_bytes"])
    try:
        answer = store.query(spec["query"], **dataset)
        if isinstance(answer, ox.QueryTriples):
            kind, fmt = "graph", ox.RdfFormat.N_TRIPLES
        else:
            kind = "ask" if isinstance(answer, ox.QueryBoolean) else "select"
            fmt = {"json": ox.QueryResultsFormat.JSON, "csv": ox.QueryResultsFormat.CSV,
                   "tsv": ox.QueryResultsFormat.TSV, "xml": ox.QueryResultsFormat.XML}[spec["results"]]
        answer.serialize(spec["out"], format=fmt)
    except SyntaxError as exc:
        return {"error": f"invalid query: {exc}", "class": "syntax"}
    except MemoryError:
        return {"error": _memory_message(limits), "class": "memory"}
    except OSError as exc:
        if exc.errno == 27 or "File too large" in str(exc):  # EFBIG
            return {"error": answer_message(limits), "class": "answer-size"}
        return {"error": f"query failed: {exc}", "class": "store"}
    return {"kind": kind, "media_type": fmt.media_type}


def main() -> int:
    spec = json.loads(sys.stdin.buffer.read())
    status = _child(spec)
    import resource

    # Lift the memory limit first: writing the status line must not be what fails.
    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print(json.dumps(status), flush=True)
    return 0 if "kind" in status else 1


if __name__ == "__main__":
    sys.exit(main())
