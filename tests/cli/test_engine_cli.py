"""`luma endpoint probe` and `luma engine install` as a user sees them (cli/engine.py): the probe's
figures with their units in every format (issue 32: `p95_latency 0.0523` for a contract in ms)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import luma.cli.engine as engine_cli
from luma.cli.main import cli
from luma.experiments.endpoint.probe import Probe
from luma.experiments.sprint import contract
from luma.experiments.sprint.states import State
from luma.experiments.sprint.trial import Trial, judge


def _probe(latency: float = 0.0523) -> Probe:
    c = contract.load("llamacpp-minilm-memory")  # quality >= 0.99, p95_latency <= 250 ms
    tel = {"latency": [latency] * 100, "completed": 100, "throughput": 118.2, "quality": 0.99964, "errors": {}}
    verdict, cause, rows = judge(c, tel)
    return Probe(c, "http://127.0.0.1:9", [Trial(State.of({}), "f16", "boundary", verdict, cause, rows, tel, 100)])


@pytest.fixture
def probed(monkeypatch):
    """`luma endpoint probe llamacpp-minilm-memory --format F` against a made-up probe result."""
    monkeypatch.setattr(engine_cli, "probe", lambda settings, ref, url, repetitions: _probe())
    monkeypatch.setenv("COLUMNS", "250")

    def run(fmt: str) -> str:
        out = CliRunner().invoke(cli, ["endpoint", "probe", "llamacpp-minilm-memory", "--format", fmt])
        assert out.exit_code == 0, out.output
        return out.stdout
    return run


def test_the_probe_table_shows_each_figure_in_the_contracts_unit(probed):
    text = probed("table")
    assert "p95_latency (<= 250 ms)" in text and "52.3 ms" in text and "0.0523" not in text
    assert "118 requests/s" in text and "100 requests" in text
    assert "quality (>= 0.99)" in text and "0.9996" in text


def test_the_probe_json_keeps_si_numbers_each_with_its_unit(probed):
    row = json.loads(probed("json"))[0]
    p95 = row["p95_latency"]
    assert (p95["value"], p95["unit"], p95["op"], p95["threshold"], p95["verdict"]) == (0.0523, "s", "<=", 0.25, "PASS")
    assert len(p95["ci"]) == 2
    assert row["throughput"] == {"value": 118.2, "unit": "1/s"} and row["completed"] == {"value": 100, "unit": "request"}
    assert row["quality"]["unit"] == "dimensionless"


def test_the_probe_csv_has_a_unit_column_beside_each_figure(probed):
    header, first = probed("csv").splitlines()[:2]
    cells = dict(zip(header.split(","), first.split(",")))
    assert (cells["p95_latency"], cells["p95_latency_unit"]) == ("0.0523", "s")
    assert (cells["throughput"], cells["throughput_unit"]) == ("118.2", "1/s")


def test_engine_install_says_each_step_as_written(monkeypatch, tmp_path):
    """The steps' lines reach stderr whole: rich took "[server]" for markup and dropped it."""
    from luma.experiments.endpoint import engines

    def install(progress):
        progress("[2/3] build and install llama-cpp-python[server] 0.3.36 from it: already done")
        return engines.status()

    monkeypatch.setattr(engines, "install_llama_cpp", install)
    monkeypatch.setenv("LUMA_ENGINE_CACHE", str(tmp_path))
    out = CliRunner().invoke(cli, ["engine", "install", "llama.cpp", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert "[2/3] build and install llama-cpp-python[server] 0.3.36 from it: already done" in out.stderr
    assert json.loads(out.stdout)["engine"] == "llama.cpp"
