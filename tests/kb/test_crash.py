"""A crash anywhere in an ingest heals on the next open (DESIGN §2: the ledger is the commit point).

A subprocess ingests one large batch and is SIGKILLed at several moments. Afterwards the
ledger holds none or all of the batch, and opening the project (which runs `sync()`) brings
the knowledge base level with the ledger. One kill is timed on the ledger commit itself, so it
lands after the commit and before the knowledge-base load has finished: the case `sync()`
exists for. LUMA_CRASH_RECORDS sets the batch size (default 1500; the phases scale linearly).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.synthetic import write_jsonl
from luma.kb.vocab import LUMA
from luma.settings import Settings

N = int(os.environ.get("LUMA_CRASH_RECORDS", "1500"))
_LOCATION_VARS = ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL")

pytestmark = pytest.mark.slow


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LOCATION_VARS}
    env["LUMA_HOME"] = str(home)
    return env


def _ledger_rows(home: Path) -> int:
    """Committed ledger rows, read from another connection (read-only, never creates the file)."""
    try:
        conn = sqlite3.connect(f"file:{home / 'ledger.sqlite'}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT COUNT(*) FROM ledger_record").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


def _spawn(home: Path, batch: Path) -> subprocess.Popen:
    log = open(home.parent / f"{home.name}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "luma.cli.main", "kb", "ingest", "--format", "json", str(batch)],
        env=_env(home), stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
    )
    log.close()
    return proc


def _calibrate(home: Path, batch: Path) -> tuple[float, float]:
    """Run one full ingest; return (seconds to the ledger commit, seconds in all)."""
    t0 = time.monotonic()
    proc = _spawn(home, batch)
    commit = None
    while proc.poll() is None:
        if commit is None and _ledger_rows(home) == N:
            commit = time.monotonic() - t0
        time.sleep(0.005)
    total = time.monotonic() - t0
    assert proc.returncode == 0, (home.parent / f"{home.name}.log").read_text()
    assert _ledger_rows(home) == N
    return (commit if commit is not None else total), total


def _kill(home: Path, batch: Path, at: float | None, deadline: float) -> bool:
    """Start an ingest and SIGKILL it `at` seconds in (None: as soon as the ledger has committed).

    Returns whether the process was still running when killed."""
    t0 = time.monotonic()
    proc = _spawn(home, batch)
    try:
        while proc.poll() is None and time.monotonic() - t0 < deadline:
            if at is not None and time.monotonic() - t0 >= at:
                break
            if at is None and _ledger_rows(home) == N:
                break
            time.sleep(0.002)
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    return alive


def _record_graphs(kb: KnowledgeBase) -> int:
    rows = kb.store.select(f"SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE {{ ?g a <{LUMA}SourceRecord> }}")
    return int(rows[0]["n"])


def _state(home: Path, sync: bool) -> dict:
    with KnowledgeBase.open(Settings.from_env(home=home), sync=sync) as kb:
        return {
            "ledger": kb.ledger.last_id(),
            "watermark": kb.watermark(),
            "graphs": _record_graphs(kb),
            "quads": kb.store.count(),
        }


def _phase(before: dict) -> str:
    if before["ledger"] == 0:
        return "before the ledger commit"
    if before["watermark"] < before["ledger"]:
        return "after the ledger commit, before the KB load finished"
    return "after the KB load"


def test_a_killed_ingest_heals_on_the_next_open(tmp_path, monkeypatch, capsys):
    for var in _LOCATION_VARS:
        monkeypatch.delenv(var, raising=False)
    batch = write_jsonl(tmp_path / "batch.jsonl", N)
    small = write_jsonl(tmp_path / "small.jsonl", 5, seed=99)

    empty_quads = _state(tmp_path / "empty", sync=True)["quads"]  # the ontology alone
    commit_at, total = _calibrate(tmp_path / "calibration", batch)
    full = _state(tmp_path / "calibration", sync=True)
    assert full["ledger"] == full["graphs"] == full["watermark"] == N

    kills = [("25%", 0.25 * total), ("the ledger commit", None), ("60%", 0.60 * total), ("90%", 0.90 * total)]
    phases = {}
    for label, at in kills:
        home = tmp_path / f"kill-{len(phases)}"
        alive = _kill(home, batch, at, deadline=3 * total)
        before = _state(home, sync=False)  # what the crash left, before any healing
        phase = _phase(before) if alive else "after the process ended"
        phases[label] = phase
        assert before["ledger"] in (0, N), (label, before)  # all or nothing

        after = _state(home, sync=True)  # a normal open: sync() replays the ledger
        assert after["ledger"] in (0, N)
        assert after["graphs"] == after["ledger"] == after["watermark"], (label, phase, after)
        assert after["quads"] == (full["quads"] if after["ledger"] else empty_quads), (label, phase, after)

        with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
            report = kb.ingest([small])
            assert len(report.added) == 5
            assert kb.ledger.last_id() == kb.watermark() == _record_graphs(kb) == after["ledger"] + 5

    with capsys.disabled():
        print(f"\n[crash] {N} records: ledger commit at {commit_at:.2f} s of {total:.2f} s")
        for label, phase in phases.items():
            print(f"[crash] kill at {label}: {phase}")
    assert "after the ledger commit, before the KB load finished" in phases.values(), phases
