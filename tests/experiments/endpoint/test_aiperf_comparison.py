"""`luma endpoint bench`: reading AIPerf's export, the agreement table, the command line AIPerf
gets, and the command's errors. The golden exports under data/ are trimmed from real AIPerf
0.13.0 runs of this bench against llama.cpp serving llamacpp-tinyllama-kv (12 streamed requests:
aiperf-closed with 2 clients, aiperf-open replaying a Poisson schedule); only the fields the
bench reads are kept. The end-to-end run is `slow` and skips without AIPerf or llama.cpp."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.errors import ConfigError
from luma.experiments.endpoint import agreement, aiperf, aiperf_comparison as comparison

DATA = Path(__file__).parent / "data"


# -- AIPerf's export ---------------------------------------------------------------------------


def test_the_summary_and_records_of_a_closed_loop_export_are_read():
    out = aiperf.parse(DATA / "aiperf-closed")
    summary = json.loads((DATA / "aiperf-closed" / "profile_export_aiperf.json").read_text())
    assert out["version"] == "0.13.0"
    assert out["completed"] == 12 and out["errors"] == 0
    assert out["lat_p50"] == summary["request_latency"]["p50"]
    assert out["ttft_p95"] == summary["time_to_first_token"]["p95"]
    assert out["tpot_p50"] == summary["inter_token_latency"]["p50"]
    assert out["rps"] == summary["request_throughput"]["avg"]
    assert 63 <= out["osl_avg"] <= 64
    assert len(out["starts"]) == len(out["ends"]) == len(out["credits"]) == len(out["latency"]) == 12
    assert out["ttft"][0] < out["latency"][0]
    assert all(c <= s < e for c, s, e in zip(out["credits"], out["starts"], out["ends"]))


def test_think_time_of_the_closed_export_is_milliseconds_per_cycle():
    out = aiperf.parse(DATA / "aiperf-closed")
    figures = comparison.timing(comparison.CASES["completions"], out["starts"], out["ends"], out["credits"])
    assert 0.5 < figures["think_p50"] < 50  # AIPerf's own records: several ms between a response and the next
    assert "offered_rps" not in figures


def test_the_open_export_gives_the_rate_sent_and_no_think_time():
    out = aiperf.parse(DATA / "aiperf-open")
    figures = comparison.timing(comparison.CASES["completions-open"], out["starts"], out["ends"], out["credits"])
    assert "think_p50" not in figures
    span = max(out["credits"]) - min(out["credits"])
    assert figures["offered_rps"] == pytest.approx(11 / span)


def test_an_export_without_records_still_parses(tmp_path):
    shutil.copy(DATA / "aiperf-closed" / "profile_export_aiperf.json", tmp_path)
    out = aiperf.parse(tmp_path)
    assert out["starts"] == [] and out["lat_p50"] > 0


def test_a_missing_export_is_one_error(tmp_path):
    with pytest.raises(Exception, match="cannot read AIPerf's export"):
        aiperf.parse(tmp_path)


def test_think_times_pair_each_end_with_the_start_it_freed():
    starts = [0.0, 0.0, 1.0, 1.5, 2.2]
    ends = [0.9, 1.2, 2.0, 2.4, 3.0]
    assert comparison.think_times(starts, ends, 2) == pytest.approx([0.1, 0.3, 0.2])
    assert comparison.think_times(starts, ends, 0) == []


# -- the agreement table -----------------------------------------------------------------------


def test_the_ratio_is_of_the_means_and_the_band_is_ten_percent():
    assert agreement.ratio([1.0, 1.2], [1.0, 1.0]) == pytest.approx(1.1)
    assert agreement.verdict(1.1, True) == "yes" and agreement.verdict(0.9, True) == "yes"
    assert agreement.verdict(1.101, True) == "NO" and agreement.verdict(0.899, True) == "NO"
    assert agreement.verdict(1.5, False) == "-" and agreement.verdict(None, True) == "-"
    assert agreement.ratio([None], [1.0]) is None and agreement.ratio([1.0], [0.0]) is None
    assert agreement.ratio([2.0, None], [1.0, 1.0]) == 2.0
    assert agreement.spread([10, 12, None]) == pytest.approx(0.2) and agreement.spread([10]) is None


def _result(case: str, **figures) -> dict:
    c = comparison.CASES[case]
    runs = [{"tool": tool, "pass": p, **{k: v[i] for k, v in figures.items()}}
            for i, (p, tool) in enumerate([(1, "aiperf"), (1, "luma"), (2, "aiperf"), (2, "luma")])]
    return {"case": case, "mode": c.mode, "stream": c.stream, "runs": runs}


def test_rows_show_each_pass_the_ratio_and_the_verdict():
    rows = agreement.rows(_result("completions", ttft_p50=[10, 11, 10, 13], think_p50=[8, 0.1, 7, 0.1],
                                  errors=[0, 0, 0, 0]))
    by_key = {r["key"]: r for r in rows}
    assert list(by_key) == ["ttft_p50", "think_p50", "errors"]  # metrics no tool measured are left out
    ttft = by_key["ttft_p50"]
    assert [ttft[c] for c in ("aiperf_1", "aiperf_2", "luma_1", "luma_2")] == [10, 10, 11, 13]
    assert ttft["luma/aiperf"] == 1.2 and ttft["within_10pct"] == "NO"
    assert ttft["spread_pct"] == 18.2  # LUMA's passes, 11 and 13, differ more than AIPerf's
    assert by_key["think_p50"]["within_10pct"] == "-"  # shown, never judged
    assert by_key["errors"]["spread_pct"] is None  # no spread of zeros
    assert agreement.columns(2) == ["metric", "aiperf_1", "aiperf_2", "luma_1", "luma_2", "luma/aiperf",
                                    "within_10pct", "spread_pct"]


def test_rows_keep_to_what_applies_to_the_case():
    closed = {r["key"] for r in agreement.rows(_result("embeddings", ttft_p50=[1] * 4, think_p50=[1] * 4,
                                                       offered_rps=[1] * 4, lat_p50=[1] * 4))}
    assert closed == {"lat_p50", "think_p50"}  # no TTFT without streaming, no arrival rate in a closed loop
    open_ = {r["key"] for r in agreement.rows(_result("completions-open", ttft_p50=[1] * 4, think_p50=[1] * 4,
                                                      offered_rps=[1] * 4))}
    assert open_ == {"ttft_p50", "offered_rps"}
    assert {r["key"]: r["within_10pct"] for r in agreement.rows(_result("completions-open", ttft_sched_p50=[1] * 4))} \
        == {"ttft_sched_p50": "yes"}


# -- the loads both tools send -----------------------------------------------------------------


def test_the_replayed_schedule_is_the_one_lumas_client_sends():
    from luma.experiments.endpoint import client, launch

    ep = client.Endpoint(f"http://127.0.0.1:{launch.free_port()}", "completions", timeout_s=2.0)  # nothing listens
    samples, t0, _ = asyncio.run(client._drive(ep, ["x"] * 20, "poisson", 0, 2000.0, 0, None))
    sent = sorted(s.arrival - t0 for s in samples)
    assert sent == pytest.approx(comparison.schedule(2000.0, 20), abs=1e-9)
    assert comparison.schedule(2000.0, 20)[0] == 0.0


def _load(**kw) -> aiperf.Load:
    base = dict(api="completions", model="m", tokenizer="/tok", texts=["a", "b"], requests=2, stream=True,
                max_tokens=64, extra={"logit_bias": {"2": -100}, "stream_options": {"include_usage": True}})
    return aiperf.Load(**{**base, **kw})


def _after(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_aiperf_paces_a_closed_loop_and_replays_or_draws_an_open_one(tmp_path):
    closed = aiperf.command("aiperf", _load(concurrency=2), "http://h:1", tmp_path)
    assert _after(closed, "--concurrency") == "2" and _after(closed, "--request-rate") == "1000"
    assert _after(closed, "--arrival-pattern") == "constant"
    assert json.loads(_after(closed, "--extra-inputs")) == {"logit_bias": {"2": -100}, "temperature": 0}
    assert _after(closed, "--osl") == "64" and "--use-legacy-max-tokens" in closed and "--streaming" in closed
    replay = aiperf.command("aiperf", _load(rate=5.0, schedule=[0.0, 0.2]), "http://h:1", tmp_path)
    assert "--fixed-schedule" in replay and "--request-rate" not in replay and "--concurrency" not in replay
    own = aiperf.command("aiperf", _load(rate=5.0), "http://h:1", tmp_path)
    assert _after(own, "--request-rate") == "5" and _after(own, "--arrival-pattern") == "poisson"
    with pytest.raises(ConfigError):
        aiperf.command("aiperf", _load(), "http://h:1", tmp_path)
    emb = aiperf.command("aiperf", _load(api="embeddings", stream=False, max_tokens=None, extra={}, concurrency=4),
                         "http://h:1", tmp_path)
    assert "--extra-inputs" not in emb and "--streaming" not in emb and "--osl" not in emb


FAKE_AIPERF = """#!{python}
import json, os, shutil, sys, tempfile
from pathlib import Path
if sys.argv[1:] == ["--version"]:
    print("0.13.0")
    sys.exit(0)
out = Path(sys.argv[sys.argv.index("--artifact-dir") + 1])
for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
    shutil.copy(Path({golden!r}) / name, out / name)
litter = Path(tempfile.gettempdir()) / "aiperf_mmap_fake"  # as the real one leaves behind
litter.mkdir()
(out / "run.json").write_text(json.dumps({{"argv": sys.argv, "litter": str(litter)}}))
"""


@pytest.fixture
def fake_aiperf(tmp_path) -> str:
    """An `aiperf` that answers with the golden open-loop export (and keeps its argv)."""
    path = tmp_path / "bin" / "aiperf"
    path.parent.mkdir()
    path.write_text(FAKE_AIPERF.format(python=sys.executable, golden=str(DATA / "aiperf-open")))
    path.chmod(0o755)
    return str(path)


def test_a_run_writes_the_schedule_and_reads_back_the_figures(fake_aiperf, tmp_path):
    assert aiperf.version(fake_aiperf) == "0.13.0"
    load = _load(rate=5.0, schedule=[0.0, 0.25])
    out = comparison.aiperf_run(comparison.CASES["completions-open"], fake_aiperf, load, "http://h:1", tmp_path / "run")
    lines = [json.loads(x) for x in (tmp_path / "run" / "inputs.jsonl").read_text().splitlines()]
    assert lines == [{"text": "a", "timestamp": 0.0}, {"text": "b", "timestamp": 250.0}]
    assert out["completed"] == 12 and out["send_lag_p50"] > 0 and out["offered_rps"] > 0
    # counted from the credit (the schedule), as LUMA counts: later than from AIPerf's own send
    assert out["lat_sched_p50"] > out["lat_p50"] and out["ttft_sched_p50"] > out["ttft_p50"]
    assert out["client_cpu_s"] >= 0 and out["wall_s"] > 0
    assert "starts" not in out
    litter = Path(json.loads((tmp_path / "run" / "run.json").read_text())["litter"])
    assert litter.parent.name.startswith("luma-aiperf-") and not litter.parent.exists()  # its own TMPDIR, removed


# -- the command -------------------------------------------------------------------------------


def test_find_names_how_to_install_aiperf(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="pip install aiperf==0.13.0"):
        aiperf.find(None)
    plain = tmp_path / "aiperf"
    plain.write_text("not executable")
    with pytest.raises(ConfigError, match="is not an executable AIPerf"):
        aiperf.find(str(plain))


@pytest.mark.parametrize("given", [None, "/nonexistent/aiperf"])
def test_the_command_without_aiperf_is_one_line_and_exit_1(tmp_path, monkeypatch, given):
    from luma.cli.main import cli

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    args = ["endpoint", "bench"] + (["--aiperf", given] if given else [])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "python3 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf==0.13.0" in lines[0]


def test_the_command_without_llama_cpp_or_its_converter_is_one_line_and_exit_1(tmp_path, monkeypatch, fake_aiperf):
    from luma.cli.main import cli
    from luma.experiments.endpoint import engines

    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))  # no artifacts yet: the converter is needed
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path / "engines"))
    result = CliRunner().invoke(cli, ["endpoint", "bench", "--aiperf", fake_aiperf, "--cases", "embeddings"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "luma engine install llama.cpp" in result.output
    monkeypatch.setattr(engines, "llama_cpp_version", lambda: None)
    result = CliRunner().invoke(cli, ["endpoint", "bench", "--aiperf", fake_aiperf, "--cases", "completions"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: engine: llama.cpp's server is not installed: "
                                     "run `luma engine install llama.cpp`")


def test_an_unknown_case_is_a_usage_error(tmp_path, monkeypatch):
    from luma.cli.main import cli

    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["endpoint", "bench", "--cases", "embeddings,nope"])
    assert result.exit_code == 2 and "known cases" in result.output


# -- a real run --------------------------------------------------------------------------------


def _real_aiperf() -> str | None:
    found = os.environ.get("LUMA_AIPERF") or shutil.which("aiperf") or "/tmp/aiperf-venv/bin/aiperf"
    return found if Path(found).is_file() and os.access(found, os.X_OK) else None


@pytest.mark.slow
def test_a_short_bench_runs_both_tools_on_both_servers(tmp_path, monkeypatch):
    from luma.cli.main import cli
    from luma.experiments.endpoint import engines

    binary = _real_aiperf()
    if binary is None:
        pytest.skip("AIPerf is not installed (set LUMA_AIPERF, or " + aiperf.INSTALL + ")")
    if engines.llama_cpp_version() is None or not (engines.converter_dir() / "convert_hf_to_gguf.py").is_file():
        pytest.skip("llama.cpp is not installed here (luma engine install llama.cpp)")
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["endpoint", "bench", "--aiperf", binary, "--passes", "1", "--requests", "20",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output[result.output.index("["):])
    by = {(r["case"], r["key"]): r for r in rows}
    for case in ("embeddings", "completions", "completions-open"):
        assert by[(case, "completed")]["aiperf_1"] == by[(case, "completed")]["luma_1"] == 20
        assert by[(case, "errors")]["aiperf_1"] == by[(case, "errors")]["luma_1"] == 0
    assert by[("completions", "osl_avg")]["luma_1"] == 64
    assert 0.9 < by[("completions-open", "offered_rps")]["luma/aiperf"] < 1.1  # the same arrivals
