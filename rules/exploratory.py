"""Exploratory rule runs: parameters below their floors, on a copy that official results never read.

Canonical rule 5 says one successful intervention is not a silicon requirement, so the rules'
floors (`# floor:` lines) refuse parameters that would let one chain, one workload or one
architecture become a requirement. Looking below them is still useful ("what would recur if
two workloads were enough?"), so `luma rules run --exploratory` runs the whole rule set on a
copy of the knowledge base in `$LUMA_HOME/kb-exploratory/` (a RocksDB checkpoint of the embedded
store, or a local copy of an endpoint's quads) and marks every derivation there exploratory.
Nothing of it reaches the project's KB: the hardware-requirements named query, `luma kb query`
and the Design-In report never see it; `luma kb explain --exploratory` and `luma kb query
--exploratory` read it, and say so.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from luma.kb.vocab import LUMA, PROV
from luma.rules.state import DERIVED

FOLDER = "kb-exploratory"


@dataclass
class _Copy:
    """What the rules engine needs of a knowledge base: a store and the project's settings."""

    store: object
    settings: object


def store_path(home: Path) -> Path:
    """Where the exploratory copy of the KB lives."""
    return Path(home) / FOLDER / "kb"


def run(kb, overrides: dict[str, str], workers: int | None = None):
    """Copy the KB, run every rule on the copy with `overrides` (floors not applied), mark each
    derivation exploratory; returns the engine's RunReport."""
    # rdflib's algebra (~0.7 s): the parent of a rules child imports this module, never the engine
    from luma.rules.engine import Engine

    folder = Path(kb.settings.home) / FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    on_disk = getattr(kb.store, "raw", None) is not None and getattr(kb.store, "path", None) is not None
    if on_disk:
        kb.store.raw.backup(str(store_path(kb.settings.home)))  # hard links: cheap at any size
    # pyoxigraph: `luma kb query --help` imports this module for store_path/last_run
    from luma.kb.store.embedded import EmbeddedStore

    copy = EmbeddedStore(store_path(kb.settings.home))
    if not on_disk:  # an in-memory store or an endpoint: its quads, copied
        copy.bulk_load_nquads([kb.store.dump("nquads")])
    try:
        # The copy keeps the project's derived graphs; the run replaces them with its own.
        report = Engine(_Copy(copy, kb.settings), cache=folder / "cache").run(
            overrides, full=True, workers=workers, exploratory=True)
        copy.update(f"INSERT {{ GRAPH ?g {{ ?a <{LUMA}exploratory> true }} }} WHERE {{ GRAPH ?g {{ ?a a <{PROV}Activity> }} "
                    f'FILTER(STRSTARTS(STR(?g), "{DERIVED}")) }}')
    finally:
        copy.close()
    (folder / "run.json").write_text(json.dumps({
        "parameters": overrides, "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}, indent=2))
    return report


def last_run(home: Path) -> dict | None:
    """The parameters and time of the last exploratory run, or None when there is none."""
    try:
        return json.loads((Path(home) / FOLDER / "run.json").read_text())
    except (OSError, ValueError):
        return None
