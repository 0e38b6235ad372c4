"""A rule's derived quads on disk, split by subject into buckets, and the difference between
two such sets computed one bucket at a time.

A full rule run compares what the rule derives now with what its graph held: which quads to
write and delete, which results are new, changed or gone. Held as Python sets, both sides of the
qualification rule's answer cost ~0.5 GB at 100k chains and would cost ~5 GB at 1M. Here the
store writes its answer to a file, the file is split into buckets by a stable hash of each
quad's subject, and each bucket is compared with the same bucket of the old set: memory is one
bucket's worth whatever the number of chains. A subject's quads all fall in one bucket, so the
results (rules/results.py counts them per subject) add up bucket by bucket.
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from luma.kb.store.base import line_blocks
from luma.rules.results import Results

#: Bytes of quads per bucket a set aims at (each side of a compared bucket is held as a set, ~3x
#: its bytes). One bucket up to it: a set that fits is never split, which costs a pass of Python
#: over every line (the qualification rule's 1.1M lines at 100k chains: +3 s on a full run).
BUCKET_BYTES = 128 << 20
MAX_BUCKETS = 1024
_LINES = 1 << 16  # lines written per batch
_BLOCK = 1 << 22  # bytes read per block


def bucket_count(nbytes: int) -> int:
    """Buckets for a set of `nbytes` of N-Quads: a power of two, so that a set re-split for
    another count is split by the same hash."""
    k = 1
    while k < MAX_BUCKETS and nbytes > k * BUCKET_BYTES:
        k *= 2
    return k


def _bucket(line: bytes, k: int) -> int:
    # crc32, not hash(): the split must be the same in every process (hash() is salted).
    return zlib.crc32(line[:line.index(b" ")]) % k if k > 1 else 0


@dataclass
class Buckets:
    """A folder of `k` files `NNNN.nq`, each the unique N-Quads lines of its subjects."""

    folder: Path
    k: int

    def path(self, i: int) -> Path:
        return self.folder / f"{i:04d}.nq"

    def read(self, i: int) -> set[bytes]:
        try:
            data = self.path(i).read_bytes()
        except FileNotFoundError:
            return set()
        return {line for line in data.split(b"\n") if line}

    def lines(self) -> Iterator[bytes]:
        for i in range(self.k):
            yield from self.read(i)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.glob("*.nq"))

    def append(self, lines: Iterable[bytes]) -> None:
        """Add lines (not already in the set) to their buckets."""
        _route(lines, self.k, lambda i: open(self.path(i), "ab"))

    @classmethod
    def open(cls, folder: Path) -> Buckets | None:
        """The set kept in `folder`, or None when there is none (or not a whole one)."""
        try:
            k = int((folder / "k").read_text())
        except (OSError, ValueError):
            return None
        return cls(folder, k) if k >= 1 else None

    @classmethod
    def write(cls, folder: Path, lines: Iterable[bytes], k: int) -> Buckets:
        """A new set in `folder` (replaced if there) from `lines`. A line may repeat (a CONSTRUCT
        answer can state a triple twice): a bucket is read as a set."""
        out = cls._empty(folder, k)
        _route(lines, k, lambda i: open(out.path(i), "ab"))
        (folder / "k").write_text(str(k))
        return out

    @classmethod
    def from_ntriples(cls, folder: Path, path: Path, graph: str, k: int, extra: Iterable[bytes] = ()) -> Buckets:
        """A new set from an N-Triples file (each triple in `graph`) and `extra` N-Quads lines.
        With one bucket the file is rewritten a block at a time, no Python per line."""
        if k > 1:
            return cls.write(folder, chain(ntriples_as_quads(path, graph), extra), k)
        out = cls._empty(folder, 1)
        with open(out.path(0), "wb") as dst:
            for block in _quad_blocks(path, graph):
                dst.write(block)
            extra = list(extra)
            if extra:
                dst.write(b"\n".join(extra) + b"\n")
        (folder / "k").write_text("1")
        return out

    @classmethod
    def _empty(cls, folder: Path, k: int) -> Buckets:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return cls(folder, k)


def _route(lines: Iterable[bytes], k: int, opener) -> None:
    pending: dict[int, list[bytes]] = {}
    count = 0

    def flush() -> None:
        for i, chunk in pending.items():
            with opener(i) as f:
                f.write(b"\n".join(chunk) + b"\n")
        pending.clear()

    for line in lines:
        pending.setdefault(_bucket(line, k), []).append(line)
        count += 1
        if count % _LINES == 0:
            flush()
    flush()


def _quad_blocks(path: Path, graph: str) -> Iterator[bytes]:
    """An N-Triples file a block at a time, each triple made an N-Quads line in `graph`.
    Oxigraph writes one triple per line ending in " .\n", and N-Triples escapes every line
    break inside a literal, so that byte sequence ends a line and nothing else."""
    tail = f" <{graph}> .\n".encode()
    with open(path, "rb") as f:
        for block in line_blocks(f, _BLOCK):
            yield block.replace(b" .\n", tail)


def ntriples_as_quads(path: Path, graph: str) -> Iterator[bytes]:
    """The lines of an N-Triples file as N-Quads lines in `graph`, read a block at a time."""
    for block in _quad_blocks(path, graph):
        yield from (line for line in block.split(b"\n") if line)


@dataclass
class Difference:
    """What a full run changes: quads to add and remove (in files when many), and the tally."""

    facts: int = 0
    new: int = 0
    removed: int = 0
    derived: int = 0
    derived_new: int = 0
    derived_changed: int = 0
    derived_removed: int = 0
    added_file: Path | None = None
    removed_file: Path | None = None
    before_quads: int = 0

    def tally(self) -> tuple[int, int, int, int]:
        return self.derived, self.derived_new, self.derived_changed, self.derived_removed


def compare(before: Buckets, after: Buckets, results: Results, work: Path) -> Difference:
    """The difference from `before` to `after` (the same bucket count), bucket by bucket; the
    quads to add and remove go to files under `work`."""
    assert before.k == after.k
    out = Difference(added_file=work / "added.nq", removed_file=work / "removed.nq")
    with open(out.added_file, "wb") as added, open(out.removed_file, "wb") as removed:
        for i in range(after.k):
            old, now = before.read(i), after.read(i)
            new, gone = now - old, old - now
            if new:
                added.write(b"\n".join(new) + b"\n")
            if gone:
                removed.write(b"\n".join(gone) + b"\n")
            n_now, n_new, n_changed, n_removed = results.tally(old, now)
            out.facts += len(now)
            out.before_quads += len(old)
            out.new += len(new)
            out.removed += len(gone)
            out.derived += n_now
            out.derived_new += n_new
            out.derived_changed += n_changed
            out.derived_removed += n_removed
    return out


def rebucket(source: Buckets, k: int, folder: Path) -> Buckets:
    """`source` split into `k` buckets in `folder`."""
    return Buckets.write(folder, source.lines(), k)


def read_lines(path: Path) -> Iterator[bytes]:
    """The non-empty lines of a file, a block at a time."""
    with open(path, "rb") as f:
        for block in line_blocks(f, _BLOCK):
            yield from (line for line in block.split(b"\n") if line)


def replace_dir(src: Path, dst: Path) -> None:
    """Put folder `src` where `dst` is (dst removed first)."""
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(src, dst)
