"""The pilot server's control socket (experiments/pilot/server.py, serving.py): a private folder,
peer credentials and a per-server token, and a server that outlives any line a peer sends."""

from __future__ import annotations

import json
import os
import random
import selectors
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.experiments.pilot import server
from luma.experiments.pilot.serving import Instance, Request, Tracker
from luma.experiments.services.matvec import MatvecService

TOKEN = "ab" * 32


def _spec(cache: Path) -> dict:
    return {"service": "matvec", "artifact": str(MatvecService().prepare("fp32", cache)), "variant": "fp32",
            "state": {"compute": 1, "host_memory": 64 << 20}, "threads": None, "replicas": 1, "max_batch": 8,
            "load": {}, "contexts": [None], "seed": 0, "orphan_s": 120, "deadline_s": 5}


def _start(folder: Path, cache: Path) -> Instance:
    inst = Instance(folder, "k", _spec(cache), Tracker())
    inst.start()
    inst.wait_ready(60)
    return inst


def _stop(*insts: Instance) -> None:
    for inst in insts:
        inst.kill()
    for inst in insts:
        inst.wait_gone(10)


@pytest.fixture
def live(tmp_path):
    inst = _start(tmp_path / "run" / "servers", tmp_path / "cache")
    yield inst
    _stop(inst)


_next_id = iter(range(10**6))


def _serves(inst: Instance, timeout: float = 20.0) -> bool:
    """Whether a request sent through `inst` is answered (bounded wait, not a timing check)."""
    rid = next(_next_id)
    r = Request(rid, 0.0, time.perf_counter(), 0, inst.key)
    inst.tracker.add(r)
    assert inst.send({"op": "req", "id": rid, "c": None, "t": r.at})
    deadline = time.monotonic() + timeout
    while r.done is None and r.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return r.done is not None


def _raw(inst: Instance) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    for _ in range(1000):
        try:
            s.connect(inst.spec["socket"])
            return s
        except BlockingIOError:  # its backlog is full for a moment
            time.sleep(0.01)
    raise AssertionError("the server does not accept connections")


def _replies(s: socket.socket) -> tuple[list[dict], bool]:
    """Every line the server sent until it closed the connection (or went quiet), and whether it closed."""
    buf, closed = b"", False
    try:
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                closed = True
                break
            buf += chunk
    except socket.timeout:
        pass
    except OSError:  # reset: it closed with our unread bytes still queued
        closed = True
    return [json.loads(x) for x in buf.split(b"\n") if x], closed


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- where the socket lives -----------------------------------------------------------------


def test_socket_lives_in_the_private_run_folder(live):
    folder = live.folder
    assert Path(live.spec["socket"]).parent == folder and live.spec["socket_tmpdir"] is None
    assert _mode(folder) == 0o700 and os.lstat(folder).st_uid == os.geteuid()
    assert _mode(live.spec["socket"]) == 0o600
    assert _mode(folder / f"{live.name}.json") == 0o600  # the spec holds the token
    assert _serves(live)


def test_a_long_run_folder_gets_a_random_private_temporary_folder_that_resume_finds(tmp_path):
    folder = tmp_path / ("x" * 120) / "servers"
    inst = _start(folder, tmp_path / "cache")
    again = None
    try:
        sock_dir = Path(inst.spec["socket"]).parent
        assert str(sock_dir) == inst.spec["socket_tmpdir"]
        assert sock_dir.parent == Path(tempfile.gettempdir()) and sock_dir.name.startswith("luma-pilot-")
        assert _mode(sock_dir) == 0o700 and os.lstat(sock_dir).st_uid == os.geteuid()
        assert not sock_dir.name.startswith("luma-pilot-" + inst.name)  # nothing derived from the run
        assert _mode(folder) == 0o700
        assert _serves(inst)
        # A resumed pilot knows the server by name only: it reads socket and token from the spec.
        again = Instance(folder, "k", _spec(tmp_path / "cache"), Tracker(), name=inst.name)
        assert again.spec["socket"] == inst.spec["socket"] and again.spec["token"] == inst.spec["token"]
        assert again.connect() and _serves(again)
        assert again.send({"op": "stop"})
        assert again.wait_gone(30)
        assert not sock_dir.exists()  # the server removes its temporary folder when it exits
    finally:
        _stop(inst, *([again] if again else []))


def test_a_folder_others_may_enter_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    with pytest.raises(server.UnsafeSocketFolder, match="mode 755"):
        server.check_private(str(shared))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "run", target_is_directory=True)
    (tmp_path / "run").mkdir(mode=0o700)
    with pytest.raises(server.UnsafeSocketFolder, match="not a directory"):
        server.check_private(str(link))


# -- who may control it ---------------------------------------------------------------------


def test_lines_without_the_right_token_are_refused_and_the_server_serves_on(live):
    lines = [{"op": "stop"}, {"op": "stop", "token": "0" * 64}, {"op": "stop", "token": live.spec["token"][:10]},
             {"op": "stop", "token": 12}, {"op": "apply", "cores": 1, "max_batch": 1},
             {"op": "req", "id": 1}, {"op": "hello", "token": live.spec["token"].upper()}]
    s = _raw(live)
    s.sendall(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    s.shutdown(socket.SHUT_WR)
    replies, closed = _replies(s)
    s.close()
    assert closed and len(replies) == len(lines)
    assert all(r == {"ok": False, "error": "token: missing or wrong token"} for r in replies)
    assert live.alive() and _serves(live)  # not stopped, and the pilot's connection still gets its answers


def test_the_first_line_with_the_token_makes_the_client(live):
    s = _raw(live)
    s.sendall(json.dumps({"op": "hello", "token": live.spec["token"]}).encode() + b"\n")
    buf = b""
    while b"\n" not in buf:
        buf += s.recv(4096)
    assert json.loads(buf.split(b"\n")[0])["ev"] == "ready"
    s.close()
    assert live.connect() and _serves(live)  # the pilot authenticates again and is the client


def test_peer_credentials_name_the_connecting_user_and_other_users_are_closed(tmp_path, monkeypatch):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    assert server.peer_uid(a) == os.geteuid() == server.peer_uid(b)
    a.close(), b.close()
    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    lsock = server._listen(str(folder / "s.sock"))
    sel = selectors.DefaultSelector()
    ctl = server._Control(lsock, sel, TOKEN, {"ev": "ready"})
    monkeypatch.setattr(server, "peer_uid", lambda s: os.geteuid() + 1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5)
    c.connect(str(folder / "s.sock"))
    ctl.accept()
    assert _replies(c) == ([{"ok": False, "error": "not this server's user"}], True)
    assert not ctl.bufs and ctl.client is None
    c.close(), ctl.close(), lsock.close()


def test_unauthenticated_connections_are_bounded(live):
    idle = [_raw(live) for _ in range(3 * server.MAX_PENDING)]  # connect and never say a word
    try:
        assert live.connect() and _serves(live)
        closed = 0
        for s in idle:
            s.settimeout(0.5)
            closed += _replies(s)[1]
        assert closed >= len(idle) - server.MAX_PENDING  # the oldest went when more came
    finally:
        for s in idle:
            s.close()


# -- what a line may be ---------------------------------------------------------------------


@pytest.mark.parametrize("line, field", [
    (b"", None), (b"{", None), (b"\xff\xfe\x00", None), (b"[" * 50000, None), (b"1" * 5000, None),
    (b"[]", None), (b'"stop"', None), (b"null", None),
    (b'{"op": "stop"}', "token"),
    (b'{"op": "reboot", "token": "TOKEN"}', "op"), (b'{"op": ["stop"], "token": "TOKEN"}', "op"),
    (b'{"op": "req", "token": "TOKEN"}', "id"), (b'{"op": "req", "id": "7", "token": "TOKEN"}', "id"),
    (b'{"op": "req", "id": true, "token": "TOKEN"}', "id"), (b'{"op": "req", "id": -1, "token": "TOKEN"}', "id"),
    (b'{"op": "req", "id": 1e3, "token": "TOKEN"}', "id"), (b'{"op": "req", "id": 1, "c": "x", "token": "TOKEN"}', "c"),
    (b'{"op": "req", "id": 1, "t": NaN, "token": "TOKEN"}', "t"),
    (b'{"op": "req", "id": 1, "t": "now", "token": "TOKEN"}', "t"),
    (b'{"op": "apply", "replicas": 100000, "token": "TOKEN"}', "replicas"),
    (b'{"op": "apply", "cores": -2, "token": "TOKEN"}', "cores"),
    (b'{"op": "apply", "max_batch": 0, "token": "TOKEN"}', "max_batch"),
    (b'{"op": "apply", "key": {"a": 1}, "token": "TOKEN"}', "key"),
])
def test_malformed_lines_are_refused_with_a_reason(line, field):
    with pytest.raises(server.BadRequest) as err:
        server.parse_request(line.replace(b"TOKEN", TOKEN.encode()), TOKEN)
    assert err.value.field == field and "\n" not in str(err.value)


def test_valid_lines_parse():
    assert server.parse_request(json.dumps({"op": "req", "id": 3, "c": 128, "t": 1.5, "token": TOKEN}).encode(),
                                TOKEN) == {"op": "req", "id": 3, "c": 128, "t": 1.5}
    assert server.parse_request(json.dumps({"op": "apply", "key": "s", "cores": 2, "max_batch": 4, "token": TOKEN})
                                .encode(), TOKEN)["max_batch"] == 4
    assert server.parse_request(b'{"op":"stop","token":"' + TOKEN.encode() + b'"}\r', TOKEN) == {"op": "stop"}


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)
_requests = st.fixed_dictionaries({"op": st.sampled_from(["req", "apply", "stop", "hello", "x"]) | _json},
                                  optional={"token": st.just(TOKEN) | _json, "id": _json, "c": _json, "t": _json,
                                            "key": _json, "cores": _json, "replicas": _json, "max_batch": _json,
                                            "threads": _json, "host_memory": _json})


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | _requests.map(lambda d: json.dumps(d).encode()))
def test_parse_request_raises_only_bad_request(line):
    try:
        msg = server.parse_request(line, TOKEN)
    except server.BadRequest:
        return
    assert msg["op"] in ("req", "apply", "stop", "hello")


# -- fuzz against a live server --------------------------------------------------------------


def _fuzz_cases(rng: random.Random, token: str, n: int) -> list[tuple[str, bytes]]:
    """(kind, bytes to send) for n connections, each bytes a few lines or a partial one."""
    def garbage() -> bytes:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))

    def bad_json() -> bytes:
        good = json.dumps({"op": rng.choice(["req", "apply", "stop"]), "id": rng.randrange(100), "token": token})
        cut = rng.randrange(1, len(good))
        return rng.choice([good[:cut], good[:cut] + "}" * rng.randrange(3), good.replace('"', "'"),
                           "[" * rng.randrange(1000, 20000), "9" * rng.randrange(4000, 9000)]).encode()

    def wrong_types() -> bytes:
        values = [None, True, -1, 2**70, 1.5, float("inf"), "x" * rng.randrange(50), [], {}, [1, 2], {"a": 1}]
        msg = {"op": rng.choice(["req", "apply", "stop", "hello", "", "REQ", None, 7, "shutdown"])}
        for name in rng.sample(["id", "c", "t", "key", "cores", "threads", "replicas", "max_batch", "host_memory"], 3):
            msg[name] = rng.choice(values)
        msg["token"] = rng.choice([token, token, token[:-1] + "0", "", None, token + "0", "é" * 64])
        if msg["token"] == token and msg["op"] in ("stop", "hello"):
            msg["op"] = "halt"  # a valid stop or hello would not be malformed
        elif msg["token"] == token and msg["op"] in ("req", "apply"):  # nor a valid req or apply
            msg[rng.choice(["id", "t", "key", "cores", "replicas"])] = rng.choice([[], {}, [1, 2], {"a": 1}])
        return json.dumps(msg).encode()

    cases = []
    for _ in range(n):
        kind = rng.choice(["garbage", "bad-json", "wrong-types", "huge", "partial", "mixed"])
        if kind == "garbage":
            data = b"\n".join(garbage() for _ in range(rng.randrange(1, 5))) + b"\n"
        elif kind == "bad-json":
            data = bad_json() + b"\n"
        elif kind == "wrong-types":
            data = b"\n".join(wrong_types() for _ in range(rng.randrange(1, 6))) + b"\n"
        elif kind == "huge":  # past the line bound, with or without its newline
            data = b"{" + b"x" * rng.randrange(server.MAX_LINE, 4 * server.MAX_LINE) + rng.choice([b"", b"\n"])
        elif kind == "partial":  # early EOF in the middle of a line
            data = wrong_types()[: rng.randrange(1, 30)]
        else:
            data = b"".join(rng.choice([garbage, bad_json, wrong_types])() + b"\n" for _ in range(4)) + garbage()
        cases.append((kind, data))
    return cases


def test_fuzz_the_live_server_keeps_serving(live):
    rng = random.Random(20261205)
    cases = _fuzz_cases(rng, live.spec["token"], 400)
    silent = [_raw(live) for _ in range(3)]  # connect and send nothing, for the whole fuzz
    counts = {"errors": 0, "closed": 0, "bytes": 0}
    try:
        for kind, data in cases:
            s = _raw(live)
            try:
                s.sendall(data)
                if rng.random() < 0.8:
                    s.shutdown(socket.SHUT_WR)
                else:
                    s.close()  # gone without a word more
                    continue
            except OSError:  # it closed a connection past the line bound while we were still sending
                pass
            replies, closed = _replies(s)
            s.close()
            assert closed
            assert all(r.get("ok") is False and isinstance(r.get("error"), str) for r in replies), (kind, replies)
            counts["errors"] += len(replies)
            counts["closed"] += closed
            counts["bytes"] += len(data)
            if kind in ("garbage", "bad-json", "wrong-types"):  # whole lines: one answer each
                assert len(replies) == data.count(b"\n"), (kind, data[:200], replies)
        assert live.alive() and _serves(live)  # the pilot's own connection was never displaced
        assert live.connect() and _serves(live)  # and a new one authenticates as before
    finally:
        for s in silent:
            s.close()
    assert counts["errors"] > len(cases)
    print(f"fuzz: {len(cases)} connections, {counts['bytes']} bytes, {counts['errors']} error replies")


def test_the_server_says_when_each_batch_began_and_the_tracker_sizes_them(live):
    # Requests sent together are answered in batches of at most max_batch (8); each answer
    # carries its batch's start, so the pilot sees every batch's size and wall time.
    t0 = time.perf_counter()
    sent = []
    for _ in range(20):
        rid = next(_next_id)
        r = Request(rid, 0.0, time.perf_counter(), 0, live.key)
        live.tracker.add(r)
        sent.append(r)
        assert live.send({"op": "req", "id": rid, "c": None, "t": r.at})
    deadline = time.monotonic() + 30
    while any(r.done is None and r.error is None for r in sent) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(r.done is not None for r in sent)
    rows = live.tracker.service(live.key, t0, time.perf_counter() + 1)
    assert sum(size * count for size, count, _, _ in rows) == 20
    assert all(1 <= size <= 8 and total > 0 and squares > 0 for size, _, total, squares in rows)
    assert live.tracker.service("another state", t0, time.perf_counter() + 1) == []


def test_the_tracker_groups_answers_into_batches_and_forgets_old_ones():
    from luma.experiments.pilot.serving import KEEP_BATCHES_S

    t = Tracker()
    for rid, (began, done) in enumerate([(1.0, 1.01)] * 3 + [(1.02, 1.03)] + [(500.0, 500.02)] * 2):
        t.add(Request(rid, 0.0, 0.0, 0, "s"))
        t.event({"ev": "done", "id": rid, "at": done, "b": began})
    t.add(Request(99, 0.0, 0.0, 0, "s"))
    t.event({"ev": "done", "id": 99, "at": 2.0, "b": "not a time"})  # answered, but no batch
    t.event({"ev": "done", "id": 0, "at": 9.0, "b": 8.0})  # a second answer changes nothing
    rows = t.service("s", 0.0, 10.0)
    assert [(n, c) for n, c, _, _ in rows] == [(1, 1), (3, 1)] and abs(rows[1][2] - 0.01) < 1e-9
    assert [(n, c) for n, c, _, _ in t.service("s", 499.0, 501.0)] == [(2, 1)]
    assert len(t.batches) == 1 and 499.0 - KEEP_BATCHES_S > 1.03  # the early batches are forgotten
