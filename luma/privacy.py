"""Everything under the project directory is private to its owner (DESIGN §8): the ledger, the
KB, its snapshots and locks, sprint and pilot folders, partner records (often under NDA), keys
and caches are created mode 0600 (files) and 0700 (folders).

SQLite and RocksDB (the embedded Oxigraph store) create their own files — journals, WAL, SST
files, long after the project was opened — with the process umask, so setting modes file by
file cannot cover them. LUMA therefore runs with umask 0o077 (`private_umask`) from the moment a
command starts (cli/main.py) or the library opens a project (`KnowledgeBase.open`, a fleet node's
unit); the project directory itself is made 0700 (`make_private`). `tighten` brings an existing
project (made before this, or copied with wide modes) to owner-only: `luma kb init` runs it.

The umask is the process's, so files a command writes elsewhere (a report's `--out` folder)
are owner-only too; `chmod` them to share.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

#: Group and others get nothing: files 0600, folders 0700 (from 0666 / 0777).
PRIVATE_UMASK = 0o077
#: The permission bits `tighten` removes.
OTHERS = stat.S_IRWXG | stat.S_IRWXO


def private_umask() -> None:
    """Make every file and folder this process creates from here on owner-only."""
    os.umask(os.umask(PRIVATE_UMASK) | PRIVATE_UMASK)  # keep any stricter bits the user set


def make_private(home: str | os.PathLike) -> Path:
    """Create the project directory `home` (and missing parents) owner-only, with the private
    umask in force; an existing one keeps its mode (`tighten` changes it)."""
    private_umask()
    home = Path(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    return home


@dataclass
class Tightened:
    """What `tighten` did: how many files and folders lost group/other bits, and how many it
    could not change (another user's)."""

    changed: int = 0
    failed: int = 0

    def describe(self) -> str | None:
        """One line for the user, or None when every mode was owner-only already."""
        if not self.changed and not self.failed:
            return None
        text = f"tightened {self.changed} file(s)/folder(s) to owner-only (group and others had access)"
        if self.failed:
            text += f"; {self.failed} could not be changed (not yours: chmod go-rwx them)"
        return text


def tighten(home: str | os.PathLike) -> Tightened:
    """Remove group and other permissions from `home` and everything under it (chmod -R go-rwx),
    never following a symbolic link (its target may be anything, anywhere)."""
    out = Tightened()
    root = Path(home).resolve()  # the home may itself be a link (to a data disk): its target is the project
    if not root.is_dir():
        return out

    def fix(path: str) -> None:
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & OTHERS:
                return
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~OTHERS)
            out.changed += 1
        except FileNotFoundError:
            return  # removed meanwhile (a snapshot swept by another command)
        except OSError:
            out.failed += 1

    fix(str(root))
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            fix(os.path.join(folder, name))
    return out
