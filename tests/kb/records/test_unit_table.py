"""The shipped unit table (kb/records/unit_table.py) is pint's own answers, so reading a unit
through it or through pint gives the same canonical unit, factor and dimensionality."""

from __future__ import annotations

import pytest

from luma.kb.records import unit_table, unit_table_build, units


def test_the_shipped_table_is_what_pint_answers_now():
    # After a pint upgrade or a registry change: python -c "from luma.kb.records import unit_table_build as b; b.write()"
    assert (unit_table_build.Path(unit_table_build.__file__).with_name("unit_table.py").read_text(encoding="utf-8")
            == unit_table_build.source())


def test_the_table_covers_every_canonical_unit_and_the_common_ones():
    assert set(units.CANONICAL_UNITS) <= set(unit_table.UNITS)
    assert {"s", "ms", "B", "GiB", "GB/s", "token/s", "TFLOP/s", "TOPS", "W", "percent", "USD/request"} <= set(
        unit_table.UNITS)


@pytest.mark.parametrize("text", sorted(unit_table.UNITS))
def test_a_table_entry_reads_as_pint_reads_it(text):
    canonical, factor, dims, long = unit_table.UNITS[text]
    assert units.pint_canonical(text) == (canonical, factor)
    unit = units.parse_unit(text)
    assert str(unit.dimensionality) == dims and str(unit) == long
    assert units.normalise(3.0, text) == (3.0 * factor, canonical)
    assert units.dimensionality_of(f" {text} ") == dims


def test_units_outside_the_table_still_go_to_pint():
    assert "mm^3" not in unit_table.UNITS and "GiB/ms" not in unit_table.UNITS
    assert units.normalise(2.0, "GiB/ms") == (2.0 * 2**30 * 1000, "byte / second")
    assert units.long_form("Gbit/ms") == "gigabit / millisecond"
    with pytest.raises(units.UnitProblem, match="no supported dimension"):
        units.normalise(1.0, "W/token")
