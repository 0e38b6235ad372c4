"""`luma model predict`: a verdict per clause and the binding resource, for the services on this
host and for LLM serving on fixture accelerators; bad inputs are one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ConfigError, UnknownName
from luma.experiments.sprint import contract
from luma.experiments.model import hardware, predict, space

FIXTURE_SPACE = """
name = "fixture"
model = "llama-2-70b"
currency = "USD"
[axes]
accelerator_type = ["test-gpu"]
[machines.test-gpu]
flops = { fp16 = "1000 TFLOP/s", fp8 = "2000 TFLOP/s" }
memory = { hbm = "80 GB" }
bandwidth = { hbm = "3 TB/s" }
interconnect = "400 GB/s"
power = "700 W"
price = 2.0
[quality]
fp8 = 0.995
"""


def _run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def fixture_space(tmp_path):
    path = tmp_path / "fixture.toml"
    path.write_text(FIXTURE_SPACE)
    return path


@pytest.fixture
def chat():
    return contract.load(contract.Path(__file__).parents[3] / "experiments" / "model" / "contracts" / "llm-chat.toml")


def _predict(c, state, **kw):
    return predict.predict(c, space.from_state(state, c, **kw))


def test_matvec_memory_below_its_need_fails_on_host_memory():
    c = contract.load("matvec-memory")
    fail, ok = _predict(c, {"host_memory": "2 MiB"}), _predict(c, {"host_memory": "64 MiB"})
    assert fail.verdict == "FAIL" and fail.binding == "host_memory"
    assert fail.clauses[0]["check"] == "memory" and fail.clauses[0]["verdict"] == "FAIL"
    assert ok.verdict == "PASS" and ok.binding is None
    assert ok.figures["memory_need"] == fail.figures["memory_need"] > 4 * 2**20  # fp32 weights alone are 4 MiB


def test_int8_weights_need_less_memory():
    c = contract.load("minilm-memory")
    fp32, int8 = _predict(c, {"host_memory": "1 GiB"}), _predict(c, {"host_memory": "1 GiB", "variant": "int8-weights"})
    assert int8.figures["memory_need"] < fp32.figures["memory_need"] - 50e6


def test_decoder_kv_pool_too_small_for_every_chat_binds_kv_cache():
    c = contract.load("decoder-kv")
    nothing = _predict(c, {"kv_cache": "64 KiB"})  # not even one sequence of 6 blocks of 32 KiB
    assert nothing.verdict == "FAIL" and nothing.binding == "kv_cache"
    assert nothing.figures["slots"] == 0


def test_llm_on_a_fixture_accelerator(chat, fixture_space):
    base = space.load(fixture_space, chat)
    one = predict.predict(chat, space.from_state({"accelerator_type": "test-gpu", "accelerator_count": "1"}, chat, base=base))
    assert one.verdict == "FAIL" and one.binding == "hbm_capacity"  # 138 GB of fp16 weights on 80 GB
    four = predict.predict(chat, space.from_state(
        {"accelerator_type": "test-gpu", "accelerator_count": "4", "precision": "fp8"}, chat, base=base))
    assert four.verdict == "PASS" and four.evidence_class == "projected"
    assert {r["check"] for r in four.clauses} == {"memory", "quality", "p95_ttft", "p95_tpot"}
    slow = predict.predict(chat, space.from_state(
        {"accelerator_type": "test-gpu", "accelerator_count": "4", "precision": "fp8", "memory_bandwidth": "100 GB/s"},
        chat, base=base))
    assert slow.verdict == "FAIL" and slow.binding == "memory_bandwidth"


def test_an_undeclared_quality_is_unknown_not_pass(chat, fixture_space):
    base = space.load(fixture_space, chat)
    p = predict.predict(chat, space.from_state(
        {"accelerator_type": "test-gpu", "accelerator_count": "4", "precision": "int4"}, chat, base=base))
    assert p.verdict in ("UNKNOWN", "FAIL")
    assert next(r for r in p.clauses if r["check"] == "quality")["verdict"] == "UNKNOWN"


def test_predict_through_the_cli(luma_home):
    result = _run("model", "predict", "matvec-memory", "--state", "host_memory=2 MiB", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["verdict"] == "FAIL" and out["binding"] == "host_memory" and out["evidence_class"] == "simulated"
    table = _run("model", "predict", "matvec-memory", "--state", "host_memory=64 MiB")
    assert table.exit_code == 0 and "verdict: PASS" in table.output and "tightest resource" in table.output


def test_llm_predict_through_the_cli(luma_home, fixture_space):
    result = _run("model", "predict", "llm-chat", "--space", str(fixture_space), "--state",
                  "accelerator_type=test-gpu,accelerator_count=8,precision=fp8")
    assert result.exit_code == 0, result.output
    assert "verdict: PASS" in result.output and "projected" in result.output


@pytest.mark.parametrize("state, message", [
    ("host_memory=-5 MiB", "must be positive"),
    ("host_memory=64 Gbit", "counts bits"),
    ("host_memory=2 GB/s", "does not fit"),
    ("compute=two", "not a whole number"),
    ("warp=9", "unknown axis 'warp'"),
    ("variant=int3", "unknown variant"),
    ("kv_cache=1 MiB", "has no kv_cache"),
])
def test_bad_service_states_are_one_line_errors(luma_home, state, message):
    result = _run("model", "predict", "matvec-memory", "--state", state)
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("state, message", [
    ("accelerator_type=warp-drive-9000", "unknown"),
    ("accelerator_type=test-gpu,memory_bandwidth=800 Gbit/s", "counts bits"),
    ("accelerator_type=test-gpu,memory_bandwidth=80 GB", "does not fit"),
    ("accelerator_type=test-gpu,hbm_capacity=-80 GB", "must be positive"),
    ("accelerator_type=test-gpu,precision=fp7", "unknown precision"),
])
def test_bad_llm_states_are_one_line_errors(luma_home, fixture_space, state, message):
    result = _run("model", "predict", "llm-chat", "--space", str(fixture_space), "--state", state)
    code = 2 if "warp-drive" in state else 1  # an accelerator no machine record names: a usage mistake
    assert result.exit_code == code and message in result.output and "Traceback" not in result.output


def test_unit_mismatch_names_the_byte_figure():
    with pytest.raises(ConfigError, match=r"800 Gbit/s is 100 GB/s"):
        hardware.quantity("800 Gbit/s", "bytes/s", "memory_bandwidth")
    assert hardware.quantity("800 Gbit/s", "bytes/s", "interconnect", allow_bits=True) == 100e9


def test_unknown_accelerator_without_a_declaration():
    with pytest.raises(UnknownName, match="warp-drive"):
        hardware.load("warp-drive", {})


def test_a_machine_record_satisfies_the_protocol():
    m = hardware.machine_from_spec("t", {"flops": {"fp16": "1 PFLOP/s"}, "memory": {"hbm": "96 GB"},
                                         "bandwidth": {"hbm": "4 TB/s"}}, "machines.t")
    assert isinstance(m, hardware.MachineLike)
    assert hardware.figures(m, "fp16")["flops"] == 1e15
    assert hardware.figures(m, "fp8")["flops"] != hardware.figures(m, "fp8")["flops"]  # NaN: unsupported


def test_a_latency_percentile_over_a_length_mix_is_that_percentile_s_output_length():
    import numpy as np

    from luma.experiments.model import judge

    m = {"latency": np.array([2.0]), "ttft": np.array([0.1]), "tpot": np.array([0.01]),
         "wait": np.zeros(1), "wait_fraction": np.zeros(1), "tail": {"latency": 1.23}}
    check = judge.Check("p95_latency", "<=", 5.0, 0.95)
    fixed, _ = judge.value(m, check)
    assert fixed == pytest.approx(2.0 * 1.23 ** judge.exponent(0.95))  # fixed lengths: the tail factor
    mixed, _ = judge.value({**m, "output_quantile": lambda q: np.array([801.0])}, check)
    assert mixed == pytest.approx(0.1 + 800 * 0.01)  # the p95 output: 800 more tokens after the first
    same, _ = judge.value({**m, "output_quantile": lambda q: np.array([np.nan])}, check)
    assert same == pytest.approx(fixed)  # a mix whose outputs do not vary keeps the tail factor
