"""Concurrent luma processes on one project: what runs beside an ingest, and what it must not do.

* Endpoint KB: any command started during an ingest used to take the live ingest's pending
  marker for a crash leftover and drop its not-yet-committed graphs (10,000 records in the
  ledger, 5,500 in the KB). Now markers are locked by their ingest and sync checks the store
  against the ledger: the counts are exact.
* Embedded KB: readers run while a writer works (they read the state it started from), a
  second writer waits with --wait or says who holds the KB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from luma.kb.records.synthetic import write_jsonl

pytestmark = pytest.mark.slow


def _env(home: Path, kb_url: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUMA_")}
    env["LUMA_HOME"] = str(home)
    if kb_url:
        env["LUMA_KB_URL"] = kb_url
    return env


def _luma(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "luma.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _spawn(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "luma.cli.main", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _stats(env: dict) -> dict:
    out = _luma(env, "kb", "stats", "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _while_running(proc: subprocess.Popen, step, min_calls: int = 2, limit_s: float = 240) -> list:
    """Call `step()` again and again while `proc` runs (at least `min_calls` times)."""
    results = []
    deadline = time.monotonic() + limit_s
    while (proc.poll() is None or len(results) < min_calls) and time.monotonic() < deadline:
        results.append(step())
    return results


@pytest.mark.parametrize("store_url", ["server"], indirect=True)
def test_commands_during_an_endpoint_ingest_lose_no_record(store_url, tmp_path):
    """The race of issue 13: `luma kb stats` over and over while an ingest runs."""
    env = _env(tmp_path / "home", store_url)
    assert _luma(env, "kb", "init").returncode == 0  # readers need a project (before it: one line, exit 1)
    # Two chunks (2,000 then 4,000): the second is projected while the first is loaded and not
    # committed -- the window in which the old recovery took the live ingest's graphs.
    records = write_jsonl(tmp_path / "batch.jsonl", 6000, seed=3)
    ingest = subprocess.Popen([sys.executable, "-m", "luma.cli.main", "kb", "ingest", str(records)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = _while_running(ingest, lambda: _stats(env))
    out, err = ingest.communicate(timeout=300)
    assert ingest.returncode == 0, err
    assert len(seen) >= 2
    after = _stats(env)
    assert after["ledger_records"] == 6000
    assert after["record_graphs"] == 6000, "record graphs were lost"


#: A writer that holds the KB until told to let go: it opens it, ingests a file, says so, and
#: waits for a line on stdin (as a long ingest or rules run would hold it).
_HOLDING_WRITER = """
import sys
from luma.kb.knowledge_base import open_kb
with open_kb() as kb:
    kb.ingest([sys.argv[1]], submitter="holder")
    print("holding", flush=True)
    sys.stdin.readline()
"""


def test_readers_run_beside_an_embedded_writer_and_writers_wait(tmp_path):
    home = tmp_path / "home"
    env = _env(home)
    first = write_jsonl(tmp_path / "first.jsonl", 20, seed=4)
    assert _luma(env, "kb", "ingest", str(first)).returncode == 0
    more = write_jsonl(tmp_path / "more.jsonl", 50, seed=5)
    other = write_jsonl(tmp_path / "other.jsonl", 10, seed=6)
    writer = subprocess.Popen([sys.executable, "-c", _HOLDING_WRITER, str(more)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "holding", writer.stderr.read()
        count = "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#recordKind> ?k } }"
        started = [_spawn(env, "kb", "stats", "--format", "json"), _spawn(env, "kb", "query", "--format", "json", count),
                   _spawn(env, "kb", "ingest", str(other))]
        stats, query, busy = [_finish(p) for p in started]
        waiting = _spawn(env, "--wait", "120", "kb", "ingest", str(other))
        time.sleep(1.0)
        assert waiting.poll() is None, "a second writer did not wait"
    finally:
        writer.communicate("go\n", timeout=120)
    assert writer.returncode == 0
    # The readers ran beside the writer: they saw the state it started from (20 records, not
    # its 50 new ones), and said so.
    assert stats.returncode == 0, stats.stderr
    assert "is writing the knowledge base" in stats.stderr
    assert json.loads(stats.stdout)["record_graphs"] == 20
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["results"]["bindings"][0]["n"]["value"] == "20"
    # A second writer without --wait is told who holds the KB, in one line.
    assert busy.returncode == 1
    assert f"in use by pid {writer.pid}" in busy.stderr and len(busy.stderr.strip().splitlines()) == 1, busy.stderr
    # With --wait it went through once the first let go.
    assert _finish(waiting).returncode == 0
    assert _stats(env)["record_graphs"] == 80
    assert not list((home / "kb-snapshots").glob("*")), "a read snapshot was left behind"
