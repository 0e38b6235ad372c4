"""Reading files a user names (records, partner files, RDF, contracts, spaces, queries) safely.

Such a file is untrusted: it may be a symlink to `/dev/zero`, a FIFO nobody writes to, a
directory, or far larger than its kind ever is. `read_bytes` / `read_text` accept only a regular
file (checked on the opened descriptor, so the file cannot be swapped between the check and the
read), never block on opening it, read at most the kind's size limit plus one byte whatever the
file system says its size is (`/proc` files say 0), and turn every failure into one error naming
the file, e.g. `x.json: not a regular file (character device)`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from luma.errors import ConfigError, LumaError, QueryError, RecordError

_MIB = 1024 * 1024
_CHUNK = 16 * _MIB
# O_NONBLOCK: opening a FIFO that no one writes to must not wait for a writer (nor a serial
# line for its carrier); O_NOCTTY: a terminal must not become ours. Both are POSIX only.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
          (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"))


@dataclass(frozen=True)
class Limit:
    """The size limit of one kind of input file (the user may change it with `variable`), and
    the error its problems raise."""

    variable: str
    default: int
    name: str = "limit"  # as the error words it: "file is over the {name} of N bytes"
    error: type[LumaError] = RecordError

    def under(self, settings) -> "Limit":
        """This limit as the command's settings set it (`settings.file_limits`, read from
        `variable` once by `Settings.from_env`)."""
        return replace(self, default=settings.file_limit(self.variable, self.default))

    def of(self, settings) -> "Limit":
        """`under(settings)`, or this limit's default when there are no settings (a library call)."""
        return self if settings is None else self.under(settings)

    def bytes(self) -> int:
        """The most bytes a file of this kind may hold."""
        return self.default


#: Record files (`luma kb ingest`) and plain RDF (`luma kb load`): bulk files.
RECORD_FILE = Limit("LUMA_MAX_RECORD_FILE_BYTES", 512 * _MIB)
#: Partner files (`luma partner add`): a parameter record is a few KiB; anything near this is not one.
PARTNER_FILE = Limit("LUMA_MAX_PARTNER_FILE_BYTES", _MIB, "partner record limit")
#: Sprint contracts and model spaces (TOML): a few KiB each.
CONFIG_FILE = Limit("LUMA_MAX_CONFIG_FILE_BYTES", _MIB, "contract and space file limit", ConfigError)
#: SPARQL query files (`luma kb query --file`).
QUERY_FILE = Limit("LUMA_MAX_QUERY_FILE_BYTES", _MIB, "query file limit", QueryError)


def read_bytes(path: str | Path, limit: Limit) -> bytes:
    """The bytes of the regular file `path`, at most `limit`; `limit.error` naming the file otherwise."""
    name, error = str(path), limit.error
    most = limit.bytes()
    # A first look before opening: opening some devices has effects of its own (a tape rewinds).
    _regular(_stat(os.stat, path, name, error), name, error)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise error(f"cannot read file ({exc.strerror})", source=name) from None
    try:
        st = _stat(os.fstat, fd, name, error)
        _regular(st, name, error)  # what was opened, whatever the path points to by now
        if st.st_size > most:
            _too_large(limit, most, name, error)
        data = _read_at_most(fd, most + 1, st.st_size, name, error)
    finally:
        os.close(fd)
    if len(data) > most:  # the size said less (a /proc file, or one that grew meanwhile)
        _too_large(limit, most, name, error)
    return data


def read_text(path: str | Path, limit: Limit) -> str:
    """`read_bytes` decoded as UTF-8, newlines translated as Python's text mode does (so a file
    reads exactly as it did through `Path.read_text`)."""
    data = read_bytes(path, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise limit.error(f"cannot read file as UTF-8 text ({exc})", source=str(path)) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _stat(fn, target, name: str, error: type[LumaError]) -> os.stat_result:
    try:
        return fn(target)
    except OSError as exc:
        raise error(f"cannot read file ({exc.strerror})", source=name) from None


def _regular(st: os.stat_result, name: str, error: type[LumaError]) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((word for test, word in _KINDS if test(st.st_mode)), "special file")
        raise error(f"not a regular file ({kind})", source=name)


def _read_at_most(fd: int, n: int, hint: int, name: str, error: type[LumaError]) -> bytes:
    # The stated size is only a hint for the first read: one read (and one buffer) in the usual case.
    chunks, got = [], 0
    step = min(n, max(hint + 1, 64 * 1024))
    try:
        while got < n:
            chunk = os.read(fd, min(n - got, step))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            step = _CHUNK
    except OSError as exc:
        raise error(f"cannot read file ({exc.strerror})", source=name) from None
    return b"".join(chunks)


def _too_large(limit: Limit, most: int, name: str, error: type[LumaError]):
    raise error(f"file is over the {limit.name} of {most} bytes ({limit.variable})", source=name)
