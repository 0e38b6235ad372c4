"""The sprints run in a project, read back from their folders under `$LUMA_HOME/sprints/`
(experiments/sprint/records.py writes them): what each was, when it started, how many trials it
kept, and its outcome — the boundary its chain records, or why it has none."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

#: The UTC start stamp every sprint ID ends with (Plan.new_id, run_optimize).
_STAMP = re.compile(r"-(\d{8}T\d{6}Z)$")


@dataclass(frozen=True)
class SprintEntry:
    """One sprint folder: `kind` is `sprint` (a boundary search) or `optimize`; `outcome` the
    boundary or the best configuration, else why there is none; `chain` whether a PEX chain was
    written."""

    sprint: str
    kind: str
    contract: str | None
    dimension: str | None
    started: str | None
    trials: int
    chain: bool
    outcome: str
    path: str

    def row(self) -> dict:
        return asdict(self)


def sprints(home: Path) -> list[SprintEntry]:
    """Every sprint folder of the project at `home`, oldest first (none: an empty list)."""
    root = home / "sprints"
    folders = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    entries = [entry(p) for p in folders]
    return sorted(entries, key=lambda e: (e.started or "", e.sprint))


def entry(folder: Path) -> SprintEntry:
    """What the folder of one sprint says of it (a folder without a summary was interrupted or is
    still running)."""
    trials = sorted(folder.glob("trial-*.json"))
    first = _read(trials[0]) if trials else {}
    summary, optimum = _read(folder / "sprint.json"), _read(folder / "optimize.json")
    chain = (folder / "chain.json").is_file()
    kind = "optimize" if optimum or (folder / "optimum.json").exists() or "-optimize-" in folder.name else "sprint"
    contract = (summary.get("contract") or optimum.get("contract")
                or (first.get("contract") or {}).get("name"))
    started = (first.get("provenance") or {}).get("started") or _stamp(folder.name)
    if kind == "optimize":
        outcome = _optimize_outcome(optimum)
    else:
        outcome = _boundary(summary) if chain else _why_no_chain(summary)
    return SprintEntry(folder.name, kind, contract, summary.get("dimension"), started, len(trials), chain, outcome,
                       str(folder))


def kept(folder: Path, recorded: bool) -> str:
    """What an interrupted sprint left in its folder: its trials (ingested when the sprint records)
    and whether its chain was written."""
    trials = len(list(folder.glob("trial-*.json"))) if folder.is_dir() else 0
    if not trials:
        return "no trial kept, no chain"
    chain = "chain written" if (folder / "chain.json").exists() else "no chain"
    return (f"{trials} trial{'s' if trials != 1 else ''} kept in {folder} "
            f"({'ingested' if recorded else 'not ingested'}), {chain}")


def _boundary(s: dict) -> str:
    text = f"minimum PASS {s.get('min_pass')}, adjacent FAIL {s.get('adjacent_fail')}"
    if s.get("binding"):
        text += f", binding {s['binding']}"
    if s.get("recovered") is not None:
        text += f"; {s.get('intervention')} {'recovered' if s['recovered'] else 'did not recover'} PASS"
    return text


def _why_no_chain(s: dict) -> str:
    """Why a boundary search wrote no chain, from its summary (chain_record's conditions)."""
    if not s:
        return "no chain: interrupted or still running (no summary)"
    if s.get("min_pass") is None:
        return "no chain: no level passed"
    if s.get("adjacent_fail") is None:
        return f"no chain: every level down to {s['min_pass']} passed (no FAIL to bound)"
    if s.get("problems"):
        return "no chain: " + "; ".join(s["problems"])
    if not s.get("intervention"):
        return "no chain: no intervention to recover PASS with"
    return "no chain: the adjacent FAIL never failed outright (INCONCLUSIVE) or recovery did not run"


def _optimize_outcome(o: dict) -> str:
    if not o:
        return "no result: interrupted or still running (no summary)"
    best = o.get("best")
    if not best:
        return "no configuration met the contract"
    if isinstance(best, dict):  # optimize.run's finalist: a configuration and its lower throughput
        layout = ", ".join(f"{k} {best[k]}" for k in ("variant", "threads", "replicas", "max_batch") if k in best)
        return f"best: {layout}: {float(best.get('throughput') or 0):.1f} requests/s"
    return f"best: {best}"


def _stamp(name: str) -> str | None:
    m = _STAMP.search(name)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).isoformat()


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # absent, unreadable or half-written: what the folder shows without it
    return doc if isinstance(doc, dict) else {}
