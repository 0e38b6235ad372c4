"""The load generator of a service behind an OpenAI-compatible HTTP endpoint.

Drives `/v1/embeddings`, `/v1/completions` or `/v1/chat/completions` (streamed or not) with a
contract's load — open-loop Poisson arrivals at a rate (queueing shows) or `concurrency`
closed-loop clients — over one `aiohttp.ClientSession`, and measures per request what a user feels:
latency from the *scheduled* arrival (a late send is the generator's delay, and counting from
the schedule keeps it from hiding the server's: no coordinated omission), time to the first
streamed token (TTFT), the gaps between streamed tokens (ITL; TPOT = their mean per request),
tokens, and errors by cause. The figures land in the same `LoadResult` the in-process load
generator fills (`luma.experiments.sprint.load`), so a trial is judged by the same statistics.

Error causes: `timeout` (no answer within the request timeout), `connection` (refused, reset,
the server died mid-stream), `http-<status>`, `server-error` (an error object in the body or the
stream), `truncated` (a stream that ended without its `[DONE]`), `bad-response` (a body that is
not what the API promises), `short-output` (with `exact_tokens`: fewer tokens than `max_tokens`
— an engine that silently shortens a request to fit its context window, as llama-cpp-python
does, has run out of KV capacity, not finished early).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from luma.errors import ContractError
from luma.experiments.endpoint.sse import Parser
from luma.experiments.sprint.load import LoadResult

APIS = {"embeddings": "/v1/embeddings", "completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass
class Endpoint:
    """Where and how to call the service: base URL (`http://127.0.0.1:8080`), the API, the
    served model's name, streaming, the tokens to generate, and `extra` body fields — e.g.
    `{"ignore_eos": True}` (vLLM, llama.cpp's own server) or `{"logit_bias": {"2": -100}}` (any
    OpenAI-compatible server) so that every request generates `max_tokens` tokens."""

    base_url: str
    api: str = "completions"
    model: str | None = None
    stream: bool = True
    max_tokens: int = 16
    timeout_s: float = 60.0
    headers: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    #: Every generation must be `max_tokens` long (end of sequence suppressed by `extra`).
    exact_tokens: bool = False

    def __post_init__(self):
        if self.api not in APIS:
            raise ContractError(f"unknown endpoint api {self.api!r} (known: {', '.join(APIS)})", field="api")
        if not self.base_url.startswith(("http://", "https://")):
            raise ContractError(f"endpoint base URL {self.base_url!r} is not an http(s) URL", field="base_url")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + APIS[self.api]

    def body(self, text: str) -> dict:
        """The request body for one payload text."""
        out: dict = {"model": self.model} if self.model else {}
        if self.api == "embeddings":
            return {**out, "input": text, **self.extra}
        if self.api == "chat":
            out["messages"] = [{"role": "user", "content": text}]
        else:
            out["prompt"] = text
        return {**out, "max_tokens": self.max_tokens, "stream": self.stream, "temperature": 0, **self.extra}


@dataclass
class Sample:
    """One request: times on `time.perf_counter`, tokens, and the error cause if it failed."""

    arrival: float
    end: float | None = None
    first: float | None = None
    token_times: list[float] = field(default_factory=list)
    tokens: int = 0
    #: The server's own count of the generated tokens, when its stream reports usage (OpenAI's
    #: `stream_options.include_usage`): a token whose text the detokenizer holds back (vLLM does,
    #: until a word is whole) arrives in no chunk of its own, so chunks undercount tokens.
    reported: int | None = None
    error: str | None = None
    detail: str = ""


@dataclass
class EndpointResult(LoadResult):
    """A LoadResult plus what only an endpoint has: errors by cause and inter-token gaps."""

    errors: Counter = field(default_factory=Counter)
    itl: list[float] = field(default_factory=list)
    error_details: list[str] = field(default_factory=list)


def _content(api: str, chunk: dict) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if api == "chat":
        return (c.get("delta") or {}).get("content") or ""
    return c.get("text") or ""


def _check_length(ep: Endpoint, s: Sample) -> None:
    if ep.exact_tokens and s.error is None and s.tokens < ep.max_tokens:
        s.error, s.detail = "short-output", f"{s.tokens} of {ep.max_tokens} tokens"


async def _call(session, ep: Endpoint, text: str, s: Sample) -> None:
    import aiohttp

    # The body is serialized before the send: aiohttp then writes the headers and a body this
    # small in one packet, so nothing of the generator's own work (other streams' chunks on the
    # same event loop) can slip in between them and be counted as the server's TTFT.
    body = json.dumps(ep.body(text)).encode()
    headers = {"Content-Type": "application/json", **ep.headers}
    try:
        async with session.post(ep.url, data=body, headers=headers) as r:
            if r.status >= 400:
                raw = await r.read()
                s.end = time.perf_counter()
                s.error, s.detail = f"http-{r.status}", raw[:200].decode(errors="replace")
                return
            if ep.api == "embeddings" or not ep.stream:
                raw = await r.read()
                s.end = time.perf_counter()
                try:
                    doc = json.loads(raw)
                except ValueError:
                    s.error, s.detail = "bad-response", raw[:200].decode(errors="replace")
                    return
                if not isinstance(doc, dict):
                    s.error, s.detail = "bad-response", raw[:200].decode(errors="replace")
                elif doc.get("error"):
                    s.error, s.detail = "server-error", str(doc["error"])[:200]
                elif ep.api == "embeddings":
                    vecs = [d.get("embedding") for d in doc.get("data") or []]
                    if not vecs or not all(isinstance(v, list) and v for v in vecs):
                        s.error, s.detail = "bad-response", "no embedding in the answer"
                else:
                    s.tokens = int((doc.get("usage") or {}).get("completion_tokens") or 0)
                    s.first = s.end
                    _check_length(ep, s)
                return
            parser, done = Parser(), False
            async for chunk in r.content.iter_any():
                now = time.perf_counter()
                for ev in parser.feed(chunk):
                    if ev.done:
                        done = True
                        continue
                    try:
                        doc = json.loads(ev.data)
                    except ValueError:
                        s.error, s.detail = "bad-response", ev.data[:200]
                        continue
                    if ev.type == "error" or doc.get("error"):
                        s.error, s.detail = "server-error", str(doc.get("error", doc))[:200]
                        continue
                    usage = doc.get("usage")
                    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                        s.reported = usage["completion_tokens"]
                    if _content(ep.api, doc):
                        s.first = s.first or now
                        s.token_times.append(now)
                        s.tokens += 1
        s.end = time.perf_counter()
        if s.reported is not None:
            s.tokens = s.reported
        if not done and s.error is None:
            s.error, s.detail = "truncated", "the stream ended without [DONE]"
        _check_length(ep, s)
    except asyncio.TimeoutError as exc:  # aiohttp's connect and read time-outs are TimeoutErrors
        s.end, s.error, s.detail = time.perf_counter(), "timeout", type(exc).__name__
    except aiohttp.ClientError as exc:  # refused, reset, the server died mid-stream
        s.end, s.error, s.detail = time.perf_counter(), "connection", f"{type(exc).__name__}: {exc}"[:200]


def schedule(rate: float, n: int, seed: int = 0) -> list[float]:
    """Open-loop arrival times (seconds after the first) of n requests: seeded Poisson at `rate`.
    `luma endpoint bench` hands the same list to AIPerf, so both tools send the same arrivals."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    return (np.cumsum(gaps) - gaps[0]).tolist()


async def _drive(ep: Endpoint, texts: list[str], mode: str, concurrency: int, rate: float | None, seed: int,
                 deadline: float | None) -> tuple[list[Sample], float, bool]:
    import aiohttp

    n = len(texts)
    samples: list[Sample] = []
    # Per-operation time-outs (connect; each read of the answer), as the request timeout means:
    # no answer for that long. A long stream that keeps answering is not cut off.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(ep.timeout_s, 10.0), sock_read=ep.timeout_s)
    connector = aiohttp.TCPConnector(limit=max(concurrency, 1) if mode == "closed" else 1024, limit_per_host=0)
    timed_out = False
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        t0 = time.perf_counter()
        if mode == "poisson":
            if not rate or rate <= 0:
                raise ContractError("an open-loop load needs a positive rate", field="rate")
            arrivals = t0 + np.asarray(schedule(rate, n, seed))
            tasks = []
            for text, at in zip(texts, arrivals):
                wait = at - time.perf_counter()
                if deadline is not None and at > deadline:
                    timed_out = True
                    break
                if wait > 0:
                    await asyncio.sleep(wait)
                s = Sample(float(at))
                samples.append(s)
                tasks.append(asyncio.create_task(_call(client, ep, text, s)))
            await _gather(tasks, deadline)
        else:
            queue = list(reversed(texts))

            async def client_loop():
                nonlocal timed_out
                while queue:
                    if deadline is not None and time.perf_counter() > deadline:
                        timed_out = True
                        return
                    s = Sample(time.perf_counter())
                    samples.append(s)
                    await _call(client, ep, queue.pop(), s)

            await _gather([asyncio.create_task(client_loop()) for _ in range(max(1, concurrency))], deadline)
        timed_out = timed_out or any(s.end is None for s in samples)
    return samples, t0, timed_out


async def _gather(tasks, deadline: float | None) -> None:
    if not tasks:
        return
    timeout = None if deadline is None else max(0.0, deadline - time.perf_counter())
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)


def run(ep: Endpoint, texts: list[str], mode: str = "closed", concurrency: int = 1, rate: float | None = None,
        seed: int = 0, deadline: float | None = None) -> EndpointResult:
    """Send every text to `ep` under the load; stop early (timed_out) past `deadline`
    (perf_counter). Failed requests are counted by cause, never raised."""
    samples, t0, timed_out = asyncio.run(_drive(ep, texts, mode, concurrency, rate, seed, deadline))
    return summarize(samples, t0, timed_out)


def summarize(samples: list[Sample], t0: float, timed_out: bool = False) -> EndpointResult:
    """The load result of per-request samples (`t0`: when the load started)."""
    res = EndpointResult(timed_out=timed_out)
    last = t0
    for s in samples:
        if s.end is None:
            continue
        if s.error:
            res.errors[s.error] += 1
            if len(res.error_details) < 5:
                res.error_details.append(f"{s.error}: {s.detail}")
            continue
        res.completed += 1
        res.latency.append(s.end - s.arrival)
        last = max(last, s.end)
        res.tokens += s.tokens
        if s.first is not None:  # set for generation only
            res.ttft.append(s.first - s.arrival)
        gaps = np.diff(s.token_times).tolist() if len(s.token_times) > 1 else []
        res.itl += gaps
        if len(s.token_times) > 1:
            # Streamed only, first to last token: the end of the stream ([DONE], the response
            # closing) is no token's time, and an unstreamed answer has no per-token times at all.
            # Per token, not per chunk: the tokens after the first, by the server's count when given.
            res.tpot.append((s.token_times[-1] - s.token_times[0]) / (max(s.tokens, len(s.token_times)) - 1))
    res.makespan = last - t0
    return res
