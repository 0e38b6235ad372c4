"""Price tables (experiments/prices.py): every figure has a currency, a source, a date and an evidence
class; the shipped table is labelled as examples; a model space's [cost] table reads as one, so
the two never disagree; each problem is one ConfigError naming the file and the field."""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luma.errors import ConfigError
from luma.experiments import prices
from luma.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GOOD = """title = "t"
evidence_class = "vendor-claim"
[core_hour]
price = 0.05
currency = "EUR"
source = "list price, example.com"
date = 2026-11-01
[accelerator_hour.npu-1]
purchase = 26280
currency = "EUR"
source = "quote 42"
date = 2026-10-01
evidence_class = "user-supplied"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return path


def test_the_shipped_table_is_labelled_as_examples_and_every_figure_is_sourced():
    table = prices.load()
    assert table.example and "illustrative" in table.title
    assert {"core_hour", "memory_gib_hour", "kwh"} <= set(table.prices) and table.accelerators()
    for p in table.prices.values():
        assert p.currency == "USD" and p.source and p.date and p.evidence_class in prices.PRICE_CLASSES
        assert "not a quote" in p.source or "not quotes" in p.source


def test_the_accelerator_prices_are_those_of_the_model_space_not_a_copy():
    space = tomllib.loads((ROOT / "experiments" / "model" / "spaces" / "llm-70b.toml").read_text())
    table = prices.load()
    assert {k: table.accelerator(k).price for k in table.accelerators()} == space["cost"]
    assert all(space["cost_source"] in table.accelerator(k).source for k in table.accelerators())


def test_a_model_space_file_reads_as_a_price_table():
    table = prices.load(ROOT / "experiments" / "model" / "spaces" / "llm-70b.toml")
    assert table.accelerator("nvidia-h100-sxm5-80gb").price == 3.0
    assert table.accelerator("nvidia-h100-sxm5-80gb").date is None  # a space's prices are undated: said so
    assert "undated" in table.accelerator("nvidia-h100-sxm5-80gb").cite()


def test_a_table_with_hourly_and_purchase_prices(tmp_path):
    table = prices.load(_write(tmp_path, GOOD))
    core, npu = table.get("core_hour"), table.accelerator("npu-1")
    assert (core.price, core.currency, core.evidence_class, core.date) == (0.05, "EUR", "vendor-claim",
                                                                           dt.date(2026, 11, 1))
    assert npu.evidence_class == "user-supplied"
    # 26280 over the default 3 years of 8760 h: 1 EUR per hour
    assert (table.years, table.utilisation) == (3.0, 0.5) and npu.hourly(table.years) == pytest.approx(1.0)


@pytest.mark.parametrize("change, field", [
    (("source = \"list price, example.com\"\n", ""), "core_hour.source"),
    (("currency = \"EUR\"\nsource = \"list", "source = \"list"), "core_hour.currency"),
    (("date = 2026-11-01\n", ""), "core_hour.date"),
    (("price = 0.05", "price = -0.05"), "core_hour.price"),
    (("price = 0.05", "price = 0.05\nprice_per = 1"), "core_hour.price_per"),
    (("price = 0.05", "price = 0.05\npurchase = 9"), "core_hour.price"),
    (("currency = \"EUR\"\nsource = \"list", "currency = \"euro\"\nsource = \"list"), "core_hour.currency"),
    (("title = \"t\"", "title = \"t\"\ngpu_hour = 3"), "gpu_hour"),
    (("evidence_class = \"vendor-claim\"", "evidence_class = \"measured\""), "evidence_class"),
    (("[core_hour]", "[lifetime]\nutilisation = 1.5\n[core_hour]"), "lifetime.utilisation"),
    (("[core_hour]", "[lifetime]\nyears = 0\n[core_hour]"), "lifetime.years"),
    (("date = 2026-11-01", "date = \"last week\""), "core_hour.date"),
])
def test_each_problem_is_one_line_naming_the_field(tmp_path, change, field):
    path = _write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(ConfigError) as err:
        prices.load(path)
    assert err.value.field == field and err.value.source == str(path)
    assert "\n" not in err.value.one_line()


def test_a_price_needs_a_class_when_the_table_gives_none(tmp_path):
    path = _write(tmp_path, GOOD.replace('evidence_class = "vendor-claim"\n', ""))
    with pytest.raises(ConfigError) as err:
        prices.load(path)
    assert err.value.field == "core_hour.evidence_class"


def test_the_file_limit_of_the_project_applies(tmp_path):
    path = _write(tmp_path, GOOD)
    small = Settings.from_env(environ={"LUMA_MAX_CONFIG_FILE_BYTES": "10"}, home=tmp_path)
    with pytest.raises(ConfigError, match="LUMA_MAX_CONFIG_FILE_BYTES"):
        prices.load(path, small)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False), st.sampled_from(["USD", "EUR", "JPY"]),
       st.text(alphabet=st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1, max_size=80)
       .filter(lambda s: s.strip() and '"' not in s and "\\" not in s))
def test_any_sourced_price_round_trips(value, currency, source):
    doc = {"evidence_class": "vendor-claim",
           "kwh": {"price": value, "currency": currency, "source": source, "date": dt.date(2026, 1, 2)}}
    kwh = prices.parse(doc, "mem.toml").get("kwh")
    assert (kwh.price, kwh.currency, kwh.source, kwh.unit) == (value, currency, source.strip(), "kWh")

