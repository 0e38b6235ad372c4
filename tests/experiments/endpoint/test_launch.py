"""The endpoint runner's launch hooks without an engine: a server that cannot start at a state is
a FAIL with cause `launch` and its log tail (never a crash of the sprint); placeholders take the
state's levels; limits land on the server process, not on the load generator."""

from __future__ import annotations

import os
import sys
import time

import pytest

from luma.experiments.sprint import contract, trial
from luma.experiments.endpoint import launch
from luma.experiments.endpoint.service import EndpointService
from luma.experiments.endpoint.spec import EndpointSpec
from luma.experiments.sprint.states import State, parse_level

SPEC = {"kind": "openai-endpoint", "api": "embeddings", "engine": "test", "baseline": "a",
        "workload": {"name": "w", "model": "m", "task": "embedding"},
        "variants": {"a": {"model": "m"}}, "startup_timeout_s": 3}


def _contract(tmp_path, launch_cmd: list[str], timeout_s: int = 20, **extra):
    import json

    service = {**SPEC, "launch": launch_cmd, **extra}
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in service.items() if not isinstance(v, dict))
    tables = "\n".join(f"[service.{k}]\n" + "\n".join(f"{kk} = {json.dumps(vv) if not isinstance(vv, dict) else '{' + ', '.join(f'{a} = {json.dumps(b)}' for a, b in vv.items()) + '}'}"
                                                       for kk, vv in v.items())
                       for k, v in service.items() if isinstance(v, dict))
    path = tmp_path / "c.toml"
    path.write_text(f'name = "launch-test"\n[[clauses]]\nmetric = "p95_latency"\nop = "<="\nvalue = 1\nunit = "s"\n'
                    f"[load]\nrequests = 10\nwarmup = 0\ntimeout_s = {timeout_s}\n[service]\n{body}\n{tables}\n")
    return contract.load(str(path))


def _trial(c, tmp_path, **levels):
    state = State.of({"compute": parse_level("compute", "1 core"),
                      **{k: parse_level(k, v) for k, v in levels.items()}})
    svc = EndpointService(c.endpoint)
    return trial.run_trial(c, state, svc.prepare("a", tmp_path), "a", "boundary", max_retries=0,
                           service_spec=svc.trial_spec(tmp_path))


def test_a_server_that_exits_at_start_is_a_launch_fail_with_its_log_tail(tmp_path):
    c = _contract(tmp_path, ["{python}", "-c", "import sys; print('no model at this state'); sys.exit(3)", "{port}"])
    t = _trial(c, tmp_path)
    assert (t.verdict, t.cause) == ("FAIL", "launch")
    assert "exited with code 3 before it was ready" in t.telemetry["error"]
    assert "no model at this state" in t.telemetry["log_tail"]


def test_a_launch_fail_names_the_error_its_server_died_of(tmp_path):
    """The one-line message carries the log's last exception, not only the exit code."""
    code = "import sys; print('loading'); print('numpy.MemoryError: Unable to allocate 59.6 MiB', file=sys.stderr); " \
           "print('~llama_context: freed'); sys.exit(1)"
    t = _trial(_contract(tmp_path, ["{python}", "-c", code, "{port}"]), tmp_path)
    assert t.cause == "launch"
    assert t.telemetry["error"].endswith("before it was ready: numpy.MemoryError: Unable to allocate 59.6 MiB")


@pytest.mark.parametrize("log, line", [
    ("a\nTraceback (most recent call last):\n  x\nRuntimeError: boom\nbye", "RuntimeError: boom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", "terminate called after throwing an instance of 'std::bad_alloc'"),
    ("all fine\nready", ""),
    ("", ""),
])
def test_last_error_line(log, line):
    assert launch.last_error_line(log) == line


def test_a_server_that_never_answers_ready_is_a_launch_fail(tmp_path):
    c = _contract(tmp_path, ["{python}", "-c", "import time; time.sleep(60)", "{port}"])
    t = _trial(c, tmp_path)
    assert (t.verdict, t.cause) == ("FAIL", "launch")
    assert "did not answer /v1/models within 3 s" in t.telemetry["error"]


def test_a_missing_engine_binary_is_a_launch_fail(tmp_path):
    c = _contract(tmp_path, ["/nonexistent/engine-server", "--port", "{port}"])
    t = _trial(c, tmp_path)
    assert (t.verdict, t.cause) == ("FAIL", "launch") and "cannot run" in t.telemetry["error"]


def test_limits_and_placeholders_reach_the_server_process(tmp_path):
    """The server writes what it sees (argv, affinity, RLIMIT_DATA, env) and exits: a launch FAIL
    whose log shows the hooks applied."""
    probe = ("import os, resource, sys; print('ARGS', sys.argv[1:]); print('CORES', len(os.sched_getaffinity(0))); "
             "print('DATA', resource.getrlimit(resource.RLIMIT_DATA)[0]); print('ENV', os.environ.get('X_LEVEL')); "
             "sys.exit(1)")
    c = _contract(tmp_path, ["{python}", "-c", probe, "--threads", "{threads}", "--port", "{port}"],
                  env={"X_LEVEL": "mem={host_memory}"})
    t = _trial(c, tmp_path, host_memory="512 MiB")
    log = t.telemetry["log_tail"]
    assert "'--threads', '1'" in log and "CORES 1" in log
    assert f"DATA {512 * 2**20}" in log and f"ENV mem={512 * 2**20}" in log


def test_rendering_refuses_a_placeholder_the_state_has_no_level_for():
    spec = EndpointSpec.model_validate({**SPEC, "launch": ["x", "--ctx", "{kv_cache}", "{port}"]})
    vals = launch.values(spec, {"compute": 1}, "m", "a", 1234)
    with pytest.raises(ValueError, match="uses {kv_cache} but this state has no level"):
        launch.render(spec.launch, vals)
    assert launch.render(["{python}", "{port}", "{threads}"], vals) == [sys.executable, "1234", "1"]


def test_the_load_generator_keeps_off_the_server_cores():
    cores = launch.server_cores({"compute": 1})
    assert cores == sorted(os.sched_getaffinity(0))[:1]


def test_a_kv_byte_level_becomes_whole_token_blocks_and_none_is_refused():
    spec = EndpointSpec.model_validate({**SPEC, "kv_token_block": 256, "launch": ["x", "{kv_tokens}", "{port}"],
                                        "variants": {"a": {"model": "m", "kv_bytes_per_token": 272}}})
    assert launch.values(spec, {"kv_cache": 192 * 1024}, "m", "a", 1)["kv_tokens"] == 512  # 722 tokens fit
    assert launch.values(spec, {"kv_cache": 600}, "m", "a", 1, {"kv_cache": "token"})["kv_tokens"] == 600
    with pytest.raises(launch.KVBudgetError, match="holds no whole block of 256 tokens"):
        launch.values(spec, {"kv_cache": 64 * 1024}, "m", "a", 1)  # 240 tokens: not one block


def _record(c, t) -> dict:
    """The signed trial record the sprint writes of `t` (validated as ingest validates it)."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from luma.experiments.sprint.records import trial_record
    from luma.kb.records.loader import validate_document

    rec = trial_record(SimpleNamespace(contract=c), "s-1", t, datetime.now(timezone.utc))
    validate_document(rec, "trial-000.json")
    return rec


def test_the_trial_record_of_a_launch_fail_carries_the_error_its_server_died_of(tmp_path):
    """Issue 32: the record that gets signed says why, not only the unsigned sprint.json."""
    code = "import sys; print('numpy.MemoryError: Unable to allocate 59.6 MiB', file=sys.stderr); sys.exit(1)"
    c = _contract(tmp_path, ["{python}", "-c", code, "{port}"])
    rec = _record(c, _trial(c, tmp_path, host_memory="256 MiB"))
    assert (rec["verdict"], rec["failure_cause"]) == ("FAIL", "launch")
    assert rec["failure_message"] == ("the server exited with code 1 before it was ready: "
                                      "numpy.MemoryError: Unable to allocate 59.6 MiB")


SLOW_SERVER = """
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers(); self.wfile.write(b'ok')
    def do_POST(self):
        time.sleep(30)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"""


def test_an_endpoint_trial_past_its_time_out_says_how_far_it_got(tmp_path):
    c = _contract(tmp_path, ["{python}", "-c", SLOW_SERVER, "{port}"], timeout_s=2)
    t = _trial(c, tmp_path)
    rec = _record(c, t)
    assert (rec["verdict"], rec["failure_cause"]) == ("FAIL", "timeout")
    assert rec["failure_message"] == (f"the serve phase ran past the trial's time-out of 2 s: 0 of {t.requests} "
                                      "request(s) completed")


def _gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_stopped_server_takes_the_processes_it_started_with_it(tmp_path):
    # An engine's workers (vLLM's EngineCore) are children of its server: stopping the server
    # alone left them running into the next trial, holding memory and counted as another tenant.
    pid_file = tmp_path / "child.pid"
    server = ("import pathlib, subprocess, sys, time; "
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
              f"pathlib.Path({str(pid_file)!r}).write_text(str(c.pid)); time.sleep(120)")
    c = _contract(tmp_path, ["{python}", "-c", server, "{port}"])
    t = _trial(c, tmp_path)
    assert (t.verdict, t.cause) == ("FAIL", "launch")  # never answered ready: stopped at the deadline
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)
