"""Pricing a state (experiments/pricing.py): a price applies only to the dimension and unit it
names; anything else is an Unpriced reason naming the dimension, its unit and what the table
prices — never a product of mismatched units."""

from __future__ import annotations

import datetime as dt

import pytest

from luma.errors import NotPriced
from luma.experiments import prices
from luma.experiments.pricing import Amount, Unpriced, price_state, state_cost

H100 = "nvidia-h100-sxm5-80gb"


def _table(**entries) -> prices.PriceTable:
    doc = {"evidence_class": "vendor-claim"}
    for key, (price, currency) in entries.items():
        entry = {"price": price, "currency": currency, "source": f"quote {key}", "date": dt.date(2026, 1, 1)}
        if key.startswith("accel_"):
            doc.setdefault("accelerator_hour", {})[key.removeprefix("accel_").replace("_", "-")] = entry
        else:
            doc[key] = entry
    return prices.parse(doc, "t.toml")


CPU = _table(core_hour=(0.04, "USD"), memory_gib_hour=(0.005, "USD"), kwh=(0.15, "USD"))


def test_a_cpu_state_is_cores_times_core_hour_plus_gib_times_gib_hour():
    got = price_state({"compute": Amount(8, "core"), "host_memory": Amount(16, "GiB"),
                       "cxl_memory": Amount(8192, "MiB"), "power": Amount(400, "W")}, CPU)
    assert got.per_hour == pytest.approx(8 * 0.04 + 24 * 0.005 + 0.4 * 0.15) and got.currency == "USD"
    assert [p.key for p in got.used] == ["core_hour", "memory_gib_hour", "kwh"]


def test_compute_in_flops_is_never_multiplied_by_the_core_hour():
    # the issue-31 bug: 312 TFLOP/s x 0.04 USD per core-hour = 1.25e13 USD per hour
    got = price_state({"compute": Amount(312, "TFLOP/s"), "host_memory": Amount(16, "GiB")}, CPU)
    assert isinstance(got, Unpriced)
    assert (got.dimension, got.unit, got.needs) == ("compute", "FLOP / second", "core_hour")
    assert got.text() == ("compute (FLOP / second): no price applies to FLOP / second (core_hour prices compute "
                          "in core); the table prices core-hour, GiB-hour, kWh")


def test_an_accelerator_state_is_its_count_times_its_types_hour_and_its_flops_come_with_it():
    table = prices.load()
    got = price_state({"accelerator_type": H100, "accelerator_count": Amount(4, "accelerator"),
                       "compute": Amount(4 * 989.5, "TFLOP/s"), "hbm_capacity": Amount(320, "GB")}, table,
                      binding="hbm_capacity")
    assert got.per_hour == pytest.approx(12.0) and [p.key for p in got.used] == [f"accelerator_hour.{H100}"]
    assert got.covered == ("accelerator_count", "accelerator_type", "compute", "hbm_capacity")


def test_an_accelerator_without_its_types_price_says_what_the_table_has():
    with pytest.raises(NotPriced) as err:
        state_cost({"accelerator_type": H100, "accelerator_count": Amount(2, "accelerator")}, CPU)
    why = err.value.reason
    assert (why.dimension, why.unit, why.needs) == ("accelerator_count", "accelerator", f"accelerator_hour.{H100}")
    assert err.value.field == "accelerator_count" and "the table prices core-hour, GiB-hour, kWh" in str(err.value)


def test_the_type_falls_back_to_the_architecture_slug():
    table = _table(accel_gpu_x=(2.0, "USD"))
    got = price_state({"accelerator_count": Amount(3, "1")}, table, architecture="GPU X")
    assert got.per_hour == pytest.approx(6.0)


def test_a_binding_resource_with_no_price_in_its_unit_is_unpriced():
    # the KV cache binds on a CPU machine: the cores and memory are priced, the blocks are not
    got = price_state({"compute": Amount(2, "core"), "kv_cache": Amount(512, "block")}, CPU, binding="kv_cache")
    assert isinstance(got, Unpriced) and (got.dimension, got.unit) == ("kv_cache", "block")
    assert "binding resource has no price in its unit" in got.text()


def test_a_missing_price_and_an_empty_state_say_why():
    only_kwh = _table(kwh=(0.1, "EUR"))
    got = price_state({"compute": Amount(2, "core")}, only_kwh)
    assert got.text() == "compute (core): no core_hour price; the table prices kWh"
    assert "names no priced dimension" in price_state({"precision": "fp16"}, CPU).text()
    assert price_state({"compute": 2.0}, CPU).dimension == "compute"  # a bare number has no unit


def test_mixed_currencies_are_refused():
    table = _table(core_hour=(1, "USD"), memory_gib_hour=(1, "EUR"))
    with pytest.raises(NotPriced, match="mix currencies"):
        state_cost({"compute": Amount(1, "core"), "host_memory": Amount(1, "GiB")}, table)
