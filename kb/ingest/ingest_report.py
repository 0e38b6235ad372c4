"""What one ingest call did, and who submits when the caller names no one: light enough for
`luma.kb.knowledge_base` to import on every open (the write path itself is kb/ingest/write.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from luma.kb.records.loader import LoadedRecord


@dataclass
class IngestReport:
    """What one ingest call did."""

    added: list[LoadedRecord] = field(default_factory=list)
    duplicates: list[LoadedRecord] = field(default_factory=list)
    quads_added: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def default_submitter() -> str:
    """user@host of this process: who submitted a record when the caller names no one."""
    import getpass  # reason: socket and getpass cost ~2 ms of every read command's start
    import socket

    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError):
        return "unknown"
