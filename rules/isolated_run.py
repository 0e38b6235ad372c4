"""`luma rules run` on the embedded store in a child process: no network, bounded in time and
memory, and the derived graphs as they were when a run is stopped.

Rule files are untrusted like queries (DESIGN §8). Their text is checked as a query's is
(rules/analysis.py: no SERVICE, no update, no escapes); this is the second wall and the bound,
as kb/store/isolated_query.py is for `luma kb query`. The child

* installs the no-network filter (kb/store/sandbox.py) before it opens the store, so a rule that
  passed every check still cannot open an IPv4/IPv6 socket;
* opens the store itself (the parent keeps the project lock and lets go of the store meanwhile)
  and runs under RLIMIT_DATA = what it holds after opening + the memory limit; Oxigraph cannot
  cap what a query allocates, and a three-way product ended the process in a Rust panic;
* is killed with its process group after `timeout` seconds: Oxigraph cannot cancel a query.

A run that does not finish (stopped, out of memory, an error) may have written part of the
derived graphs. The parent then puts every derived graph and the rules' cache token back as
they were, from a RocksDB checkpoint it took just before the run (kb/store/access.py's read snapshot,
also what readers read meanwhile); where the run had begun to write the rules' cache, it clears
the token instead, so the next run starts from the store (rules/state.py). A run refused before
it wrote anything (a rule file, a parameter) needs neither. The child is started before the
parent opens the knowledge base, so that its imports (rdflib, networkx: ~0.7 s) overlap the
parent's; it dies with the parent.

An endpoint (LUMA_KB_URL=http…) evaluates rules itself: there the text checks are the guard and
the HTTP timeout the bound. An in-memory store lives in one process: its rules run in it.

Usage: `python -m luma.rules.isolated_run`, with a JSON spec on stdin.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from luma.errors import (BadParam, BelowFloor, ConfigError, ContractError, HardwareError, LumaError, QueryError,
                         QueryRefused, RuleError, StateError, StoreBusy, StoreError, TrustError)
from luma.kb.store import access
from luma.kb.store.isolated_query import kill_group, last_json, vm_data
from luma.kb.store.base import mib
from luma.kb.store.sandbox import deny_network
from luma.kb.store.embedded import EmbeddedStore
from luma.kb.vocab import ID
from luma.rules import exploratory as explore
from luma.rules.run_report import RunReport
from luma.rules.state import DERIVED, LOOKUP_MAX, LedgerRows, StateStore, cached_through
from luma.settings import Settings

#: The node whose facts (in the default graph) are the rules' cache token (rules/state.py).
_RULES = ID + "rules"
#: What the child prints when Rust's allocator gives up (then it aborts).
_RUST_OOM = "memory allocation of"
#: Errors the child may report, by class name (anything else arrives as a StoreError).
_ERRORS = {cls.__name__: cls for cls in (RuleError, BadParam, BelowFloor, QueryError, QueryRefused, StoreError,
                                         StoreBusy, ConfigError, ContractError, StateError, HardwareError, TrustError)}


@dataclass(frozen=True)
class RunLimits:
    """What one rule run may use: seconds (None: no limit), bytes of memory, and whether it may
    run at all without the network sandbox (`Settings.require_sandbox`)."""

    timeout: float | None
    memory_bytes: int
    require_sandbox: bool = False

    @classmethod
    def of(cls, settings: Settings, timeout: float | None = None, memory_bytes: int | None = None) -> "RunLimits":
        """The project's limits (LUMA_RULES_TIMEOUT, LUMA_RULES_MEMORY), with the caller's instead
        where given."""
        seconds = settings.rules_timeout if timeout is None else timeout
        return cls(seconds or None, settings.rules_memory if memory_bytes is None else memory_bytes,
                   settings.require_sandbox)


def runs_isolated(settings: Settings) -> bool:
    """Whether rule runs on this project's store go to a child process (the embedded on-disk store)."""
    return settings.kb_url.startswith("oxigraph:")


class RuleProcess:
    """A child process that will run the rule set once; start it early (`start`), before the
    knowledge base is opened, so that its imports overlap the parent's."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None

    def start(self) -> "RuleProcess":
        if self._proc is None:
            self._proc = subprocess.Popen([sys.executable, "-m", "luma.rules.isolated_run", str(os.getpid())],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          start_new_session=True)
        return self

    def close(self) -> None:
        """Stop the child if it is still there (a run that never happened, an interrupted one)."""
        if self._proc is not None and self._proc.poll() is None:
            kill_group(self._proc)
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr) if self._proc else ():
            if stream is not None and not stream.closed:
                stream.close()

    def __enter__(self) -> "RuleProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, limits: RunLimits, spec: dict) -> dict:
        """Hand the job `spec` to the child and wait for its status (at most `limits.timeout` s)."""
        self.start()
        payload = json.dumps({**spec, "memory_bytes": limits.memory_bytes,
                              "require_sandbox": limits.require_sandbox}).encode()
        try:
            stdout, stderr = self._proc.communicate(payload, timeout=limits.timeout)
        except subprocess.TimeoutExpired:
            kill_group(self._proc)
            return {"stopped": "timeout"}
        except BaseException:
            kill_group(self._proc)
            raise
        status = last_json(stdout)
        if self._proc.returncode == 0 and "report" in status:
            return status
        err = stderr.decode(errors="replace")
        if status.get("error"):
            return status
        if _RUST_OOM in err or self._proc.returncode == -signal.SIGABRT:
            return {"stopped": "memory"}
        last = err.strip().splitlines()[-1][:300] if err.strip() else f"exit status {self._proc.returncode}"
        return {"error": {"class": "StoreError", "message": f"the rule run's process failed: {last}"}}


def run_rules(kb, limits: RunLimits, overrides: dict[str, str] | None = None, *, full: bool = False,
              workers: int | None = None, exploratory: bool = False, process: RuleProcess | None = None) -> RunReport:
    """Bring the derived graphs up to date (`Engine.run`; with `exploratory`, on the copy
    rules/exploratory.py makes), on the embedded store in a sandboxed, bounded child process.
    `kb` is a writer's KnowledgeBase (it holds the project lock). On any failure the derived
    graphs are put back as the run found them and the error is raised."""
    overrides = overrides or {}
    store = kb.store
    if not (isinstance(store, EmbeddedStore) and store.path is not None and not store.read_only):
        if process is not None:
            process.close()
        return _run_here(kb, overrides, full, workers, exploratory)
    home, path = Path(kb.settings.home), store.path
    cache = home / "cache" / "rules"  # the engine's default (rules/engine.py)
    # The state to go back to: a checkpoint of the store as it is now (hard links: milliseconds).
    snapshot = None if exploratory else access.publish_snapshot(store.raw, home)
    cache_before = _listing(cache)
    spec = {"path": str(path), "settings": _settings_out(kb.settings), "overrides": overrides, "full": full,
            "workers": workers, "exploratory": exploratory, "ledger": None if full else _new_records(kb, cache)}
    store.close()  # one process may open the store for writing: the child, while it runs
    process = process or RuleProcess()
    try:
        with process:
            status = process.run(limits, spec)
    except BaseException:
        kb.store = EmbeddedStore(path)
        _put_back(kb.store, home, snapshot, cache, cache_before, exploratory)
        raise
    kb.store = EmbeddedStore(path)
    if "report" in status:
        return RunReport.from_json(status["report"])
    if status.get("written") is False:  # refused before anything was written (a rule file, a parameter)
        raise _failure(status, limits, None)
    undone = _put_back(kb.store, home, snapshot, cache, cache_before, exploratory)
    raise _failure(status, limits, undone)


def _new_records(kb, cache: Path) -> dict | None:
    """The ledger's records since the last run, for the child (which reaches no database server)
    to learn its new graphs from (rules/state.py); None when there is no last run or too many."""
    since = cached_through(cache)
    if since is None:
        return None
    rows = kb.ledger.hashes_after(since, LOOKUP_MAX + 1)
    if len(rows) > LOOKUP_MAX:
        return None
    return {"since": since, "rows": [[i, h] for i, h, _ in rows]}


def _failure(status: dict, limits: RunLimits, undone: str | None) -> LumaError:
    stopped = status.get("stopped")
    if stopped == "timeout":
        return RuleError(f"the rule run took longer than {limits.timeout:g} s and was stopped (its time limit: "
                         f"LUMA_RULES_TIMEOUT); {undone}", field="timeout")
    if stopped == "memory" or status["error"].get("class") == "memory":
        return RuleError(f"the rule run needed more than {mib(limits.memory_bytes)} of memory and was stopped "
                         f"(its memory limit: LUMA_RULES_MEMORY); {undone}", field="memory")
    err = status["error"]
    cls = _ERRORS.get(err.get("class"), StoreError)
    message = err.get("message", "the rule run failed")
    if undone and not issubclass(cls, BadParam):  # a usage error changed nothing: nothing to say about it
        message = f"{message} ({undone})"
    return cls(message, source=err.get("source"), field=err.get("field"))


def _run_here(kb, overrides: dict, full: bool, workers: int | None, exploratory: bool) -> RunReport:
    """The run in this process (the engine imported here, not by the parent of a child)."""
    # rdflib's algebra (~0.7 s): only the process that runs the rules loads the engine
    from luma.rules.engine import Engine

    if exploratory:
        return explore.run(kb, overrides, workers=workers)
    return Engine(kb).run(overrides, full=full, workers=workers)


def _listing(folder: Path) -> dict:
    """The rules' cache files (name, size, modification time): what a run's commit rewrites."""
    try:
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}
    except OSError:
        return {}


def _put_back(store: EmbeddedStore, home: Path, snapshot: Path | None, cache: Path, cache_before: dict,
              exploratory: bool) -> str:
    """Undo what a failed run wrote; returns what the user is told about the derived facts."""
    if exploratory:  # the project's KB was only read; the half-made copy goes
        shutil.rmtree(home / explore.FOLDER, ignore_errors=True)
        return "the exploratory copy was removed"
    restored = False
    if snapshot is not None:
        try:
            _restore_derived(store, snapshot / "kb")
            restored = True
        except (OSError, ValueError, RuntimeError, SyntaxError, LumaError):
            pass
    if not restored or _listing(cache) != cache_before:
        # The cache no longer matches what the store holds: the next run reads the store instead.
        StateStore(store, cache).begin()
    if restored:
        return "the derived facts are as they were before the run"
    return "the derived facts may be incomplete until the next `luma rules run`, which recomputes them"


def _restore_derived(store: EmbeddedStore, snapshot: Path) -> None:
    """Every derived graph and the rules' token as the checkpoint at `snapshot` holds them: all
    that a rule run writes. The token goes first and comes back last (one transaction), so a
    restore that is itself cut short leaves no valid cache over half-restored graphs."""
    store.update(f"DELETE WHERE {{ <{_RULES}> ?p ?o }}")
    rows = store.query("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }", union=False, results="tsv").body
    for line in rows.splitlines()[1:]:
        graph = line.decode().strip()[1:-1]
        if graph.startswith(DERIVED):
            store.update(f"DROP SILENT GRAPH <{graph}>")
    saved = ox.Store.read_only(str(snapshot))
    derived = (q for q in saved.quads_for_pattern(None, None, None, None)
               if not isinstance(q.graph_name, ox.DefaultGraph) and q.graph_name.value.startswith(DERIVED))
    store.bulk_load_nquads([ox.serialize(derived, format=ox.RdfFormat.N_QUADS) or b""])
    token = saved.quads_for_pattern(ox.NamedNode(_RULES), None, None, ox.DefaultGraph())
    store.load_nquads(ox.serialize(token, format=ox.RdfFormat.N_QUADS) or b"")
    del saved


def _settings_out(settings: Settings) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(settings), default=str))


def _settings_in(data: dict) -> Settings:
    return Settings(**{**data, "home": Path(data["home"]),
                       "file_limits": tuple(tuple(pair) for pair in data.get("file_limits", ()))})


# -- the child ---------------------------------------------------------------------------------


@dataclass
class _Project:
    """What the engine needs of a knowledge base: its store, settings and (when the parent read
    them) the ledger's records since the last run."""

    store: object
    settings: Settings
    ledger: LedgerRows | None = None


def _error_out(exc: LumaError) -> dict:
    return {"class": type(exc).__name__, "message": exc.message, "source": exc.source, "field": exc.field}


def _child(spec: dict) -> dict:
    installed, why = deny_network()  # before the store starts a thread
    if not installed and spec.get("require_sandbox"):
        return {"error": {"class": "StoreError", "message": f"no network sandbox: {why}"}}
    settings = _settings_in(spec["settings"])
    try:
        store = EmbeddedStore(Path(spec["path"]))
    except LumaError as exc:
        return {"error": _error_out(exc)}
    resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + spec["memory_bytes"], resource.RLIM_INFINITY))
    from luma.rules.engine import Engine  # main() imported it already; the parent never does

    rows = spec.get("ledger")
    kb, written = _Project(store, settings, LedgerRows(rows["since"], rows["rows"]) if rows else None), False
    try:
        if spec["exploratory"]:
            written = True  # the copy
            report = explore.run(kb, spec["overrides"], workers=spec["workers"])
        else:
            engine = Engine(kb)  # loads and checks every rule file; nothing is written before this
            written = True
            report = engine.run(spec["overrides"], full=spec["full"], workers=spec["workers"])
        store.close()
    except LumaError as exc:
        return {"error": _error_out(exc), "written": written}
    except MemoryError:
        return {"error": {"class": "memory"}}
    except Exception as exc:  # noqa: BLE001 - pyoxigraph's OSError/ValueError/RuntimeError: one line
        return {"error": {"class": "StoreError", "message": f"the rule run failed: {type(exc).__name__}: {exc}"}}
    return {"report": report.to_json()}


def _die_with_parent(parent: int) -> None:
    """Be killed when the parent dies (Linux): its project lock is what keeps other writers out
    while this process writes, and nobody else would put the derived graphs back."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's kill at its time-out stands alone
        pass
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)


def main() -> int:
    _die_with_parent(int(sys.argv[1]))
    # The engine's imports (rdflib's algebra, networkx: ~0.7 s) now, while the parent opens the KB.
    import luma.rules.engine  # noqa: F401 - preloaded in the child only (the parent never loads the engine)
    spec = json.loads(sys.stdin.buffer.read())  # the parent sends it once the store is free
    status = _child(spec)
    # Lift the memory limit first: writing the status line must not be what fails.
    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    print(json.dumps(status), flush=True)
    return 0 if "report" in status else 1


if __name__ == "__main__":
    sys.exit(main())
