"""Server-sent events as OpenAI-compatible servers stream them (`text/event-stream`).

Incremental: bytes arrive in whatever pieces the network gives, and an event is complete only at
its blank line, so `feed` keeps the partial tail. Follows the WHATWG rules the servers rely on:
lines end in LF, CRLF or CR; `:` starts a comment (keep-alives); `data:` lines of one event are
joined with LF; one space after the colon is dropped; fields other than `data`/`event` (`id`,
`retry`) are ignored. `[DONE]` is the OpenAI end-of-stream sentinel, reported as `done`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Event:
    """One complete event: its data (lines joined by LF) and its `event:` type when given."""

    data: str
    type: str = "message"

    @property
    def done(self) -> bool:
        return self.data.strip() == "[DONE]"


class Parser:
    """Feed bytes, get the events they complete."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._type = "message"

    def feed(self, chunk: bytes) -> list[Event]:
        self._buf += chunk
        out: list[Event] = []
        while True:
            cut = _line_end(self._buf)
            if cut is None:
                return out
            end, nxt = cut
            line = self._buf[:end].decode("utf-8", errors="replace")
            self._buf = self._buf[nxt:]
            if line == "":
                if self._data:
                    out.append(Event("\n".join(self._data), self._type))
                self._data, self._type = [], "message"
                continue
            if line.startswith(":"):
                continue  # a comment: servers send them as keep-alives
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._type = value or "message"

    def close(self) -> list[Event]:
        """What a stream that ended without its final blank line still completes."""
        out = self.feed(b"\n\n") if self._buf or self._data else []
        self._buf = b""
        return out


def _line_end(buf: bytes) -> tuple[int, int] | None:
    """(end of the first line, start of the next) or None while the line is incomplete. A CR at
    the very end may be the first half of CRLF: wait for the next byte."""
    lf, cr = buf.find(b"\n"), buf.find(b"\r")
    if cr < 0 or (0 <= lf < cr):
        return None if lf < 0 else (lf, lf + 1)
    if cr + 1 == len(buf):
        return None
    return (cr, cr + 2) if buf[cr + 1:cr + 2] == b"\n" else (cr, cr + 1)
