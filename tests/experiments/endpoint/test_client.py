"""The endpoint load generator (experiments/endpoint/client.py): configuration errors, and
failures of the service counted by cause, never raised. Against a real server:
tests/experiments/endpoint/ grows a llama.cpp test with the engines extra."""

from __future__ import annotations

import socket
import time

import pytest

from luma.errors import ConfigError
from luma.experiments.endpoint.client import Endpoint, run


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kwargs, words", [
    ({"base_url": "http://127.0.0.1:1", "api": "rerank"}, "unknown endpoint api 'rerank'"),
    ({"base_url": "127.0.0.1:8080"}, "is not an http(s) URL"),
])
def test_bad_endpoint_configuration_is_refused(kwargs, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Endpoint(**kwargs)


def test_request_bodies_follow_the_openai_apis():
    assert Endpoint("http://h", api="embeddings", model="m").body("hi") == {"model": "m", "input": "hi"}
    chat = Endpoint("http://h", api="chat", max_tokens=4).body("hi")
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and chat["stream"] and chat["max_tokens"] == 4
    assert Endpoint("http://h", stream=False).body("hi")["prompt"] == "hi"
    assert Endpoint("http://h/", api="chat").url == "http://h/v1/chat/completions"
    fixed = Endpoint("http://h", extra={"logit_bias": {"2": -100}, "temperature": 0.7}).body("hi")
    assert fixed["logit_bias"] == {"2": -100} and fixed["temperature"] == 0.7  # extra fields win


@pytest.mark.parametrize("mode", ["closed", "poisson"])
def test_a_server_that_is_not_there_is_errors_by_cause(mode):
    ep = Endpoint(f"http://127.0.0.1:{_closed_port()}", api="completions", timeout_s=5)
    res = run(ep, ["a", "b", "c"], mode, concurrency=2, rate=50.0)
    assert res.completed == 0 and res.errors == {"connection": 3}
    assert res.error_details and res.error_details[0].startswith("connection: ")


def test_a_server_that_never_answers_times_out_and_the_deadline_holds():
    with socket.socket() as lsock:  # accepts connections (the kernel's backlog) and never answers
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        ep = Endpoint(f"http://127.0.0.1:{lsock.getsockname()[1]}", api="embeddings", timeout_s=0.5)
        t = time.perf_counter()
        res = run(ep, ["x"] * 4, "closed", concurrency=4)
        assert res.errors == {"timeout": 4} and time.perf_counter() - t < 5
        t = time.perf_counter()
        res = run(Endpoint(ep.base_url, api="embeddings", timeout_s=30), ["x"] * 4, "closed", concurrency=4,
                  deadline=time.perf_counter() + 0.5)
        assert res.timed_out and res.completed == 0 and time.perf_counter() - t < 5


def test_an_open_loop_needs_a_rate():
    with pytest.raises(ConfigError, match="positive rate"):
        run(Endpoint("http://127.0.0.1:1"), ["a"], "poisson", rate=None)


def test_tpot_runs_from_the_first_to_the_last_token_not_to_the_end_of_the_stream():
    """Found against AIPerf and a packet capture: the stream's end ([DONE], the response closing)
    is no token's time, and an unstreamed answer has no per-token times (it used to add TPOT 0)."""
    from luma.experiments.endpoint.client import Sample, summarize

    streamed = Sample(0.5, end=2.0, first=1.0, token_times=[1.0, 1.1, 1.2], tokens=3)
    unstreamed = Sample(0.5, end=1.5, first=1.5, tokens=16)
    res = summarize([streamed, unstreamed], 0.0)
    assert res.tpot == [pytest.approx(0.1)]
    assert res.ttft == [0.5, 1.0] and res.completed == 2 and res.tokens == 19
    assert res.itl == [pytest.approx(0.1), pytest.approx(0.1)]


class _Fake:
    """A stdlib HTTP server that answers each path the way one broken (or sound) engine would:
    the case is the first path segment, e.g. POST /truncated/v1/completions. It keeps the first
    TCP segment of every request, to check that headers and body travel together."""

    def __init__(self):
        import http.server
        import threading

        fake = self
        self.first_reads: list[bytes] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, status: int, body: bytes, ctype="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, events: list[bytes], close_early=False):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for ev in events:
                    data = b"data: " + ev + b"\n\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                if close_early:  # the engine dies mid-stream: no terminating chunk
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = __import__("json").loads(body)
                case = self.path.split("/")[1]
                tok = b'{"choices":[{"text":"a"}]}'
                if case == "ok":
                    self._stream([tok] * req["max_tokens"] + [b"[DONE]"])
                elif case == "held-back":  # vLLM: two tokens' text arrives in one chunk, usage at the end
                    n = req["max_tokens"]
                    usage = b'{"choices":[],"usage":{"completion_tokens":%d}}' % n
                    self._stream([b'{"choices":[{"text":"ab"}]}'] + [tok] * (n - 2) + [usage, b"[DONE]"])
                elif case == "short":
                    self._stream([tok] * 2 + [b"[DONE]"])
                elif case == "truncated":
                    self._stream([tok] * 2)
                elif case == "died":
                    self._stream([tok], close_early=True)
                elif case == "oops":
                    self._stream([tok, b'{"error":{"message":"KV cache full"}}', b"[DONE]"])
                elif case == "garbage":
                    self._stream([b"{not json", b"[DONE]"])
                elif case == "http500":
                    self._send(500, b'{"error":"boom"}')
                elif case == "embed-ok":
                    self._send(200, b'{"data":[{"embedding":[0.1,0.2]}]}')
                elif case == "embed-empty":
                    self._send(200, b'{"data":[]}')
                elif case == "embed-html":
                    self._send(200, b"<html>proxy error</html>", "text/html")

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                conn, addr = super().get_request()
                fake.first_reads.append(conn.recv(65536, __import__("socket").MSG_PEEK))
                return conn, addr

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, case: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{case}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake():
    f = _Fake()
    yield f
    f.close()


@pytest.mark.parametrize("case, api, exact, cause, words", [
    ("short", "completions", True, "short-output", "2 of 4 tokens"),
    ("truncated", "completions", False, "truncated", "without [DONE]"),
    ("died", "completions", False, "connection", ""),
    ("oops", "completions", False, "server-error", "KV cache full"),
    ("garbage", "completions", False, "bad-response", "{not json"),
    ("http500", "completions", False, "http-500", "boom"),
    ("http500", "embeddings", False, "http-500", "boom"),
    ("embed-empty", "embeddings", False, "bad-response", "no embedding"),
    ("embed-html", "embeddings", False, "bad-response", "proxy error"),
])
def test_every_way_an_engine_fails_a_request_is_counted_by_cause(fake, case, api, exact, cause, words):
    ep = Endpoint(fake.url(case), api=api, max_tokens=4, timeout_s=5, exact_tokens=exact)
    res = run(ep, ["a", "b"], "closed", concurrency=2)
    assert res.completed == 0 and res.errors == {cause: 2}, res.error_details
    assert words in res.error_details[0]


@pytest.mark.parametrize("mode", ["closed", "poisson"])
def test_a_sound_stream_is_timed_token_by_token(fake, mode):
    ep = Endpoint(fake.url("ok"), api="completions", max_tokens=5, timeout_s=5, exact_tokens=True)
    res = run(ep, ["a"] * 6, mode, concurrency=3, rate=200.0)
    assert res.completed == 6 and not res.errors and res.tokens == 30
    assert len(res.ttft) == 6 and len(res.tpot) == 6 and len(res.itl) == 24
    assert all(0 < f <= lat for f, lat in zip(res.ttft, res.latency))
    ok = run(Endpoint(fake.url("embed-ok"), api="embeddings", timeout_s=5), ["a"] * 3, "closed", concurrency=1)
    assert ok.completed == 3 and not ok.ttft


def test_tokens_are_the_servers_count_when_the_stream_reports_usage(fake):
    ep = Endpoint(fake.url("held-back"), api="completions", max_tokens=5, timeout_s=5, exact_tokens=True)
    res = run(ep, ["a"] * 2, "closed", concurrency=1)
    assert res.completed == 2 and not res.errors and res.tokens == 10  # 4 chunks each, 5 tokens
    assert len(res.itl) == 6  # gaps between chunks, as they arrived
    # TPOT: first to last chunk over the 4 tokens after the first, not over the 3 chunk gaps
    assert len(res.tpot) == 2 and all(t >= 0 for t in res.tpot)


def test_a_request_reaches_the_server_in_one_segment(fake):
    """Headers and body are written together: nothing of the generator's own work can fall
    between them and be counted as the server's time to first token."""
    fake.first_reads.clear()
    run(Endpoint(fake.url("ok"), api="completions", max_tokens=2, timeout_s=5), ["x" * 300] * 3, "closed",
        concurrency=3)
    assert len(fake.first_reads) == 3
    for seg in fake.first_reads:
        head, _, body = seg.partition(b"\r\n\r\n")
        length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
        assert len(body) == length and body.endswith(b"}")
