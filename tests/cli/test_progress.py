"""Long commands show progress on stderr — the step, steps done of planned, elapsed, time left —
and keep stdout to their output (json stays parseable)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from luma.cli import progress as progress_mod
from luma.cli.main import cli
from luma.cli.progress import Tracker, clock, sizes_plan


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake_clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress_mod.time, "monotonic", c)
    return c


def quiet_console():
    import io

    return Console(file=io.StringIO(), force_terminal=False, width=200)


def test_time_left_is_estimated_per_kind_of_step(fake_clock):
    plan = sizes_plan([100, 1000], rdflib_max=100)
    assert plan == [("luma", 100.0), ("rdflib", 100.0), ("luma", 1000.0)]
    with Tracker("bench", plan, console=quiet_console()) as t:
        t("100 records")
        assert t.remaining() is None and "ETA -" in t.status()
        fake_clock.now += 10  # LUMA's 100 records: 10 s
        t("100 records: rdflib")
        fake_clock.now += 30  # rdflib's: 30 s, which says nothing of LUMA's next step
        t("1000 records")
        assert t.remaining() == pytest.approx(100.0)  # 1000 records at LUMA's 0.1 s each
        assert t.status() == "step 3/3 · 40 s elapsed · ETA ~1:40"
        fake_clock.now += 60
        assert t.remaining() == pytest.approx(40.0)  # the running step's time counts
    assert t.status().startswith("done in 1:40")


def test_two_sizes_of_a_kind_give_a_fixed_cost_and_a_cost_per_unit(fake_clock):
    """A bench step has a fixed part (a process, the incremental batch): from its 1k and 10k
    steps the 100k one is 9.3 s + 3.67 ms per record, not 13 ms per record as 1k alone says."""
    with Tracker("bench", sizes_plan([1000, 10_000, 100_000], rdflib_max=0), console=quiet_console()) as t:
        t("1000")
        fake_clock.now += 13
        t("10000")
        assert t.remaining() == pytest.approx(130.0 + 1300.0)  # one size: in proportion
        fake_clock.now += 46
        t("100000")
        assert t.remaining() == pytest.approx(13 - 33 / 9 + 33 / 9000 * 100_000)


def test_trials_count_when_a_verdict_comes(fake_clock):
    with Tracker("sprint", [("trial", 1.0)] * 3, unit="trial", ends=lambda m: "->" in m,
                 console=quiet_console()) as t:
        t("preparing")
        t("boundary: 8 MiB")
        assert t.status().startswith("trial 1/3")
        fake_clock.now += 4
        t("boundary: 8 MiB -> PASS")
        t("boundary: 6 MiB")
        assert t.status() == "trial 2/3 · 4 s elapsed · ETA ~8 s"
        for _ in range(3):  # more trials than planned: the plan grows, never a negative count
            t("x -> FAIL")
        assert t.done == 4 and t.status().startswith("trial 5/5")


def test_clock():
    assert [clock(s) for s in (0, 9.6, 75, 3725)] == ["0 s", "10 s", "1:15", "1:02:05"]


def _stderr_steps(stderr: str, title: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith(f"{title}: ")]


@pytest.mark.parametrize("group, module", [("kb", "luma.rules.pipeline_bench"), ("rules", "luma.rules.engine_bench")])
def test_benches_show_their_steps_and_keep_json_clean(group, module, monkeypatch):
    import importlib

    bench = importlib.import_module(module)
    seen = []

    def fake_run_bench(sizes, *args, **kwargs):
        progress = kwargs.get("progress") or args[-1]
        for n in sizes:
            progress(f"{n} records: LUMA")
            if n <= 10:
                progress(f"{n} records: rdflib in-memory")
            seen.append(n)
        return [{"records": n} for n in sizes]

    monkeypatch.setattr(bench, "run_bench", fake_run_bench)
    result = CliRunner().invoke(cli, [group, "bench", "--records", "10,20", "--rdflib-max", "10", "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"records": 10}, {"records": 20}]
    steps = _stderr_steps(result.stderr, f"{group} bench")
    assert [re.search(r"step (\d/\d)", s).group(1) for s in steps[:3]] == ["1/3", "2/3", "3/3"]
    assert "ETA -" in steps[0] and re.search(r"ETA ~\d", steps[2]) and steps[2].endswith("20 records: LUMA")
    assert steps[-1].startswith(f"{group} bench: done in ")


def test_characterize_shows_its_probes(monkeypatch, tmp_path):
    from luma.experiments import characterize as char_mod
    from luma.kb.records.machine_catalog import catalog

    doc = json.loads(catalog()["nvidia-h100-sxm5-80gb"].read_text())

    def fake(quick=False, cores=None, name=None, progress=lambda m: None, allow_contended=False):
        for kind in ("memory bandwidth", "matmul fp32/bf16/int8"):
            for k in cores:
                progress(f"{kind} on {k} core(s)")
        return doc

    monkeypatch.setattr(char_mod, "characterize", fake)
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["machine", "characterize", "--cores", "1", "--no-ingest", "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["name"] == "nvidia-h100-sxm5-80gb"
    steps = _stderr_steps(result.stderr, "machine characterize")
    assert steps[0].startswith("machine characterize: probe 1/2 ·") and "memory bandwidth" in steps[0]
    assert "probe 2/2" in steps[1] and "ETA ~" in steps[1] and "done in" in steps[-1]


def test_a_sprint_counts_its_trials(luma_home):
    """A real (short) sprint on the NumPy service: every trial is a step, its verdict stays."""
    result = CliRunner().invoke(cli, ["sprint", "run", "matvec-memory", "--levels", "4 MiB,8 MiB", "--repetitions", "1",
                                      "--no-record", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    steps = _stderr_steps(result.stderr, "sprint run")
    planned = int(re.search(r"trial 1/(\d+)", steps[0]).group(1))
    assert out["physical_trials"] <= planned  # the plan is an upper bound
    verdicts = [ln for ln in result.stderr.splitlines() if ln.startswith("  ") and " -> " in ln]
    assert len(verdicts) == out["physical_trials"]
    assert any(re.search(rf"trial {out['physical_trials']}/{planned} .* ETA ~", s) for s in steps)
    assert steps[-1].startswith("sprint run: done in ")


def test_calibrate_counts_its_design(monkeypatch, luma_home):
    from luma.experiments.model import calibrate, facts, trials

    contracts = []

    def fake(cs, home, repeats=3, progress=lambda m: None, **kw):
        contracts.extend(cs)
        progress("host: 10.0 GFLOP/s and 5.0 GB/s per core")
        for _ in range(repeats):
            for c in cs:
                for _ in trials.design(c):
                    progress(f"{c.name}: fp32 x1 on 1 core -> p50 1 ms")
        return {"errors": {}, "validation": {}, "trials": [], "previous": None}

    monkeypatch.setattr(calibrate, "calibrate", fake)
    monkeypatch.setattr(facts, "ledger_check", lambda home, cal: [])
    result = CliRunner().invoke(cli, ["model", "calibrate", "matvec-memory", "--repeats", "2", "--no-record",
                                      "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    expected = 1 + 2 * len(trials.design(contracts[0]))
    steps = _stderr_steps(result.stderr, "model calibrate")
    assert steps[0].startswith(f"model calibrate: trial 1/{expected} ·")
    assert "  host measured -> 10.0 GFLOP/s and 5.0 GB/s per core" in result.stderr
    assert steps[-1].startswith("model calibrate: done in ")


def test_a_long_silent_step_says_it_still_runs_on_a_log():
    """A sprint's "preparing artifacts" trained the decoder for 81 s without a line on a log or a
    pipe (issue 32): a silent step now says it still runs, with the time elapsed."""
    import io
    import time

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with progress_mod.trials("sprint run", 3, console, beat=0.2) as progress:
        progress("preparing artifacts")
        time.sleep(0.7)
        progress("boundary: host_memory=8 MiB [fp32] -> PASS")
    lines = out.getvalue().splitlines()
    still = [line for line in lines if "still preparing artifacts" in line]
    assert len(still) >= 2 and all("elapsed" in line for line in still), lines
    assert not any("still boundary" in line for line in lines)
