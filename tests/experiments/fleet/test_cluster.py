"""Campaigns on a real Ray cluster: three runner nodes started on 127.0.0.1 by `luma runner
join` (each its own LUMA_HOME, so its own runner key; the head's cluster token copied to the
others), two labelled machine classes (a: two nodes, b: one), and a campaign head that is a
separate `luma campaign run` process with its own project. Slow: the cluster starts once for
the module; the node-kill test runs last. Each `luma runner join` runs in a session of its own,
and the module stops those sessions' processes only (conftest.py), never `ray stop`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

LUMA = str(Path(sys.executable).parent / "luma")
TOKEN = Path("keys") / "ray-auth-token"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LUMA_", "RAY_"))}
    # A dead node is noticed in ~3 s instead of Ray's ~30 s default.
    env.update(LUMA_HOME=str(home), RAY_health_check_period_ms="1000", RAY_health_check_timeout_ms="1000",
               RAY_health_check_failure_threshold="3", RAY_health_check_initial_delay_ms="1000")
    return env


def _luma(home: Path, *args, check=True, timeout=300, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run([LUMA, *args], env={**_env(home), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


class Cluster:
    def __init__(self, root: Path, processes):
        self.root, self.address, self.processes = root, f"127.0.0.1:{_free_port()}", processes
        self.nodes = {name: root / name for name in ("n0", "n1", "n2")}  # n0 heads the cluster
        self.classes = {"n0": "a", "n1": "a", "n2": "b"}
        self.head = root / "campaign-head"  # the project that runs campaigns (no node)
        self.session: dict[str, int] = {}
        self.joined: dict[str, str] = {}  # what each join printed on stderr

    def join(self, name: str) -> None:
        home = self.nodes[name]
        args = ["--head", "--port", self.address.split(":")[1]] if name == "n0" else [self.address]
        if name != "n0":
            self.share_token(home)  # the operator copies the head's token to each runner
        proc = subprocess.Popen([LUMA, "runner", "join", *args, "--label", f"class={self.classes[name]}",
                                 "--node-ip-address", "127.0.0.1", "--cpus", "1", "--no-block"], env=_env(home),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.processes.add(proc.pid)
        self.session[name] = proc.pid
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        self.joined[name] = err

    def start(self) -> None:
        for name in self.nodes:
            self.join(name)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(self.alive()) < 3:
            time.sleep(1)
        assert len(self.alive()) == 3
        self.head.mkdir()
        _luma(self.head, "kb", "init")
        self.share_token(self.head)

    def share_token(self, home: Path) -> None:
        (home / "keys").mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(self.nodes["n0"] / TOKEN, home / TOKEN)
        os.chmod(home / TOKEN, 0o600)

    def alive(self) -> dict[str, str]:
        """The live nodes: runner key -> Ray node ID."""
        code = ("import ray, json; from luma.experiments.fleet.loopback import keep_loopback; keep_loopback(); "
                "ray.init(address=%r, log_to_driver=False, logging_level='ERROR'); "
                "print(json.dumps({n['Labels'].get('luma-runner-key'): n['NodeID'] for n in ray.nodes() "
                "if n['Alive']}))" % self.address)
        env = {**_env(self.head), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.nodes["n0"] / TOKEN)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=90)
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}

    def key(self, name: str) -> str:
        pub = next((self.nodes[name] / "keys").glob("*.pub"))
        return pub

    def trust(self, name: str) -> None:
        _luma(self.head, "runner", "trust", str(self.key(name)), "--name", name)

    def fingerprint(self, name: str) -> str:
        out = _luma(self.nodes[name], "runner", "list", "--format", "json").stdout
        return json.loads(out)[0]["fingerprint"]

    def kill(self, name: str) -> list[int]:
        """The machine dies: every process of its `luma runner join` (raylet, agents, workers, trials)."""
        return self.processes.stop({self.session[name]}, grace_s=0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, ray_processes):
    c = Cluster(tmp_path_factory.mktemp("fleet"), ray_processes)
    c.start()
    return c  # ray_processes stops every process of the module's joins


def test_the_cluster_listens_on_loopback_only_and_wants_its_token(cluster, listening_ports, tmp_path):
    listening, loopback = listening_ports
    pids = cluster.processes.pids()
    ports = listening(pids)
    gcs = int(cluster.address.split(":")[1])
    assert gcs in {port for _, _, port in ports} and len({pid for pid, _, _ in ports}) >= 4  # GCS, 3 raylets
    assert [p for p in ports if not loopback(p[1])] == []
    assert "token authentication: on" in cluster.joined["n0"] and "made now" in cluster.joined["n0"]
    assert "token authentication: on" in cluster.joined["n1"] and "made now" not in cluster.joined["n1"]
    gcs_pid = next(pid for pid, _, port in ports if port == gcs)
    env = open(f"/proc/{gcs_pid}/environ", "rb").read().split(b"\0")
    assert b"RAY_AUTH_MODE=token" in env
    # A driver without the token is refused (Ray retries for its reconnect timeout first).
    code = ("import ray; from luma.experiments.fleet.loopback import keep_loopback; keep_loopback(); "
            "ray.init(address=%r, log_to_driver=False, logging_level='ERROR'); print('joined')" % cluster.address)
    bare = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**_env(tmp_path), "RAY_gcs_rpc_server_reconnect_timeout_s": "5"})
    assert bare.returncode != 0 and "joined" not in bare.stdout
    assert "InvalidAuthToken" in bare.stderr or "Unauthenticated" in bare.stderr, bare.stderr[-2000:]
    # A campaign head without a copy of the token says how to get one, before it tries.
    (tmp_path / "p").mkdir()
    _luma(tmp_path / "p", "kb", "init")
    plan = _luma(tmp_path / "p", "campaign", "plan", str(_campaign(tmp_path, "tokenless")), "--cluster",
                 cluster.address, check=False)
    assert plan.returncode == 1 and "no token for the Ray cluster" in plan.stderr, plan.stderr


def _contracts(folder: Path) -> None:
    from luma.experiments.sprint import contract

    text = contract.shipped()["matvec-memory"].read_text()
    (folder / "matvec-memory-2c.toml").write_text(
        text.replace('name = "matvec-memory"', 'name = "matvec-memory-2c"').replace("concurrency = 4",
                                                                                     "concurrency = 2"))


def _campaign(folder: Path, name: str, classes=("a", "b"), wait_s=8.0) -> Path:
    _contracts(folder)
    arch = "\n".join(f"[architectures.{c}]\nlabels = {{ \"class\" = \"{c}\" }}\n" for c in classes)
    path = folder / f"{name}.toml"
    path.write_text(f'name = "{name}"\ntrial_budget = 200\ntrial_seconds = 1\nrunner_wait_s = {wait_s}\n'
                    '[[contracts]]\ncontract = "matvec-memory"\n[[contracts]]\ncontract = "matvec-memory-2c.toml"\n'
                    + arch)
    return path


def _records(home: Path, campaign_id: str, db_url: str | None = None) -> list[dict]:
    """The records the campaign's head took in, read back from its ledger (SQLite or PostgreSQL)."""
    from luma.kb.store.ledger import Ledger

    ledger = Ledger(db_url or f"sqlite:///{home / 'ledger.sqlite'}")
    try:
        rows = ledger.rows_of_kinds(["pex-trial", "pex-chain"], "kind", "payload",
                                    submitter=f"luma campaign {campaign_id}")
    finally:
        ledger.dispose()
    return [{"kind": k, **json.loads(p)} for k, p in rows]


def _unit_of(record: dict) -> tuple[str, str]:
    """The campaign unit a trial or chain belongs to: its contract and its machine class."""
    return record["contract"]["name"], record["provenance"]["fleet"]["machine_class"]


def _stopped_for_the_host(trials: list[dict]) -> bool:
    """Whether a sprint's trials end the way a sprint stops on a host too contended to qualify: its
    last trial INCONCLUSIVE `host-contended` through every retry. Three runners on two vCPUs share
    every core, so a trial restored to all of them (a diagnosis restores compute to the host's
    maximum) counts the other nodes' Ray daemons as tenants; measured on an AVX2 host, those
    trials read a median 8.5 % other tenants against the judge's 10 % (one-core trials: 0 %). The
    sprint then refuses to qualify rather than record a chain a neighbour could have bent."""
    from luma.experiments.sprint.trial import CONTENDED_RETRIES
    from luma.kb.records.judge import CONTENDED

    last = max(trials, key=lambda r: r["sequence"])
    return (last["verdict"] == "INCONCLUSIVE" and last.get("failure_cause") == CONTENDED
            and last["attempts"] == CONTENDED_RETRIES + 1)


def _one_set_per_unit(records: list[dict], units: int) -> set[tuple[str, str]]:
    """Check the campaign's records: one sprint per unit, no trial twice, no half sprint, and one
    chain for each unit whose sprint did not stop for its host (`_stopped_for_the_host`); those
    stopped units, as (contract, class). How many stop is the host's business (CPU steal of 14-20 %
    was seen on the 2-vCPU CI host): what is checked holds for the trials of every unit."""
    trials = [r for r in records if r["kind"] == "pex-trial"]
    by_sprint: dict[str, list[dict]] = {}
    for r in trials:
        by_sprint.setdefault(r["sprint"], []).append(r)
    assert len(by_sprint) == units
    assert all(len({_unit_of(r) for r in rows}) == 1 for rows in by_sprint.values())
    keys = [(r["sprint"], r["sequence"]) for r in trials]
    assert len(keys) == len(set(keys))  # no trial twice
    for sprint, rows in by_sprint.items():
        seq = sorted(r["sequence"] for r in rows)
        assert seq == list(range(len(seq)))  # no half sprint: every trial from the first on
    stopped = {_unit_of(rows[0]) for rows in by_sprint.values() if _stopped_for_the_host(rows)}
    chains = sorted(_unit_of(r) for r in records if r["kind"] == "pex-chain")
    assert chains == sorted({_unit_of(rows[0]) for rows in by_sprint.values()} - stopped)
    return stopped


def test_a_node_whose_key_is_not_trusted_gets_no_trials(cluster, tmp_path):
    cluster.trust("n0")
    cluster.trust("n1")  # n2 (class b) is not trusted yet
    path = _campaign(tmp_path, "untrusted", classes=("b",), wait_s=4)
    run = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json",
                check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    state = json.loads(run.stdout)
    assert {u["status"] for u in state["units"]} == {"lost"}
    assert all("no live trusted runner of class b" in u["note"] for u in state["units"])
    sprints = cluster.nodes["n2"] / "sprints"
    assert not (sprints.is_dir() and list(sprints.glob("untrusted-*")))  # no trial ran on n2
    assert _records(cluster.head, state["id"]) == []
    plan = json.loads(_luma(cluster.head, "campaign", "plan", str(path), "--cluster", cluster.address,
                            "--format", "json").stdout)
    (b,) = plan["classes"]
    assert b["machines"] == 0 and b["untrusted"] == 1 and "1 runner of this class not trusted here" in b["note"]


def test_two_contracts_on_two_classes_run_in_parallel_each_chain_signed_by_its_node(cluster, tmp_path):
    cluster.trust("n2")
    path = _campaign(tmp_path, "two-classes")
    run = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json")
    state = json.loads(run.stdout)
    assert state["status"] == "completed" and len(state["units"]) == 4
    assert state["wall_s"] < state["sum_of_units_s"] and state["parallelism"] > 1.2
    fps = {name: cluster.fingerprint(name) for name in cluster.nodes}
    records = _records(cluster.head, state["id"])
    stopped = _one_set_per_unit(records, 4)
    for unit in state["units"]:
        assert unit["status"] == "done", unit
        node = next(n for n, fp in fps.items() if fp.startswith(unit["key"]))
        assert cluster.classes[node] == unit["machine_class"]
        mine = [r for r in records if _unit_of(r) == (unit["contract"], unit["machine_class"])]
        assert mine and all(r["attestation"]["key"] == fps[node] and r["evidence_class"] == "measured"
                            and r["provenance"]["fleet"]["labels"]["class"] == unit["machine_class"] for r in mine)
        if (unit["contract"], unit["machine_class"]) in stopped:
            assert not unit["chain"] and "no chain: host too contended to qualify" in unit["note"], unit
        else:
            assert unit["min_pass"] and unit["recovered"] is True and unit["chain"], unit
            assert sum(r["kind"] == "pex-chain" for r in mine) == 1
    plan = json.loads(_luma(cluster.head, "campaign", "plan", str(path), "--cluster", cluster.address,
                            "--format", "json").stdout)
    assert {r["class"]: r["machines"] for r in plan["classes"]} == {"a": 2, "b": 1}
    bench = json.loads(_luma(cluster.head, "campaign", "bench", "--cluster", cluster.address, "--repeat", "5",
                             "--format", "json").stdout)
    measures = {r["measure"].split(" (")[0]: r for r in bench}
    assert measures["empty task round trip"]["vs_baseline"] == 1.0
    assert measures["unit-shaped task round trip"]["value"] > 0 and measures["head ingest rate"]["value"] > 0
    status = _luma(cluster.head, "campaign", "status", state["id"], "--format", "json")
    assert json.loads(status.stdout)["status"] == "completed"
    listing = _luma(cluster.head, "campaign", "status", "--format", "csv")
    assert state["id"] in listing.stdout
    again = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json")
    assert all("earlier run" in u.get("note", "") for u in json.loads(again.stdout)["units"])
    assert len(_records(cluster.head, state["id"])) == len(records)  # nothing ran twice


def _start(cluster, path: Path) -> subprocess.Popen:
    return subprocess.Popen([LUMA, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json"],
                            env=_env(cluster.head), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(predicate, timeout=180, what="") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_head_that_dies_resumes_from_the_ledger(cluster, tmp_path):
    from luma.experiments.fleet import campaign

    path = _campaign(tmp_path, "restart")
    cid = campaign.load(path).id
    proc = _start(cluster, path)
    _wait(lambda: len({r.get("sprint") for r in _records(cluster.head, cid)}) >= 1, what="a first sprint recorded")
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    first = {r.get("sprint") for r in _records(cluster.head, cid) if r["kind"] == "pex-trial"}
    assert 1 <= len(first) < 4
    status = json.loads(_luma(cluster.head, "campaign", "status", cid, "--format", "json").stdout)
    assert status["status"] == "interrupted"
    run = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json")
    state = json.loads(run.stdout)
    assert state["status"] == "completed"
    resumed = [u for u in state["units"] if "earlier run" in u.get("note", "")]
    assert {f"{cid}--{u['unit']}" for u in resumed} == first
    _one_set_per_unit(_records(cluster.head, cid), 4)


def test_a_campaign_can_be_cancelled_and_resumed(cluster, tmp_path):
    from luma.experiments.fleet import campaign

    path = _campaign(tmp_path, "cancel")
    cid = campaign.load(path).id
    proc = _start(cluster, path)
    _wait(lambda: (cluster.head / "campaigns" / cid / "state.json").is_file(), what="the campaign's state")
    second = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, check=False)
    assert second.returncode == 1 and "already running" in second.stderr
    _luma(cluster.head, "campaign", "cancel", cid)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1 and json.loads(out)["status"] == "cancelled"
    done = {r.get("sprint") for r in _records(cluster.head, cid) if r["kind"] == "pex-trial"}
    assert len(done) < 4
    run = _luma(cluster.head, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json")
    assert json.loads(run.stdout)["status"] == "completed"
    _one_set_per_unit(_records(cluster.head, cid), 4)


def test_a_head_on_a_shared_postgresql_ledger(cluster, tmp_path, pg_url):
    """The shared deployment: the head's ledger is PostgreSQL (LUMA_DB_URL)."""
    from luma.experiments.fleet import campaign

    home = tmp_path / "pg-head"
    home.mkdir()
    pg = {"LUMA_DB_URL": pg_url}
    _luma(home, "kb", "init", env=pg)
    cluster.share_token(home)
    for name in cluster.nodes:
        if name != "n1":
            _luma(home, "runner", "trust", str(cluster.key(name)), "--name", name, env=pg)
    path = _campaign(tmp_path, "postgres")
    run = _luma(home, "campaign", "run", str(path), "--cluster", cluster.address, "--format", "json", env=pg)
    assert json.loads(run.stdout)["status"] == "completed"
    records = _records(home, campaign.load(path).id, pg_url)
    _one_set_per_unit(records, 4)
    assert not (home / "ledger.sqlite").exists()


def test_a_node_killed_mid_sprint_costs_a_rerun_never_a_half_record(cluster, tmp_path):
    from luma.experiments.fleet import campaign

    path = _campaign(tmp_path, "node-kill")
    cid = campaign.load(path).id
    proc = _start(cluster, path)
    victim = cluster.nodes["n1"] / "sprints"
    _wait(lambda: victim.is_dir() and any(victim.glob(f"{cid}--*/trial-000.json")), what="a trial on n1")
    unit = next(victim.glob(f"{cid}--*/trial-000.json")).parent.name
    n1_node = cluster.alive()[cluster.fingerprint("n1")]
    assert cluster.kill("n1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    state = json.loads(out)
    assert state["status"] == "completed"
    retried = next(u for u in state["units"] if f"{cid}--{u['unit']}" == unit)
    assert retried["status"] == "done" and retried["attempts"] == 2, retried
    assert retried["retried_after"] == [{"node": n1_node[:12], "host": retried["host"], "ended": "died"}]
    assert f"node {n1_node[:12]}" in retried["note"] and "died" in retried["note"]
    assert all(u["attempts"] == 1 for u in state["units"] if u is not retried)
    assert f"run 2 times; node {n1_node[:12]}" in err  # the progress line says it,
    assert "retries remaining" not in err  # not Ray's paragraph
    shown = _luma(cluster.head, "campaign", "status", cid, "--format", "csv").stdout
    assert "attempts" in shown.splitlines()[0] and "died" in shown
    records = _records(cluster.head, cid)
    _one_set_per_unit(records, 4)
    n1 = cluster.fingerprint("n1")
    entry = next(u for u in state["units"] if f"{cid}--{u['unit']}" == unit)
    moved = [r for r in records if r.get("sprint") == unit or (
        r["kind"] == "pex-chain" and r["provenance"]["fleet"]["machine_class"] == entry["machine_class"]
        and r["contract"]["name"] == entry["contract"])]
    assert moved and all(r["attestation"]["key"] != n1 for r in moved)  # re-run on n0, nothing of n1's attempt
    assert len(cluster.alive()) == 2
