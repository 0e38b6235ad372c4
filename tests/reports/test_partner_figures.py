"""Partner evaluation and `luma model` figures as people read them (issue 15, item 17): a cost
always with its currency and where the prices come from, each figure labelled with the state it
is taken at (each side's minimum PASS state, or the given state), model inputs with units, one
memory convention (binary GiB) in the CLI and the report, `luma model explore`'s margin under the
resource it names, and `luma model predict`'s memory figures named for what they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.reports import partner_figures as figures

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
ARGS = ["--contract", "llm-long-context", "--space", "llm-70b",
        "--state", "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=2,precision=fp16"]


def _run(home: Path, *args):
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
            mp.delenv(var, raising=False)
        home = tmp_path_factory.mktemp("partner") / "home"
        doc = json.loads(_run(home, "partner", "evaluate", str(RECORD), *ARGS, "--format", "json").stdout)
        table = _run(home, "partner", "evaluate", str(RECORD), *ARGS).output
        out = home.parent / "report"
        assert _run(home, "report", "partner", str(RECORD), *ARGS, "--out", str(out)).exit_code == 0
        yield doc, table, (out / "report.md").read_text()


def _row(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if label in line)


def test_every_cost_has_its_currency_and_the_prices_their_source(evaluated):
    doc, table, md = evaluated
    assert doc["cost_unit"] == "USD per hour" and "illustrative" in doc["cost_source"]
    for text in (table, md):
        for label in ("cost per hour", "cost per accepted request", "cost per accepted token"):
            assert "USD" in _row(text, label), (label, _row(text, label))
        assert "prices: illustrative" in text
    assert not re.search(r"\d per hour", table + md) and "cost in  per" not in md
    assert "12 -> 6 USD per hour" in md


def test_each_row_says_at_which_state_it_is_taken(evaluated):
    _, table, md = evaluated
    for text in (table, md):
        assert figures.MIN_PASS in _row(text, "cost per hour") and figures.MIN_PASS in _row(text, "accelerators")
        assert figures.GIVEN in _row(text, "highest concurrency") and figures.GIVEN in _row(text, "memory per device")
    assert "| figure | at | baseline | with the intervention | change |" in md


def test_memory_per_device_is_the_same_figure_in_the_cli_and_the_report(evaluated):
    doc, table, md = evaluated
    need = doc["changes"]["memory_need_per_device"]["before"]
    gib = f"{need / 2**30:.1f} GiB"
    assert gib in _row(table, "memory per device") and gib in _row(md, "memory per device")
    assert not re.search(r"\d GB\b", _row(table, "memory per device") + _row(md, "memory per device"))


def test_model_inputs_have_units(evaluated):
    _, table, md = evaluated
    for text in (table, md):
        assert "35 µs" in _row(text, "added latency per decode step") and "64 MiB" in _row(text, "buffering per device")
        assert "900 GB/s" in _row(text, "KV decode rate per device") and "18 W" in _row(text, "added power per device")
        assert "×1.84" in _row(text, "KV capacity factor")
    assert "3.5e-05" not in md and "67,108,864" not in md


def test_explore_puts_the_resources_margin_under_the_resource(tmp_path, monkeypatch):
    from luma.experiments.sprint import contract as contract_mod
    from luma.experiments.model import predict, simulate, space
    from luma.experiments.model.contracts import __name__ as _  # noqa: F401 - the package exists

    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    c = contract_mod.load(Path(__file__).resolve().parents[2] / "experiments" / "model" / "contracts" / "llm-chat.toml")
    sp = space.load("llm-70b", c)
    out = simulate.explore(c, sp, None, propose=5)
    rows = [r for r in out["frontier"] if r.get("state")]
    assert rows
    for row in rows[:3]:
        p = predict.predict(c, space.from_state({**row["state"], **row["demand"]},
                                                c, base=sp))
        # the named resource's own margin: that of the check it binds, never the quality clause's
        own = next(x for x in p.clauses if x["resource"] == row["resource"])
        assert row["resource_margin"] == pytest.approx(own["margin"])
        assert row["closest_check"] == "quality" and row["closest_margin"] <= row["resource_margin"]
    table = CliRunner().invoke(cli, ["model", "explore", "llm-chat", "--space", "llm-70b"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    header = [c.strip() for c in _row(table.output, "tightest resource").strip("┃").split("┃")]
    assert {"tightest resource", "its margin", "closest check", "cost (USD/h)"} <= set(header)
    shown = 0
    for line in table.output.splitlines():
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) == len(header) and cells[header.index("tightest resource")] in {r["resource"] for r in rows}:
            shown += 1
            assert re.fullmatch(r"[a-z0-9_]+ [+-]\d+(\.\d+)?%", cells[header.index("closest check")])
            assert re.fullmatch(r"[+-]\d+(\.\d+)?%", cells[header.index("its margin")])
    assert shown


def test_predict_names_each_memory_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(cli, ["model", "predict", "llm-chat", "--space", "llm-70b", "--state",
                                   "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=2,precision=fp16"],
                             env={"COLUMNS": "200"}).output
    assert "memory per device, 1 sequence" in out
    line = _row(out, "memory per device:")
    assert "with one sequence (the memory check)" in line and "with every sequence of the load resident" in line
    assert not re.search(r"\d GB\b", out) and "GiB" in line
    assert "memory_need" not in out  # no second unlabelled memory figure
    host = CliRunner().invoke(cli, ["model", "predict", "matvec-memory", "--state", "host_memory=8 MiB"],
                              env={"COLUMNS": "200"}).output
    assert "memory beyond the runtime" in host and "peak RSS with the runtime" in host


def test_predict_lists_every_contract_it_resolves(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "home"))
    out = CliRunner().invoke(cli, ["model", "predict", "no-such-contract"]).output
    for name in ("decoder-kv", "digits-compute", "matvec-memory", "minilm-memory", "llm-chat", "llm-long-context"):
        assert name in out


def test_a_space_with_prices_must_name_their_currency(tmp_path):
    from luma.errors import ConfigError
    from luma.experiments.sprint import contract as contract_mod
    from luma.experiments.model import space

    c = contract_mod.load(ROOT / "experiments" / "model" / "contracts" / "llm-chat.toml")
    path = tmp_path / "s.toml"
    path.write_text('model = "llama-2-70b"\n[axes]\naccelerator_type = ["nvidia-h100-sxm5-80gb"]\n'
                    '[cost]\nnvidia-h100-sxm5-80gb = 3.0\n')
    with pytest.raises(ConfigError, match="currency"):
        space.load(path, c)
    path.write_text('model = "llama-2-70b"\ncurrency = "dollars"\n[axes]\naccelerator_type = ["x"]\n')
    with pytest.raises(ConfigError, match="ISO 4217"):
        space.load(path, c)
