"""The record graphs of an ingest that is not committed yet, so a failure can take them back.

An ingest loads its record graphs into the store *while* it still projects later records and
writes the ledger (the bulk loader releases the GIL, so the two cores both work). Until the
ledger commits, those graphs are speculative. Each ingest keeps its own marker file
(`pending-ingest-<pid>-<nonce>.jsonl` in the project directory): the batch's record hashes are
written to it (synced to disk) before they load, and

* if the ingest fails in-process, it drops the graphs it loaded (`PendingIngest.rollback`);
* if it is killed, a later open finds the marker and drops every graph of the batch the ledger
  does not hold (`recover`).

A marker is locked (flock) by its ingest from before it is visible until it is removed, and the
kernel releases the lock only when that process is gone. `recover` touches only markers it can
lock: a live ingest's marker is never taken for a crash leftover, whichever process opens the
KB meanwhile (on an endpoint KB any number may).

Shared entity descriptions load in the same stream. The marker lists the subjects each chunk
described first in its batch; a rollback deletes those that nothing refers to once the batch's
record graphs are gone. An entity the store held before the batch is still referred to by the
record that brought it, so it stays.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from luma.errors import StoreError
from luma.kb.store.partner_graphs import partner_graphs_of
from luma.kb.store.base import QuadStore
from luma.kb.vocab import ENTITY_GRAPH, record_graph

#: The marker of earlier versions (one per project, unlocked): recovered like a dead ingest's.
LEGACY_MARKER = "pending-ingest.json"
_PREFIX = "pending-ingest-"
#: DROP GRAPH operations per SPARQL update (~0.5-0.7 ms per graph on disk here).
_DROPS_PER_UPDATE = 500


class PendingIngest:
    """The marker of one unfinished ingest, locked for as long as the ingest runs."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.path: Path | None = None
        self._fd: int | None = None
        self.hashes: list[str] = []
        self.subjects: list[str] = []

    def note(self, hashes: list[str], subjects: list[str]) -> None:
        """Durably add a chunk before any of it is loaded: its record hashes and the subjects of
        the entity descriptions it writes first. One JSON line per chunk: a line torn by a crash
        belongs to a chunk that never loaded."""
        if self._fd is None:
            self._create()
        os.write(self._fd, (json.dumps({"record_hashes": hashes, "entity_subjects": subjects}) + "\n").encode())
        os.fsync(self._fd)
        self.hashes += hashes
        self.subjects += subjects

    def _create(self) -> None:
        # Locked under a temporary name, then renamed: no process ever sees it unlocked.
        import secrets  # writers only: a reader checks for markers, it never makes one

        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(6)}.jsonl"
        tmp = self.home / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.path = self.home / name
        os.replace(tmp, self.path)
        _sync_dir(self.home)
        self._fd = fd

    def rollback(self, store: QuadStore, ledger) -> None:
        """Drop what this batch loaded and the ledger does not hold, then the marker."""
        committed = ledger.existing_hashes(self.hashes) if self.hashes else set()
        drop = [h for h in self.hashes if h not in committed]
        if drop:
            drop_graphs(store, drop)
            drop_unreferenced(store, self.subjects)
        self.finish()

    def finish(self) -> None:
        """Remove the marker (the batch is committed, or rolled back) and release it."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            _sync_dir(self.home)
        self.release()

    def release(self) -> None:
        """Close the marker without removing it, as a killed process would."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def markers(home: Path) -> list[Path]:
    """Every pending-ingest marker in the project directory, live or abandoned."""
    home = Path(home)
    found = sorted(home.glob(f"{_PREFIX}*.jsonl")) if home.is_dir() else []
    legacy = home / LEGACY_MARKER
    return found + ([legacy] if legacy.is_file() else [])


def read_marker(path: Path) -> tuple[list[str], list[str]] | None:
    """(record hashes, entity subjects) of a marker, or None when it is gone."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return None
    hashes: list[str] = []
    subjects: list[str] = []
    for i, line in enumerate(lines):
        try:
            entry = json.loads(line)
            hashes += [str(h) for h in entry["record_hashes"]]
            subjects += [str(s) for s in entry["entity_subjects"]]
        except (ValueError, KeyError, TypeError) as exc:
            if i == len(lines) - 1:
                break  # torn by a crash: written, never loaded
            raise StoreError(
                f"unreadable pending-ingest marker, line {i + 1} ({exc}); run `luma kb rebuild`", source=str(path)
            ) from None
    return hashes, subjects


def drop_graphs(store: QuadStore, hashes: Iterable[str]) -> None:
    """Remove the record graphs of these records (absent ones are skipped), partner graphs too."""
    hashes = list(hashes)
    graphs = [record_graph(h) for h in hashes] + partner_graphs_of(store, hashes)
    for i in range(0, len(graphs), _DROPS_PER_UPDATE):
        ops = [f"DROP SILENT GRAPH <{g}>" for g in graphs[i : i + _DROPS_PER_UPDATE]]
        store.update(" ;\n".join(ops))


def drop_unreferenced(store: QuadStore, subjects: list[str]) -> int:
    """Delete the entity descriptions among `subjects` that nothing refers to any more; repeat
    until none goes (a machine state goes first, then the levels only it referred to).

    Sound because every committed entity is referred to by a committed record graph or by a
    committed entity, and entity references never form cycles.
    """
    left = list(dict.fromkeys(subjects))
    deleted = 0
    while left:
        gone: list[str] = []
        for i in range(0, len(left), _DROPS_PER_UPDATE):
            values = " ".join(f"<{s}>" for s in left[i : i + _DROPS_PER_UPDATE])
            rows = store.select(
                f"SELECT ?e WHERE {{ VALUES ?e {{ {values} }} FILTER NOT EXISTS {{ GRAPH ?g {{ ?s ?p ?e }} }} }}",
                union=False,
            )
            orphans = [r["e"] for r in rows]
            if orphans:
                values = " ".join(f"<{s}>" for s in orphans)
                store.update(
                    f"DELETE {{ GRAPH <{ENTITY_GRAPH}> {{ ?e ?p ?o }} }} "
                    f"WHERE {{ VALUES ?e {{ {values} }} GRAPH <{ENTITY_GRAPH}> {{ ?e ?p ?o }} }}"
                )
            gone += orphans
        if not gone:
            break
        deleted += len(gone)
        gone_set = set(gone)
        left = [s for s in left if s not in gone_set]
    return deleted


def recover(home: Path, store: QuadStore, ledger) -> int:
    """Undo the speculative part of every abandoned batch; return the record graphs dropped.

    Abandoned = its marker can be locked (the ingest that held it is gone). The ledger says
    which of the batch's records it holds (all or none, as it commits in one transaction):
    those stay, the next sync completes them; the others' graphs go, and with them the entity
    descriptions nothing refers to any more.
    """
    dropped = 0
    for path in markers(home):
        with _abandoned(path) as marker:
            if marker is None:
                continue
            hashes, subjects = marker
            committed = ledger.existing_hashes(hashes)
            drop = [h for h in hashes if h not in committed]
            if drop:
                drop_graphs(store, drop)
                drop_unreferenced(store, subjects)
            path.unlink(missing_ok=True)
            _sync_dir(Path(home))
            dropped += len(drop)
    return dropped


@contextmanager
def _abandoned(path: Path):
    """The marker's content while holding its lock, or None when a live ingest holds it (or it
    went meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None  # its ingest is running
            return
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        yield read_marker(path) if same else None
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
