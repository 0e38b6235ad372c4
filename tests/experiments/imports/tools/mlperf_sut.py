"""A small MLPerf loadgen system under test: each query sample is one streamed completion from an
OpenAI-compatible server (here llama.cpp's, as LUMA launches it), reported to loadgen in its LLM
mode: `FirstTokenComplete` at the first streamed token (TTFT), `QuerySamplesComplete` with the
token count at the end (TPOT). Writes loadgen's own logs (summary, detail, trace, accuracy) into
OUT. Run with the Python that has `mlcommons-loadgen` (written against 6.0.17):

    python mlperf_sut.py --url http://127.0.0.1:PORT --scenario Server --qps 4 --min-duration-s 40 OUT
"""

from __future__ import annotations

import argparse
import http.client
import json
import queue
import random
import threading
import urllib.parse
from pathlib import Path

import mlperf_loadgen as lg

WORDS = ("rule", "engine", "kernel", "memory", "cache", "token", "latency", "throughput", "graph", "tensor",
         "machine", "contract", "boundary", "evidence", "host", "core", "stream", "batch", "model", "sprint")


def prompts(n: int, words: int, seed: int) -> list[str]:
    """The query sample library's texts: `n` fixed pseudo-random sentences."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


class Completions:
    """Sends each sample to /v1/completions (streamed) from `workers` threads, one connection each."""

    def __init__(self, url: str, texts: list[str], max_tokens: int, workers: int, body: dict):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.texts, self.max_tokens, self.body = texts, max_tokens, body
        self.queue: queue.Queue = queue.Queue()
        self.threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        self.keep: list = []  # response buffers loadgen reads by address; kept alive until the end
        self.lock = threading.Lock()
        for t in self.threads:
            t.start()

    def issue(self, samples) -> None:
        for s in samples:
            self.queue.put(s)

    def flush(self) -> None:
        pass

    def stop(self) -> None:
        for _ in self.threads:
            self.queue.put(None)
        for t in self.threads:
            t.join()

    def _respond(self, sample_id: int, data: bytes, n_tokens: int | None, first: bool) -> None:
        buf = bytearray(data or b" ")
        addr = (ctypes_addr(buf), len(buf))
        with self.lock:
            self.keep.append(buf)
        if first:
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample_id, addr[0], addr[1])])
        else:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, addr[0], addr[1], n_tokens)])

    def _work(self) -> None:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        while (s := self.queue.get()) is not None:
            body = {"model": "tinyllama", "prompt": self.texts[s.index], "max_tokens": self.max_tokens,
                    "stream": True, "temperature": 0, **self.body}
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise SystemExit(f"server answered {resp.status}: {resp.read()[:200]!r}")
            text, tokens = [], 0
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                choices = json.loads(line[5:]).get("choices") or []
                piece = choices[0].get("text") if choices else None
                if piece is None:
                    continue
                tokens += 1  # llama.cpp's server streams one token per chunk
                text.append(piece)
                if tokens == 1:
                    self._respond(s.id, piece.encode(), None, first=True)
            self._respond(s.id, "".join(text).encode(), tokens, first=False)
        conn.close()


def ctypes_addr(buf: bytearray) -> int:
    import ctypes  # reason: only to hand loadgen a buffer address

    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--url", required=True)
    ap.add_argument("--scenario", choices=("Server", "Offline"), default="Server")
    ap.add_argument("--qps", type=float, default=4.0, help="Server target QPS / Offline expected QPS")
    ap.add_argument("--min-duration-s", type=float, default=40)
    ap.add_argument("--min-queries", type=int, default=100)
    ap.add_argument("--samples", type=int, default=64, help="query sample library size")
    ap.add_argument("--words", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ttft-ms", type=float, default=500)
    ap.add_argument("--tpot-ms", type=float, default=20)
    ap.add_argument("--body", default='{"logit_bias": {"2": -100}}', help="extra JSON fields of each request")
    ap.add_argument("--accuracy-log-probability", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-trace", action="store_true", help="no mlperf_log_trace.json (it grows ~50 kB/s)")
    a = ap.parse_args()

    texts = prompts(a.samples, a.words, a.seed)
    sut_impl = Completions(a.url, texts, a.max_tokens, a.workers, json.loads(a.body))
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, a.scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = True
    ts.ttft_latency = int(a.ttft_ms * 1e6)
    ts.tpot_latency = int(a.tpot_ms * 1e6)
    ts.min_duration_ms = int(a.min_duration_s * 1000)
    ts.min_query_count = a.min_queries
    ts.accuracy_log_probability = a.accuracy_log_probability
    if a.scenario == "Server":
        ts.server_target_qps = a.qps
    else:
        ts.offline_expected_qps = a.qps
    a.out.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(a.out)
    log.log_output.copy_summary_to_stdout = True
    log.enable_trace = not a.no_trace
    sut = lg.ConstructSUT(sut_impl.issue, sut_impl.flush)
    qsl = lg.ConstructQSL(len(texts), len(texts), lambda idx: None, lambda idx: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, ts, log)
    finally:
        sut_impl.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
