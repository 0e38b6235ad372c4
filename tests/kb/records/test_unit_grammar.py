"""Units are untrusted input: the grammar refuses expressions before pint evaluates them (no
hang on `10**10**10`, no ZeroDivisionError on `GiB/0`), every unit LUMA ships or writes still
parses to the same pint unit, and nothing but UnitProblem ever leaves the units module."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from luma.errors import ConfigError
from luma.kb.records import unit_grammar, units
from luma.kb.records.dimensions import record_dimensions

ROOT = Path(__file__).resolve().parents[3]

#: Folders of shipped data (and the tests' own records) whose units must all still parse.
DATA_FOLDERS = ("kb/examples", "experiments/contracts", "experiments/machines", "experiments/model/spaces",
                "experiments/model/contracts", "tests/kb/data")
#: Python sources that write records with literal units (`"unit": "s"`).
WRITERS = ("kb/records/synthetic.py", "experiments/sprint/trial.py", "experiments/sprint/records.py", "experiments/characterize.py",
           "experiments/sprint/states.py", "kernels/evidence.py")
#: "512 MiB", "3.35 TB/s", "1 core": a level or figure written as text.
_QUANTITY = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\s+([A-Za-zµμ%][^\s]*)")
_LITERAL = re.compile(r"""(?:"unit"\s*:\s*|unit=|Level\(value=[^,]+,\s*unit=)["']([^"']+)["']""")

HOSTILE = ["10**10**10", "GiB/0", "1/0", "GiB**(1/0)", "ms/0", "W/0", "GiB\x00", "GiB\n", "\tms", "·",
           "2**2**2**2**2", "GiB**99999999", "GiB^5", "s**-5", "(GiB)", "GiB*(s)", "1e309", "GiB*1e308", "9/s",
           "GB s", "GiB  /  s", "x" * 65, "__import__('os')", "GiB; ms", "GiB**2**2", "'GiB'", "",
           "YB**4*YB**4*YB**4*YB**4/yB**3/yB**4/yB**4/yB**4", "yB**4*yB**4*yB**4*yB**4/YB**3/YB**4/YB**4/YB**4"]


def _documents(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    if path.suffix == ".yaml":
        return list(yaml.safe_load_all(text))
    if path.suffix == ".toml":
        return [tomllib.loads(text)]
    return []


def _units_in(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "unit" and isinstance(value, str):
                yield value
            else:
                yield from _units_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _units_in(value)
    elif isinstance(node, str) and (m := _QUANTITY.fullmatch(node.strip())):
        yield m.group(1)


def shipped_units() -> set[str]:
    """Every unit text in the shipped files, the writers' sources, the ontology and units.py."""
    found = set(units.CANONICAL_UNITS)
    for folder in DATA_FOLDERS:
        for path in sorted(p for p in (ROOT / folder).iterdir() if p.is_file()):  # not __pycache__
            for doc in _documents(path):
                found.update(_units_in(doc))
    for source in WRITERS:
        found.update(_LITERAL.findall((ROOT / source).read_text(encoding="utf-8")))
    for dim in record_dimensions().values():
        found.update(dim.accepts_units)
    return found


def test_the_walk_finds_the_units_in_use():
    found = shipped_units()
    assert {"GiB", "GB/s", "ms", "core", "TFLOP/s", "TOPS", "1", "1/s", "percent", "mm^2", "byte/byte", "us",
            "token/s", "request/s", "dimensionless", "B", "block", "accelerator", "W", "KiB"} <= found


@pytest.mark.parametrize("text", sorted(shipped_units()))
def test_every_shipped_unit_parses_to_the_same_pint_unit(text):
    # Raw pint on trusted text is the reference the grammar must not change.
    assert units.parse_unit(text) == units.registry().parse_units(text.strip())


@pytest.mark.parametrize("text, pint_sees", [
    ("GiB", "GiB"), ("GB / s", "GB/s"), ("1 / second", "1/second"), ("meter ** 2", "meter**2"), ("mm^2", "mm**2"),
    ("s^-1", "s**-1"), ("GB·s", "GB*s"), (" ms ", "ms"), ("1", "1"), ("%", "%"), ("µs", "µs"), ("μs", "μs"),
    ("kg*m^2/s^3", "kg*m**2/s**3"), ("g0", "g0"),
])
def test_the_grammar_hands_pint_its_own_tokens(text, pint_sees):
    assert unit_grammar.pint_text(text) == pint_sees


@pytest.fixture(scope="module")
def hostile_outcomes() -> dict:
    """What the units module does with each hostile string, in a child process with a time-out
    (a unit that hangs pint cannot be interrupted from Python)."""
    script = (
        "import json, sys\nfrom luma.kb.records import units\nout = {}\n"
        "for text in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        units.parse_unit(text); units.dimensionality_of(text); units.normalise(1, text)\n"
        "        out[text] = 'accepted'\n"
        "    except units.UnitProblem as exc:\n"
        "        out[text] = 'UnitProblem: ' + str(exc)\n"
        "    except BaseException as exc:\n"
        "        out[text] = type(exc).__name__\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(HOSTILE), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_units_are_refused_quickly_with_one_line(hostile_outcomes, text):
    outcome = hostile_outcomes[text]
    assert outcome.startswith("UnitProblem: "), outcome
    assert "\n" not in outcome and len(outcome) < 300


def test_units_that_are_not_text_are_refused():
    for value in (["GB"], None, 5, {"unit": "GB"}):
        with pytest.raises(units.UnitProblem, match="must be text"):
            units.normalise(1, value)
        with pytest.raises(units.UnitProblem):
            units.parse_unit(value)


def test_units_out_of_range_are_refused_not_overflowed():
    with pytest.raises(units.UnitProblem, match="cannot be converted"):
        units.normalise(1, "YB**4*YB**4*YB**4*YB**4/yB**3/yB**4/yB**4/yB**4")
    with pytest.raises(units.UnitProblem, match="out of range"):
        units.normalise(1, "yB**4*yB**4*yB**4*yB**4/YB**3/YB**4/YB**4/YB**4")


def test_a_model_quantity_with_a_hostile_unit_is_a_config_error():
    from luma.experiments.model import hardware

    for text in ("1 GiB/0", "1 10**10**10", "800 Gbit*Gbit/Gbit*s/s/s"):
        with pytest.raises(ConfigError) as info:
            hardware.quantity(text, "bytes/s", "bandwidth")
        assert info.value.field == "bandwidth" and "\n" not in info.value.message


# --- records: the field is named --------------------------------------------------------------

_CHAIN = json.loads((ROOT / "tests" / "kb" / "data" / "full_chain.json").read_text())
_MACHINE = {"record_type": "machine", "evidence_class": "measured", "name": "test-host",
            "architecture": {"name": "Test CPU", "kind": "cpu", "vendor": "Test"}, "provenance": {"tool": "pytest"},
            "memory": [{"tier": "host", "capacity": {"value": 1, "unit": "GiB"}}]}
_KERNEL = json.loads((ROOT / "tests" / "kb" / "data" / "kernel_result.json").read_text())
_PARTNER = tomllib.loads((ROOT / "kb" / "examples" / "partner-kv-compression.toml").read_text())
#: (record, path to a unit, the field the error must name)
PLACES = {
    "level": (_CHAIN, ("pass_state", "dimensions", "hbm_capacity", "unit"), "pass_state.dimensions.hbm_capacity"),
    "clause": (_CHAIN, ("contract", "clauses", 0, "unit"), "contract.clauses[0].unit"),
    "observation": (_CHAIN, ("trials", 0, "observations", 0, "unit"), "trials[0].observations[0].unit"),
    "machine": (_MACHINE, ("memory", 0, "capacity", "unit"), "memory[0].capacity"),
    "kernel-result": (_KERNEL, ("metrics", 0, "unit"), "metrics[0].unit"),
    "partner": (_PARTNER, ("buffering", "unit"), "buffering"),
}


def _with_unit(record: dict, path: tuple, unit: str) -> dict:
    doc = json.loads(json.dumps(record, default=str))
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = unit
    return doc


@pytest.fixture(scope="module")
def record_outcomes() -> dict:
    """{place|unit: [field, message] or an exception's name}, validated in a child process."""
    cases = {f"{place}|{unit}": _with_unit(rec, path, unit)
             for place, (rec, path, _) in PLACES.items() for unit in ("10**10**10", "GiB/0", "GiB**(1/0)", "W/0")}
    script = (
        "import json, sys\nfrom luma.errors import RecordError\n"
        "from luma.kb.records.loader import validate_document\nout = {}\n"
        "for key, doc in json.loads(sys.stdin.read()).items():\n"
        "    try:\n"
        "        validate_document(doc, 'r.json'); out[key] = 'accepted'\n"
        "    except RecordError as exc:\n"
        "        out[key] = [exc.field, exc.message]\n"
        "    except BaseException as exc:\n"
        "        out[key] = type(exc).__name__\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("unit", ["10**10**10", "GiB/0", "GiB**(1/0)", "W/0"])
@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_record_with_a_hostile_unit_is_refused_naming_the_field(record_outcomes, place, unit):
    outcome = record_outcomes[f"{place}|{unit}"]
    assert isinstance(outcome, list), outcome
    field, message = outcome
    assert field.startswith(PLACES[place][2]), (field, message)
    assert "not a unit expression" in message and "\n" not in message


def test_the_records_without_the_hostile_unit_are_valid():
    from luma.kb.records.loader import validate_document

    for place, (rec, path, _) in PLACES.items():
        validate_document(rec, f"{place}.json")


# --- properties ---------------------------------------------------------------------------------

_NAMES = ["GiB", "GB", "MiB", "B", "byte", "bit", "Gbit", "ms", "s", "us", "µs", "ns", "second", "hour", "W", "mW",
          "J", "kWh", "Hz", "GHz", "core", "token", "request", "block", "accelerator", "FLOP", "TFLOP", "TOPS", "m",
          "mm", "percent", "%", "euro", "EUR", "dimensionless", "g0", "pi"]


@st.composite
def grammar_units(draw) -> str:
    """Text the grammar accepts, made of names pint knows."""
    def factor() -> str:
        name = draw(st.sampled_from(_NAMES))
        power = draw(st.sampled_from(["", "^2", "**2", "**-1", "^3", " ** 4", "^-2"]))
        return name + power

    text = factor()
    for _ in range(draw(st.integers(0, 4))):
        text += draw(st.sampled_from(["*", "/", " / ", "·", " * "])) + factor()
    if draw(st.booleans()):
        text = draw(st.sampled_from(["1/", "1 / "])) + text
    return text


def _timed(fn, text):
    start = time.perf_counter()
    try:
        fn(text)
    except units.UnitProblem:
        pass
    return time.perf_counter() - start


@given(grammar_units())
@settings(max_examples=300, deadline=None)
def test_text_the_grammar_accepts_parses_in_bounded_time(text):
    if len(text) > unit_grammar.MAX_LENGTH:
        return  # refused by the length cap
    assert unit_grammar.check(text) == text.strip(" ")
    assert _timed(units.parse_unit, text) < 2.0
    assert _timed(lambda t: units.normalise(1.5, t), text) < 2.0  # fits a canonical unit, or UnitProblem


_HOSTILE_PARTS = st.sampled_from(["**", "^", "*", "/", "(", ")", "1", "0", "9", "99999", "-", "+", ".", "e", "E",
                                  " ", "  ", "GiB", "s", "ms", "µ", "%", "_", "\x00", "\t", "·", "10**10", "[", "'",
                                  "inf", "nan", "1e308", "j"])


@given(st.one_of(st.lists(_HOSTILE_PARTS, max_size=24).map("".join), st.text(max_size=80)))
@settings(max_examples=400, deadline=None)
def test_hostile_text_is_refused_or_parses_safely(text):
    accepted = True
    try:
        unit_grammar.check(text)
    except unit_grammar.UnitSyntaxError:
        accepted = False
    if accepted:
        # What passes has nothing pint could spend time or divide on.
        assert "(" not in text and len(text) <= unit_grammar.MAX_LENGTH
        numbers = re.findall(r"[0-9]+", re.sub(r"[A-Za-zµμ][A-Za-z0-9_]*", "", text))
        assert all(n in ("1", "2", "3", "4") for n in numbers), numbers
    for fn in (units.parse_unit, units.dimensionality_of, lambda t: units.normalise(1, t)):
        assert _timed(fn, text) < 2.0  # only UnitProblem may leave (anything else fails the test)
