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
