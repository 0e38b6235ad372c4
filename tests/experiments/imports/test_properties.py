"""Property tests of the parsers on generated files: any well-formed vLLM detailed result whose
summary the tool's own definition computed parses, and its samples are exactly the completed
requests' values; moving any one sample by more than rounding is refused."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from luma.errors import RecordError
from luma.experiments.imports.formats import vllm_bench
from luma.experiments.imports.run import SourceFile
from pathlib import Path

requests = st.lists(st.tuples(st.floats(0.001, 2.0), st.lists(st.floats(0.0005, 0.1), min_size=1, max_size=8)),
                    min_size=2, max_size=40)


def _doc(reqs):
    ttfts = [t for t, _ in reqs]
    lats = [t + sum(g) for t, g in reqs]
    outs = [len(g) + 1 for _, g in reqs]
    doc = {"duration": 10.0, "completed": len(reqs), "failed": 0, "request_throughput": len(reqs) / 10.0,
           "output_throughput": sum(outs) / 10.0, "model_id": "m", "ttfts": ttfts,
           "itls": [g for _, g in reqs], "latencies": lats, "input_lens": [5] * len(reqs), "output_lens": outs,
           "errors": [""] * len(reqs)}
    for p in (50, 90, 99):
        doc[f"p{p}_ttft_ms"] = float(np.percentile(ttfts, p) * 1000)
    doc["mean_ttft_ms"] = float(np.mean(ttfts) * 1000)
    return doc


def _read(doc):
    data = json.dumps(doc).encode()
    return vllm_bench.read(Path("run.json"), data, SourceFile.of(Path("run.json"), data))[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests)
def test_generated_results_parse_to_their_samples(reqs):
    run = _read(_doc(reqs))
    assert run.samples["ttft"] == [t for t, _ in reqs]
    assert len(run.samples["itl"]) == sum(len(g) for _, g in reqs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.data())
def test_an_edited_sample_is_refused(reqs, data):
    doc = _doc(reqs)
    i = data.draw(st.integers(0, len(reqs) - 1))
    doc["ttfts"][i] += 5.0  # above every other sample: the mean moves whatever the percentiles do
    try:
        _read(doc)
    except RecordError as exc:
        assert exc.source == "run.json"
    else:
        raise AssertionError("an edited sample was accepted")
