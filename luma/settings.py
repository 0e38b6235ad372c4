"""Where a LUMA project lives and what its commands may use: `LUMA_HOME`, `LUMA_DB_URL`,
`LUMA_KB_URL`, `LUMA_WAIT`, `LUMA_QUERY_MEMORY`, `LUMA_QUERY_MAX_ANSWER_BYTES`, `LUMA_RUNNER_KEY`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from luma.errors import ConfigError

DEFAULT_HOME = ".luma"
#: Memory one user query may use on the embedded store (kb/isolated_query.py).
DEFAULT_QUERY_MEMORY = 4 * 2**30
#: Size of one query's answer.
DEFAULT_QUERY_ANSWER_BYTES = 2 * 2**30
#: Below this a query process cannot even open the store.
MIN_QUERY_MEMORY = 64 * 2**20

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)
_FACTORS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
            "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class Settings:
    """Resolved locations of the ledger and the knowledge base of one project, and its limits."""

    home: Path
    db_url: str
    kb_url: str
    #: Seconds a writer waits for the embedded KB's lock (None: writers 0, readers 30).
    wait: float | None = None
    query_memory: int = DEFAULT_QUERY_MEMORY
    query_answer_bytes: int = DEFAULT_QUERY_ANSWER_BYTES
    #: The runner key (a name under $LUMA_HOME/keys/) runners sign with; None: the project's default.
    runner_key: str | None = None

    @classmethod
    def from_env(cls, home: str | os.PathLike | None = None) -> "Settings":
        """Read the environment; an explicit `home` wins over `LUMA_HOME`."""
        root = Path(home or os.environ.get("LUMA_HOME") or DEFAULT_HOME).absolute()
        db_url = os.environ.get("LUMA_DB_URL") or f"sqlite:///{root / 'ledger.sqlite'}"
        kb_url = os.environ.get("LUMA_KB_URL") or f"oxigraph:{root / 'kb'}"
        wait = os.environ.get("LUMA_WAIT")
        return cls(
            home=root, db_url=db_url, kb_url=kb_url,
            wait=parse_seconds(wait, "LUMA_WAIT") if wait else None,
            query_memory=parse_size(os.environ.get("LUMA_QUERY_MEMORY"), "LUMA_QUERY_MEMORY",
                                    DEFAULT_QUERY_MEMORY, MIN_QUERY_MEMORY),
            query_answer_bytes=parse_size(os.environ.get("LUMA_QUERY_MAX_ANSWER_BYTES"),
                                          "LUMA_QUERY_MAX_ANSWER_BYTES", DEFAULT_QUERY_ANSWER_BYTES, 1),
            runner_key=os.environ.get("LUMA_RUNNER_KEY") or None,
        )


def parse_size(text: str | None, what: str, default: int, minimum: int = 1) -> int:
    """Bytes from `4GiB`, `512 MB`, `1048576`; `default` when `text` is None or empty."""
    if text is None or not str(text).strip():
        return default
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"not a size: {text!r} (e.g. 4GiB, 512MiB, 1000000)", source=what)
    value = int(float(m.group(1)) * _FACTORS[(m.group(2) or "B").lower()])
    if value < minimum:
        raise ConfigError(f"{text!r} is below the minimum of {minimum} bytes", source=what)
    return value


def parse_seconds(text: str, what: str) -> float:
    """A non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"must be a non-negative number of seconds, got {text!r}", source=what)
    return value
