"""The record graphs of an ingest that is not committed yet, so a failure can take them back.

An ingest loads its record graphs into the store *while* it still projects later records and
writes the ledger (the bulk loader releases the GIL, so the two cores both work). Until the
ledger commits, those graphs are speculative: the batch's record hashes are written to a marker
file first (synced to disk), and

* if the ingest fails in-process, it drops the graphs it loaded (`rollback`);
* if it is killed, the next open finds the marker and drops every graph of the batch the ledger
  does not hold (`recover`).

Shared entity descriptions load in the same stream. The marker lists the subjects each chunk
described first in its batch; a rollback deletes those that nothing refers to once the batch's
record graphs are gone. An entity the store held before the batch is still referred to by the
record that brought it, so it stays.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from luma.errors import StoreError
from luma.kb.scope import partner_graphs_of
from luma.kb.stores.base import QuadStore
from luma.kb.vocab import ENTITY_GRAPH, record_graph

MARKER = "pending-ingest.json"
#: DROP GRAPH operations per SPARQL update (~0.5-0.7 ms per graph on disk here).
_DROPS_PER_UPDATE = 500


def marker_path(home: Path) -> Path:
    return Path(home) / MARKER


def note(home: Path, hashes: list[str], subjects: list[str]) -> None:
    """Durably add a chunk to the batch's marker before any of it is loaded: its record hashes
    and the subjects of the entity descriptions it writes first. One JSON line per chunk: a
    line torn by a crash belongs to a chunk that never loaded."""
    path = marker_path(home)
    with open(path, "a") as fh:
        fh.write(json.dumps({"record_hashes": hashes, "entity_subjects": subjects}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    _sync_dir(path.parent)


def read_marker(home: Path) -> tuple[list[str], list[str]] | None:
    """(record hashes, entity subjects) of an unfinished batch, or None when there is none."""
    path = marker_path(home)
    try:
        lines = path.read_text().splitlines()
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


def clear_marker(home: Path) -> None:
    try:
        marker_path(home).unlink()
    except FileNotFoundError:
        return
    _sync_dir(Path(home))


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
    """Undo the speculative part of an unfinished batch; return the number of record graphs dropped.

    The ledger says which of the batch's records it holds (all or none, as it commits in one
    transaction): those stay, the next sync completes them; the others' graphs go, and with
    them the entity descriptions nothing refers to any more.
    """
    marker = read_marker(home)
    if marker is None:
        return 0
    hashes, subjects = marker
    committed = ledger.existing_hashes(hashes)
    drop = [h for h in hashes if h not in committed]
    if drop:
        drop_graphs(store, drop)
        drop_unreferenced(store, subjects)
    clear_marker(home)
    return len(drop)


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
