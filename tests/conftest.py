"""Shared fixtures: one URL per backend, so that each contract suite runs against all of them.

* `store_url` — every quad-store backend: in memory, on disk, an `oxigraph serve` server.
* `ledger_url` — every ledger backend: SQLite, and PostgreSQL when `LUMA_TEST_PG_URL` names
  a database the tests may wipe (`.ci/run` starts a throwaway cluster and sets it).
* `luma_home` — an isolated project directory with no URL overrides from the environment.
"""

from __future__ import annotations

import atexit
import tempfile
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis writes its example database under ./.hypothesis; every test module that uses it
# shares this one temporary home instead, removed at exit, never in the repository.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="luma-test-hypothesis-")
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)

#: Variables that would redirect a store or ledger away from the URLs the fixtures give.
_LOCATION_VARS = ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL")


# -- Oxigraph server -------------------------------------------------------------------------


def _oxigraph_binary() -> str | None:
    """The `oxigraph` CLI (PyPI package `oxigraph`): next to this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("oxigraph")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(base: str) -> bool:
    query = urllib.parse.urlencode({"query": "ASK {}"})
    try:
        with urllib.request.urlopen(f"{base}/query?{query}", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _die_with_parent() -> None:
    """Linux: the server goes when pytest goes, even when pytest is killed before teardown."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort; teardown stops it in the normal case
        pass


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _start_server(location: Path, log_path: Path, limit=None) -> tuple[str, subprocess.Popen]:
    """Start `oxigraph serve` on a free local port; `limit` runs in the child before exec
    (resource limits). Skips when the CLI is not installed."""
    binary = _oxigraph_binary()
    if binary is None:
        pytest.skip("the `oxigraph` server CLI is not installed (pip install oxigraph)")

    def pre_exec():
        if sys.platform.startswith("linux"):
            _die_with_parent()
        if limit is not None:
            limit()

    # The port is free when chosen but may be taken before the server binds it: try again.
    for _attempt in range(3):
        base = f"http://127.0.0.1:{_free_port()}"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [binary, "serve", "--location", str(location), "--bind", base.removeprefix("http://")],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=pre_exec,
            )
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline and not _answers(base):
            time.sleep(0.05)
        if proc.poll() is None and _answers(base):
            return base, proc
        _stop(proc)
    pytest.fail(f"oxigraph serve did not start: {log_path.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="session")
def oxigraph_server(tmp_path_factory):
    """Base URL of an `oxigraph serve` process on a free local port, for the whole session."""
    location = tmp_path_factory.mktemp("oxigraph-server")
    base, proc = _start_server(location, location.parent / f"{location.name}.log")
    try:
        yield base
    finally:
        _stop(proc)


@pytest.fixture
def start_oxigraph(tmp_path):
    """A factory for servers of one test's own (e.g. under resource limits): `start(limit=None)`
    returns (base URL, process); every server it started is stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(limit=None) -> tuple[str, subprocess.Popen]:
        location = tmp_path / f"oxigraph-{len(started)}"
        base, proc = _start_server(location, tmp_path / f"oxigraph-{len(started)}.log", limit)
        started.append(proc)
        return base, proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def _clear_server(base: str) -> None:
    req = urllib.request.Request(
        f"{base}/update", data=b"CLEAR ALL", headers={"Content-Type": "application/sparql-update"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()


# -- quad stores -----------------------------------------------------------------------------

STORE_BACKENDS = ["memory", "disk", "server"]


@pytest.fixture(params=STORE_BACKENDS)
def store_url(request, tmp_path, monkeypatch):
    """A fresh, empty quad store's URL, once per backend."""
    for var in _LOCATION_VARS:
        monkeypatch.delenv(var, raising=False)
    if request.param == "memory":
        yield "memory:"
    elif request.param == "disk":
        yield f"oxigraph:{tmp_path / 'kb'}"
    else:
        base = request.getfixturevalue("oxigraph_server")
        _clear_server(base)
        yield base
        _clear_server(base)


# -- ledgers ---------------------------------------------------------------------------------

LEDGER_BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture
def pg_url():
    """`LUMA_TEST_PG_URL` with the ledger's table and trigger function dropped (skips if unset).

    The database is wiped: point it at a throwaway one (`.ci/run` does).
    """
    url = os.environ.get("LUMA_TEST_PG_URL")
    if not url:
        pytest.skip("LUMA_TEST_PG_URL is not set (`.ci/run` starts a PostgreSQL cluster and sets it)")
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS ledger_record CASCADE"))
            conn.execute(text("DROP FUNCTION IF EXISTS ledger_append_only() CASCADE"))
    finally:
        engine.dispose()
    return url


@pytest.fixture(params=LEDGER_BACKENDS)
def ledger_url(request, tmp_path, monkeypatch):
    """A fresh, empty ledger's SQLAlchemy URL, once per backend."""
    for var in _LOCATION_VARS:
        monkeypatch.delenv(var, raising=False)
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    return request.getfixturevalue("pg_url")


# -- projects --------------------------------------------------------------------------------


@pytest.fixture
def luma_home(tmp_path, monkeypatch) -> Path:
    """An empty project directory as LUMA_HOME, with the default ledger and KB inside it."""
    home = tmp_path / "luma-home"
    home.mkdir()
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in _LOCATION_VARS:
        monkeypatch.delenv(var, raising=False)
    return home
