"""The pilot end to end on the NumPy matvec service: real servers, live traffic, decisions as
signed records, SIGKILL at a random moment and `--resume`. The library is two states whose
qualification records give capacities of 400/s and 800/s (a batch of 8 in 20 and 10 ms), so the
model predicts the one-core state to pass at 100/s and miss at 350/s: the trace makes the
controller downscale, upscale and downscale again, while the real servers answer in milliseconds
and every window holds enough requests for a conclusive verdict."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

from .test_library import _ingest, _trial

#: A step from 100/s to 520/s, above the 1-core state's qualified capacity (400/s in the library
#: fixture): whether the pilot must switch depends on the live host (its capacity is re-measured on
#: live windows, issue 32); the controller's switches are driven deterministically in test_control.py.
TRACE = "time_s,rate\n0,100\n9,100\n9,520\n18,520\n18,100\n27,100\n"


@pytest.fixture
def library(luma_home, signed, pilot_contract):
    from luma.experiments.sprint import contract as contract_mod

    c = contract_mod.load(pilot_contract)
    _ingest([signed(_trial(c, 1, seq=0, throughput=400)), signed(_trial(c, 1, seq=1, throughput=400)),
             signed(_trial(c, 2, seq=2, throughput=800)), signed(_trial(c, 2, seq=3, throughput=800))])
    return c


@pytest.fixture
def trace_file(tmp_path):
    p = tmp_path / "steps.csv"
    p.write_text(TRACE)
    return p


def _alive(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _servers_gone(folder: Path) -> bool:
    for doc in folder.glob("service-*.json"):
        d = json.loads(doc.read_text())
        for inst in [d.get("active"), *d.get("others", [])]:
            if inst and _alive(inst["pid"]):
                return False
    return True


def _kill_servers(folder: Path) -> None:
    for status in folder.glob("servers/*.status"):
        pid = json.loads(status.read_text()).get("pid")
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_pilot_switches_states_records_decisions_and_reports(library, trace_file, pilot_contract, luma_home, tmp_path):
    out = CliRunner().invoke(cli, ["pilot", "run", str(pilot_contract), "--trace", str(trace_file), "--format", "json"])
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    folder = Path(res["folder"])
    try:
        summary = json.loads((folder / "pilot.json").read_text())
        keys = {s["key"] for s in summary["library"]}
        windows = summary["segments"][0]["windows"]
        assert len(windows) == 9 and all(w["state"] in keys for w in windows)
        assert {s["name"] for s in summary["segments"]} >= {"pilot", "static-largest", "hindsight-best"}
        decisions = summary["decisions"]
        # The live host decides whether the 1-core state holds the step (its capacity is re-measured
        # on live windows): a window that failed is followed by a switch, never a second one on it.
        # (Upscales themselves are driven deterministically in test_control.py.)
        for a, b in zip(windows, windows[1:]):
            assert not (a["verdict"] == "FAIL" and b["verdict"] == "FAIL" and a["state"] == b["state"]), (a, b)
        if any(w["verdict"] == "FAIL" for w in windows):
            assert any(d["action"] in ("upscale", "breach-upscale") for d in decisions)
        if not decisions:  # no switch: every window held the contract on the state in force
            assert all(w["verdict"] == "PASS" for w in windows), windows
        assert all(d["to"] in keys and d["record"] for d in decisions)
        f = summary["figures"]
        assert {"saving_vs_static", "outside_share", "vs_hindsight"} <= set(f)
        assert summary["energy"]["evidence_class"] in ("simulated", "measured")
        # Decisions are measured, signed evidence in the KB, and the named queries read them.
        q = CliRunner().invoke(cli, ["kb", "query", "--name", "pilot-realized-value", "--format", "json"])
        assert q.exit_code == 0, q.output
        rows = json.loads(q.stdout)
        rows = rows.get("results", {}).get("bindings", rows) if isinstance(rows, dict) else rows
        assert bool(rows) == bool(decisions)  # one realized-value row per decision recorded
        rep = CliRunner().invoke(cli, ["report", "pilot", res["run"], "--out", str(tmp_path / "rep")])
        assert rep.exit_code == 0, rep.output
        md = (tmp_path / "rep" / "report.md").read_text()
        assert res["run"] in md and "simulated" in md
    finally:
        _kill_servers(folder)
    assert _servers_gone(folder)


@pytest.mark.slow
def test_sigkill_leaves_a_library_state_serving_and_resume_finishes(library, trace_file, pilot_contract, luma_home):
    env = {**os.environ, "LUMA_HOME": str(luma_home)}
    cmd = [sys.executable, "-m", "luma.cli.main", "pilot", "run", str(pilot_contract), "--trace", str(trace_file),
           "--no-baselines"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(random.Random(os.getpid()).uniform(6, 16))  # any moment: imports, start, mid-window, mid-switch
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    (folder,) = list((luma_home / "pilots").iterdir())
    run_id = folder.name
    try:
        library_keys = set(json.loads((folder / "run.json").read_text())["library"])
        doc = json.loads((folder / "service-pilot.json").read_text())
        active = doc["active"]
        assert active["key"] in library_keys and _alive(active["pid"])  # the service is still serving
        for other in doc["others"]:
            assert other["key"] in library_keys
        assert not list(folder.glob(".*.tmp"))  # nothing half-written
        for p in folder.glob("decision-*.json"):
            rec = json.loads(p.read_text())
            assert rec["record_type"] == "pilot-decision" and rec["attestation"]
        out = subprocess.run([sys.executable, "-m", "luma.cli.main", "pilot", "run", "--resume", run_id,
                              "--no-baselines", "--format", "json"], env=env, capture_output=True, text=True,
                             timeout=180)
        assert out.returncode == 0, out.stderr[-2000:]
        lines = [json.loads(x) for x in (folder / "journal.jsonl").read_text().splitlines()]
        assert [x["window"]["index"] for x in lines] == list(range(9))
        summary = json.loads((folder / "pilot.json").read_text())
        assert summary["finished"] and len(summary["segments"][0]["windows"]) == 9
        seqs = [d["sequence"] for d in summary["decisions"]]
        assert seqs == sorted(set(seqs))  # no decision twice
    finally:
        _kill_servers(folder)
