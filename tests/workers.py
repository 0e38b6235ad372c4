"""The suite on several workers (pytest-xdist; the README's command runs two where the host has
two CPUs): what keeps a run on several workers as exact as a run in one process.

* **Tests that need the host alone** (`host_alone`) run while no other test does; the others run
  side by side. A real trial's contention check counts another worker's CPU time as a
  co-tenant's and rightly calls the trial INCONCLUSIVE (experiments/sprint/contention.py), and
  time-outs, kills and benches race against a busy host. The test modules in HOST_ALONE, and
  every slow test, are such tests; a module is marked whole, since its shared fixtures (a real
  sprint, a served model) are set up inside its first test. A module whose only such part is a
  fixture's real sprint holds the host alone for that part (`alone()`) instead.
* execnet starts each worker with COLUMNS=80 and LINES=24, which no terminal of the user's set:
  they go, so tables are as wide in a worker as in a one-process run (cli/output.py).
* Each worker has its own PostgreSQL database beside `LUMA_TEST_PG_URL`'s: the tests wipe the
  one they are given.

The host lock: every test holds one file lock, shared, or exclusive for a `host_alone` test. A
test first passes a turnstile (a second lock), so that a test waiting for the host alone keeps
newer shared holders out instead of waiting behind them forever.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import cache
from pathlib import Path

import pytest

#: Test modules (or folders) that run real trials, serve models or bench: paths from the repository root.
HOST_ALONE = (
    "tests/cli/sprint/",
    "tests/cli/test_chain_cli.py",
    "tests/cli/test_engine_cli.py",
    "tests/cli/test_exit_codes.py",
    "tests/cli/test_extras.py",
    "tests/cli/test_interrupt.py",
    "tests/cli/test_kernels_cli.py",
    "tests/cli/test_machine_cli.py",
    "tests/cli/test_model_record_cli.py",
    "tests/cli/test_progress.py",
    "tests/cli/test_project_home.py",
    "tests/cli/test_readme_commands.py",
    "tests/cli/test_runner_cli.py",
    "tests/experiments/chains/test_from_sprint.py",
    "tests/experiments/endpoint/",
    "tests/experiments/fleet/",
    "tests/experiments/pilot/",
    "tests/experiments/services/",
    "tests/experiments/sprint/",
    "tests/experiments/test_characterize.py",
    "tests/kb/ingest/test_consistency_outcomes.py",
    "tests/reports/test_boundary_outcomes.py",
    "tests/reports/test_budget.py",
)

#: The controller's folder of the two lock files, handed to its workers.
LOCKS_VAR = "LUMA_TEST_HOST_LOCKS"
#: At most this many workers for `-n auto`: each imports torch and collects the whole suite.
MAX_WORKERS = 4


class HostLock:
    """The lock every test of a run on several workers holds while it runs."""

    def __init__(self, folder: Path):
        self._host = os.open(folder / "host", os.O_RDWR | os.O_CREAT, 0o600)
        self._turn = os.open(folder / "turnstile", os.O_RDWR | os.O_CREAT, 0o600)
        self.mode: str | None = None  # "shared" or "alone" while a test holds it

    def _take(self, alone: bool) -> None:
        fcntl.flock(self._turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._host, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turn, fcntl.LOCK_UN)
        self.mode = "alone" if alone else "shared"

    def _drop(self) -> None:
        fcntl.flock(self._host, fcntl.LOCK_UN)
        self.mode = None

    @contextmanager
    def held(self, alone: bool) -> Iterator[None]:
        self._take(alone)
        try:
            yield
        finally:
            self._drop()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The host alone for a while within a test that shares it. The shared lock goes before
        the turnstile is taken: two workers that both ask would otherwise wait on each other."""
        if self.mode != "shared":
            yield
            return
        self._drop()
        self._take(True)
        try:
            yield
        finally:
            self._drop()
            self._take(False)


#: This worker's host lock (None in a one-process run or in the controller).
_LOCK: HostLock | None = None


def alone():
    """A context in which this worker's test has the host alone: for the part of a test or of a
    fixture (a module's real sprint) that needs it, when the rest of its module need not wait.
    Nothing in a one-process run."""
    return _LOCK.alone() if _LOCK is not None else nullcontext()


def configure(config: pytest.Config) -> None:
    """The controller of a run on several workers makes the lock folder; each worker opens it."""
    if hasattr(config, "workerinput"):
        for var in ("COLUMNS", "LINES"):
            os.environ.pop(var, None)
        folder = os.environ.get(LOCKS_VAR)
        if folder:
            global _LOCK
            _LOCK = HostLock(Path(folder))
    elif getattr(config.option, "numprocesses", None):
        folder = tempfile.mkdtemp(prefix="luma-test-host-")
        os.environ[LOCKS_VAR] = folder  # the workers start after configure and inherit it
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def mark(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`host_alone` on every test of HOST_ALONE's modules and on every slow test."""
    root = Path(config.rootpath)
    for item in items:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            continue
        if item.get_closest_marker("slow") or rel.startswith(HOST_ALONE):
            item.add_marker(pytest.mark.host_alone)


@contextmanager
def holding(item: pytest.Item) -> Iterator[None]:
    """The host lock for `item`'s setup, call and teardown (nothing in a one-process run)."""
    if _LOCK is None:
        yield
        return
    with _LOCK.held(alone=item.get_closest_marker("host_alone") is not None):
        yield


def auto_workers() -> int:
    """`-n auto`: one worker per CPU this process may run on, at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


@cache
def worker_database(url: str) -> str:
    """`url` in a one-process run; in a worker, the same server's database of that worker
    (created at its first test, from the same role)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return url
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    given = make_url(url)
    name = f"{given.database}_{worker}"
    engine = create_engine(given, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return given.set(database=name).render_as_string(hide_password=False)
