"""`luma model explore`: the minimum-cost PASS frontier, bindings per region and proposed PEX
states over fixture spaces (no machine catalog needed); the frontier is checked by brute force."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.sprint import contract
from luma.experiments.model import simulate, space
from luma.experiments.model.evaluate import Evaluator

ROOT = Path(__file__).resolve().parents[3]
SPACE = """
name = "fixture-sweep"
model = "llama-2-13b"
currency = "USD"
[axes]
accelerator_type = ["small-gpu", "big-gpu"]
accelerator_count = [1, 2, 4]
precision = ["fp16", "fp8"]
concurrency = [1, 8, 64]
context = [512, 4096]
[machines.small-gpu]
flops = { fp16 = "300 TFLOP/s" }
memory = { hbm = "24 GB" }
bandwidth = { hbm = "1 TB/s" }
interconnect = "64 GB/s"
power = "300 W"
price = 1.0
[machines.big-gpu]
flops = { fp16 = "1000 TFLOP/s", fp8 = "2000 TFLOP/s" }
memory = { hbm = "80 GB" }
bandwidth = { hbm = "3.35 TB/s" }
interconnect = "450 GB/s"
power = "700 W"
price = 3.0
[quality]
fp8 = 0.995
"""


def _run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def chat():
    return contract.load(ROOT / "experiments" / "model" / "contracts" / "llm-chat.toml")


@pytest.fixture
def sweep(tmp_path, chat):
    path = tmp_path / "sweep.toml"
    path.write_text(SPACE)
    return path, space.load(path, chat)


def test_frontier_is_the_cheapest_pass_per_demand_point(chat, sweep):
    _, sp = sweep
    out = simulate.explore(chat, sp, chunk=7)  # tiny chunks: merging across chunks is exercised
    ev = Evaluator(chat, sp)
    m, cost = ev.evaluate(np.arange(ev.size))
    passed = ev.judge(m).passed
    assert out["states"] == ev.size == 2 * 3 * 2 * 3 * 2 and out["pass_states"] == int(passed.sum())
    assert len(out["frontier"]) == 3 * 2
    for row in out["frontier"]:
        same = [i for i in range(ev.size) if all(ev.label(i)[k] == v for k, v in row["demand"].items())]
        costs = [cost[i] for i in same if passed[i]]
        if not costs:
            assert row["state"] is None
            continue
        assert row["verdict"] == "PASS" and row["cost"] == min(costs)


def test_chunking_does_not_change_the_answer(chat, sweep):
    _, sp = sweep
    a, b = simulate.explore(chat, sp, chunk=5), simulate.explore(chat, sp)
    assert [r.get("index") for r in a["frontier"]] == [r.get("index") for r in b["frontier"]]
    assert a["regions"] == b["regions"]


def test_regions_count_every_state_and_name_a_binding(chat, sweep):
    _, sp = sweep
    out = simulate.explore(chat, sp)
    assert sum(r["states"] for r in out["regions"]) == out["states"]
    small_fp8 = next(r for r in out["regions"] if r["region"] == {"accelerator_type": "small-gpu", "precision": "fp8"})
    assert small_fp8["pass"] == 0 and small_fp8["binding"] == "unsupported"  # no fp8 figure on that machine
    assert any(r["binding"] in ("hbm_capacity", "memory_bandwidth", "compute") for r in out["regions"])


def test_proposals_pair_the_frontier_with_its_adjacent_fail(chat, sweep):
    _, sp = sweep
    out = simulate.explore(chat, sp, propose=8)
    assert 0 < len(out["proposals"]) <= 8
    adjacent = [p for p in out["proposals"] if p["reason"].startswith("adjacent FAIL")]
    assert adjacent and all(p["verdict"] == "FAIL" for p in adjacent)
    p = adjacent[0]
    assert int(p["pass_state"]["accelerator_count"]) > int(p["state"]["accelerator_count"])


def test_explore_through_the_cli_with_a_plot(luma_home, tmp_path, sweep):
    path, _ = sweep
    svg = tmp_path / "frontier.svg"
    result = _run("model", "explore", "llm-chat", "--space", str(path), "--plot", str(svg), "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["evidence_class"] == "projected" and out["states_per_second"] > 0
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    table = _run("model", "explore", "llm-chat", "--space", str(path))
    assert table.exit_code == 0 and "minimum-cost PASS frontier" in table.output and "states/s" in table.output


def test_explore_a_service_on_this_host(luma_home):
    result = _run("model", "explore", "matvec-memory", "--space", "matvec-host", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["evidence_class"] == "simulated" and out["frontier"]
    assert {r["binding"] for r in out["regions"]} <= {"host_memory", None}


def test_shipped_spaces_load(chat):
    for name in ("llm-70b", "llm-70b-whatif"):
        assert space.load(name, chat).size > 1000
    assert space.load("minilm-host", contract.load("minilm-memory")).size > 100


@pytest.mark.parametrize("text, message", [
    ("[axes]\naccelerator_type = ['x']\n", "belongs to an LLM space"),
    (("model = 'llama-2-7b'\n[axes]\naccelerator_type = ['g']\n[machines.g]\nflops = {fp16 = '1 TFLOP/s'}\n"
      "memory = {hbm = '-8 GB'}\nbandwidth = {hbm = '1 TB/s'}\n"), "must be positive"),
    ("model = 'llama-2-7b'\n[axes]\nhbm_capacity = ['80 GB/s']\n", "does not fit"),
    ("model = 'llama-2-7b'\n[axes]\nmemory_bandwidth = ['900 Gbit/s']\n", "counts bits"),
    ("model = 'llama-2-7b'\n[axes]\nconcurrency = []\n", "non-empty list"),
    ("model = 'llama-2-7b'\n[axes]\nwarp = [1]\n", "unknown axis"),
    ("model = 'llama-2-7b'\ncolour = 'red'\n", "unknown key"),
    ("model = 'llama-2-7b'\n[axes]\ncontext = [1, 1]\n", "repeat"),
    ("model = 'llama-2-7b'\n[axes]\naccelerator_type = ['g']\n", "unknown machine 'g'"),
    ("model = 'gpt-9'\n", "unknown model"),
])
def test_bad_space_files_are_one_line_errors(luma_home, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = _run("model", "explore", "llm-chat", "--space", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert re.search(message, result.output), result.output


def test_bench_reports_states_per_second(luma_home):
    result = _run("model", "bench", "llm-chat", "--space", "llm-70b", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["states_per_second"] > 0
