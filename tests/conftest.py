"""Shared fixtures: one URL per backend, so that each contract suite runs against all of them.

* `store_url` — every quad-store backend: in memory, on disk, an `oxigraph serve` server.
* `ledger_url` — every ledger backend: SQLite, and PostgreSQL when `LUMA_TEST_PG_URL` names
  a database the tests may wipe (`.ci/run` starts a throwaway cluster and sets it).
* `luma_home` — an isolated project directory with no URL overrides from the environment.
* `runner_key`, `signed`, `evidence` — measured evidence: a runner key the project trusts,
  signed copies of records, trials that bear a chain out (see "measured evidence" below).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from tests import workers
from tests.listener import Listener

# Hypothesis writes its example database under ./.hypothesis; every test module that uses it
# shares this one temporary home instead, removed at exit, never in the repository.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="luma-test-hypothesis-")
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)


# -- several workers (pytest-xdist): tests/workers.py ------------------------------------------


def pytest_configure(config):
    workers.configure(config)


def pytest_collection_modifyitems(config, items):
    workers.mark(config, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with workers.holding(item):
        return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    return workers.auto_workers()


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
    url = workers.worker_database(url)
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


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory) -> Path:
    """The int8 kernels' measured GEMM choices (kernels/gemm_tuning.py) go to a temporary folder
    for the whole session, never to the user's ~/.cache/luma (children inherit the variable)."""
    folder = tmp_path_factory.mktemp("kernel-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("LUMA_KERNEL_CACHE", str(folder))
    yield folder
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def rules_cache(tmp_path_factory) -> Path:
    """The rules engine's machine-wide cache of rule analyses and checked texts (rules/analysis.py)
    is a temporary folder shared by the whole session (every test project runs the shipped rules),
    never the user's ~/.cache/luma/rules (children inherit the variable)."""
    folder = tmp_path_factory.mktemp("rules-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("LUMA_RULES_CACHE", str(folder))
    yield folder
    patch.undo()


@pytest.fixture
def luma_home(tmp_path, monkeypatch) -> Path:
    """An empty project directory as LUMA_HOME, with the default ledger and KB inside it."""
    home = tmp_path / "luma-home"
    home.mkdir()
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in (*_LOCATION_VARS, "LUMA_RUNNER_KEY"):
        monkeypatch.delenv(var, raising=False)
    return home


# -- measured evidence ---------------------------------------------------------------------------
#
# `measured` is earned (issue 14): ingest accepts it only over a runner key the project trusts
# and only when the record's own trials bear it out. A test that needs measured records makes
# a key in its project (`runner_key`, or `evidence.trust_runner` in a wider-scoped fixture),
# gives its records trials that agree with them (`evidence.with_trials`) and ingests signed
# copies (`signed`, `evidence.sign_files`, `evidence.write_signed`).

#: Requests behind each percentile a test trial reports: more than kb/judge.min_requests(0.99).
TRIAL_REQUESTS = 1000
RUNNER = "test-runner"


def _inside(clause: dict) -> float:
    """A value well on the passing side of `clause` (a fraction stays within [0, 1])."""
    t, op = clause["value"], clause["op"]
    if op in ("<=", "<"):
        return round(t * 0.6, 6) if t > 0 else t - 1
    if clause.get("unit") == "dimensionless" and 0 <= t < 1:
        return round(t + (1 - t) / 2, 6)
    return round(t * 1.5, 6) if t > 0 else t + 1


def _passing_observations(clauses: list[dict]) -> list[dict]:
    """What a PASS on every clause looks like: a percentile with its interval inside the
    threshold and enough completed requests behind it, any other metric one value inside."""
    from luma.kb.records import judge

    quantiles = [q for c in clauses if (q := judge.quantile_of(c["metric"])) is not None]
    requests = max([TRIAL_REQUESTS, *(judge.min_requests(q) for q in quantiles)])
    obs = [{"metric": "completed_requests", "value": requests, "unit": "request"}] if quantiles else []
    for c in clauses:
        v = _inside(c)
        obs.append({"metric": c["metric"], "value": v, "unit": c["unit"]})
        if judge.quantile_of(c["metric"]) is not None:
            lo, hi = sorted((round(v * 0.9, 6), round(v * 1.1, 6)))
            obs += [{"metric": c["metric"] + ".ci_low", "value": lo, "unit": c["unit"]},
                    {"metric": c["metric"] + ".ci_high", "value": hi, "unit": c["unit"]}]
    return obs


def consistent_trials(doc: dict) -> list[dict]:
    """Trials that bear out the pex-chain `doc` the way a sprint's do (kb/ingest/consistency.py):
    `repetitions` PASS trials at the pass state, one out-of-memory FAIL at the fail state, then
    `repetitions` recovered PASS trials, or one recovered FAIL when the chain did not recover."""
    reps, obs = doc["repetitions"], _passing_observations(doc["contract"]["clauses"])

    def passing(state: str, k: int) -> dict:
        return {"state": state, "repetition": k, "verdict": "PASS", "observations": obs}

    def failing(state: str) -> dict:
        return {"state": state, "repetition": 1, "verdict": "FAIL", "failure_cause": "oom"}

    trials = [passing("pass", k) for k in range(1, reps + 1)] + [failing("fail")]
    return trials + ([passing("recovered", k) for k in range(1, reps + 1)] if doc["recovered"]
                     else [failing("recovered")])


def with_trials(doc: dict) -> dict:
    """A copy of the pex-chain `doc` whose trials agree with its repetitions and recovery."""
    return {**doc, "trials": consistent_trials(doc)}


def trust_runner(settings, key=None, name: str = RUNNER):
    """A runner key (kb/runners.Signer) the project of `settings` trusts: `key`, trusted there as
    `name` (`luma runner trust`), or else a new key made there (`luma runner keygen --name`)."""
    from luma.kb.trust import attestation
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.operations.runner_keys import keygen, trust
    from luma.kb.trust.runners import signer

    with KnowledgeBase.open(settings) as kb:
        if key is not None:
            trust(kb, attestation.public_bytes(key.private_key), name)
            return key
        made = keygen(kb, name)
    return signer(settings.home, made.name)


def sign_files(key, folder: Path, *paths: Path) -> list[Path]:
    """Signed copies of record files in `folder`: same names, same formats (`luma runner sign --out`)."""
    from luma.kb.records.signed_files import sign_files as sign

    return [path for path, _ in sign([Path(p) for p in paths], key, Path(folder))]


def write_signed(key, path: Path, *docs: dict) -> Path:
    """Write the records `docs`, signed, to `path` in the format its suffix names (one record as
    an object, several as a list; JSON Lines one per line)."""
    path = Path(path)
    if path.suffix in (".jsonl", ".ndjson"):
        text = "".join(json.dumps(d) + "\n" for d in docs)
    else:  # JSON is YAML too: signing in place writes it as YAML proper
        text = json.dumps(docs[0] if len(docs) == 1 else list(docs))
    path.write_text(text)
    sign_files(key, path.parent, path)
    return path


class Evidence:
    """The helpers above, for tests and fixtures of any scope (`evidence.with_trials(doc)`)."""

    consistent_trials = staticmethod(consistent_trials)
    with_trials = staticmethod(with_trials)
    trust_runner = staticmethod(trust_runner)
    sign_files = staticmethod(sign_files)
    write_signed = staticmethod(write_signed)


@pytest.fixture(scope="session")
def evidence() -> type[Evidence]:
    return Evidence


@pytest.fixture
def runner_key(luma_home):
    """A runner key made in the `luma_home` project and trusted there (kb/runners.Signer)."""
    from luma.settings import Settings

    return trust_runner(Settings.from_env(home=luma_home))


@pytest.fixture
def signed(runner_key, tmp_path):
    """`signed(source, name=None) -> Path`: a copy signed by `runner_key`, under tmp_path/signed,
    of a record file (same name and format) or of a record dict (written as `name`, else
    `record-N.json`)."""
    folder = tmp_path / "signed"
    folder.mkdir(exist_ok=True)
    made = []

    def sign(source, name: str | None = None) -> Path:
        made.append(source)
        if isinstance(source, dict):
            return write_signed(runner_key, folder / (name or f"record-{len(made)}.json"), source)
        if name is not None:
            raise ValueError("a file's signed copy keeps its name")
        return sign_files(runner_key, folder, source)[0]

    return sign


# -- a listener that must see nothing -----------------------------------------------------------


@pytest.fixture(scope="module")
def listener():
    """A local HTTP listener that must never see a request (tests/listener.py)."""
    server = Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
