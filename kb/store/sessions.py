"""Opening the embedded store for a command: one writer at a time, readers beside it.

`KnowledgeBase.open` comes here for the embedded on-disk store (kb/store/access.py has the lock and
the read snapshots): a writer takes the project lock exclusively, catches the store up with the
ledger and publishes a snapshot of that committed state; a reader takes the lock shared and
opens the store read-only, or reads the running writer's snapshot. Endpoint stores need none of
this.
"""

from __future__ import annotations

import time
from pathlib import Path

from luma.errors import StoreBusy, StoreError
from luma.kb.store import access
from luma.kb.store.embedded import EmbeddedStore
from luma.settings import Settings

#: Seconds a reader waits for a running writer's read snapshot to appear (or the writer to end).
READER_WAIT_S = 30.0


def open_writer(cls, settings: Settings, path: Path, wait: float, sync: bool):
    """A writer's KnowledgeBase (`cls`) on the embedded store at `path`: the project lock held
    exclusively (waiting up to `wait` seconds), caught up with the ledger, a read snapshot
    published for the readers that come meanwhile."""
    lock = access.ProjectLock(settings.home)
    lock.acquire(exclusive=True, wait=wait)
    kb = None
    try:
        kb = cls(settings, store=EmbeddedStore(path))
        kb._lock = lock
        kb._catch_up(sync)
        # Readers that come while this writer works read the committed state from here.
        access.publish_snapshot(kb.store.raw, settings.home)
    except BaseException:
        kb.close() if kb is not None else lock.release()
        raise
    return kb


def open_reader(cls, settings: Settings, path: Path, wait: float | None):
    """A reader's KnowledgeBase (`cls`): the store opened read-only under the shared lock, or,
    while a writer holds the project, the snapshot it published (waiting up to `wait` seconds,
    default READER_WAIT_S, for it to appear). Repairs a writer must do first are done here when
    nobody writes."""
    wait = READER_WAIT_S if wait is None else wait
    deadline = time.monotonic() + wait
    repaired = False
    while True:
        lock = access.ProjectLock(settings.home)
        if lock.try_acquire(exclusive=False):
            kb = None
            try:
                kb = cls(settings, store=EmbeddedStore(path, read_only=True))
                kb._lock = lock
                if repaired or not kb._needs_repair():
                    return kb
            except StoreError:
                if repaired:
                    kb.close() if kb is not None else lock.release()
                    raise
            except BaseException:
                kb.close() if kb is not None else lock.release()
                raise
            # Leftovers of a crash, records the KB lacks, a new ontology, no KB yet: a
            # writer's job, done here if nobody writes (else that writer does it and we
            # read its snapshot).
            kb.close() if kb is not None else lock.release()
            try:
                open_writer(cls, settings, path, 0.0, True).close()
                repaired = True
                continue
            except StoreBusy:
                pass
        lease = access.lease_snapshot(settings.home)
        if lease is not None and lease.writer.get("pid") == access.holder_info(settings.home).get("pid"):
            kb = cls(settings, store=EmbeddedStore(lease.path, read_only=True))
            kb._lease = lease
            return kb
        if lease is not None:
            lease.release()
        if time.monotonic() >= deadline:
            raise StoreBusy(access.busy_message(settings.home, wait), source=str(path))
        time.sleep(0.05)
