"""Who may use the embedded store when: one writer at a time, any number of readers, and
readers never wait for a writer.

Oxigraph's on-disk store (RocksDB) admits one process that writes, and a read-only open is only
defined while nobody writes (DESIGN §9). So every luma process takes a lock on
`$LUMA_HOME/kb.lock` (flock; the kernel drops it when the process dies):

* a **writer** (ingest, rules, rebuild, partner add …) takes it exclusively, waiting up to
  `--wait` seconds for readers and the writer before it to finish, then publishes a **read
  snapshot** of the store as it found it (a RocksDB checkpoint: hard links, ~2 ms at 20k
  records) in `$LUMA_HOME/kb-snapshots/`;
* a **reader** (query, explain, export, stats, reports …) takes it shared and opens the store
  read-only; when a writer holds it, the reader opens the writer's snapshot instead -- the last
  committed state, since what a running ingest loads is not committed until its ledger
  transaction is (kb/store/pending.py).

A snapshot is removed by its writer when no reader holds it (each reader holds a shared lock on
it), else by the next writer. Endpoint backends need none of this: the server serialises.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from luma.errors import StoreBusy

LOCK_FILE = "kb.lock"
SNAPSHOTS = "kb-snapshots"
_POLL_S = 0.05


class ProjectLock:
    """The flock on `$LUMA_HOME/kb.lock`: shared for readers, exclusive for the writer."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.path = self.home / LOCK_FILE
        self._fd: int | None = None
        self.exclusive = False

    def try_acquire(self, exclusive: bool) -> bool:
        """Take the lock without waiting; True when taken."""
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd, self.exclusive = fd, exclusive
        if exclusive:  # who holds it, for the messages of those who wait
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(_me()).encode(), 0)
        return True

    def acquire(self, exclusive: bool, wait: float) -> None:
        """Take the lock, waiting up to `wait` seconds; StoreError naming the holder otherwise."""
        deadline = time.monotonic() + max(wait, 0.0)
        while not self.try_acquire(exclusive):
            if time.monotonic() >= deadline:
                raise StoreBusy(busy_message(self.home, wait), source=str(self.home / "kb"))
            time.sleep(_POLL_S)

    def release(self) -> None:
        if self._fd is not None:
            if self.exclusive:
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def holder_info(home: Path) -> dict:
    """What the exclusive holder wrote into the lock file (pid, command, since), or {}."""
    try:
        info = json.loads((Path(home) / LOCK_FILE).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def holder(home: Path) -> str:
    """Who holds the project exclusively, in words ('' when nobody says)."""
    info = holder_info(home)
    if not info.get("pid"):
        return ""
    return f"pid {info['pid']} ({info.get('command', '?')}, since {info.get('since', '?')})"


def busy_message(home: Path, wait: float) -> str:
    who = holder(home)
    by = f" by {who}" if who else " by another luma process"
    waited = f" for {wait:g} s" if wait > 0 else ""
    return (f"the knowledge base is in use{by}; waited{waited or ' not at all'} -- "
            "retry when it ends, or let writers wait for it (LUMA_WAIT=SECONDS)")


def _me() -> dict:
    return {"pid": os.getpid(), "command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))[:200],
            "since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


# -- read snapshots ---------------------------------------------------------------------------


def publish_snapshot(raw_store, home: Path) -> Path | None:
    """Checkpoint the store (the writer's, before it writes) where readers will find it; sweeps
    snapshots no reader holds. Returns the snapshot folder, or None when it could not be made
    (readers then wait for the writer, as before)."""
    root = Path(home) / SNAPSHOTS
    sweep(home)
    folder = root / f"{time.time_ns():020d}-{os.getpid()}"
    try:
        folder.mkdir(parents=True)
        raw_store.backup(str(folder / "kb"))
        (folder / "ready").write_text(json.dumps(_me()))  # last: a reader only opens a complete one
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def sweep(home: Path, keep: Path | None = None) -> None:
    """Remove every snapshot that no reader holds (but `keep`)."""
    root = Path(home) / SNAPSHOTS
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if folder == keep:
            continue
        fd = _open_lock(folder)
        if fd is None:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # a reader is on it
        try:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)


def _open_lock(folder: Path) -> int | None:
    try:
        return os.open(folder / "reader.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


class SnapshotLease:
    """A reader's hold on the newest published snapshot (shared flock on it)."""

    def __init__(self, folder: Path, fd: int):
        self.folder = folder
        self.path = folder / "kb"
        self._fd: int | None = fd
        try:
            self.writer = json.loads((folder / "ready").read_text())
        except (OSError, ValueError):
            self.writer = {}

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lease_snapshot(home: Path) -> SnapshotLease | None:
    """Hold the newest complete snapshot, or None when there is none."""
    root = Path(home) / SNAPSHOTS
    if not root.is_dir():
        return None
    for folder in sorted(root.iterdir(), reverse=True):
        if not (folder / "ready").is_file():
            continue
        fd = _open_lock(folder)
        if fd is None:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # being swept
            os.close(fd)
            continue
        if not (folder / "ready").is_file():  # swept between the look and the lock
            os.close(fd)
            continue
        return SnapshotLease(folder, fd)
    return None
