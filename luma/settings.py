"""Where a LUMA project lives: `LUMA_HOME`, `LUMA_DB_URL`, `LUMA_KB_URL`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOME = ".luma"


@dataclass(frozen=True)
class Settings:
    """Resolved locations of the ledger and the knowledge base of one project."""

    home: Path
    db_url: str
    kb_url: str

    @classmethod
    def from_env(cls, home: str | os.PathLike | None = None) -> "Settings":
        """Read the environment; an explicit `home` wins over `LUMA_HOME`."""
        root = Path(home or os.environ.get("LUMA_HOME") or DEFAULT_HOME).absolute()
        db_url = os.environ.get("LUMA_DB_URL") or f"sqlite:///{root / 'ledger.sqlite'}"
        kb_url = os.environ.get("LUMA_KB_URL") or f"oxigraph:{root / 'kb'}"
        return cls(home=root, db_url=db_url, kb_url=kb_url)
