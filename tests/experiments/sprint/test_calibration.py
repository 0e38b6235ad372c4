"""Contracts that fit the host (issue 32, item 2): a clause stated for a reference host is scaled by
this host's own calibration (`luma machine characterize`) times a stated margin; the resolved
absolute threshold is what every record carries; no calibration, or one measured beside a busy
neighbour, is an error naming what to run — never a threshold loosened by a neighbour."""

from __future__ import annotations

import json

import pytest

from luma.errors import ContractError
from luma.experiments.characterize import CONTENDED_NOTE
from luma.experiments.sprint import calibration
from luma.experiments.sprint import contract as contract_mod
from luma.settings import Settings

RELATIVE = '''
name = "relative-matvec"
service = "matvec"

[[clauses]]
metric = "quality"
op = ">="
value = 0.999
unit = "dimensionless"

[[clauses]]
metric = "p95_latency"
op = "<="
value = 50
unit = "ms"
[clauses.relative]
figure = "fp32"
cores = 1
reference = 40.0
reference_host = "a test host"
margin = 1.5

[[clauses]]
metric = "throughput"
op = ">="
value = 100
unit = "1/s"
[clauses.relative]
figure = "bandwidth"
cores = 1
reference = 10.0
reference_host = "a test host"
'''


def _machine(home, stamp: str, fp32: float, bandwidth: float, notes=()) -> None:
    folder = home / "machines"
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"record_type": "machine", "evidence_class": "measured", "name": calibration.host_name(),
           "compute": [{"precision": "fp32", "cores": 1, "throughput": {"value": fp32, "unit": "GFLOP/s"}}],
           "memory": [{"tier": "host", "cores": 1, "bandwidth": {"value": bandwidth, "unit": "GB/s"}}],
           "notes": list(notes)}
    (folder / f"{stamp}-{calibration.host_name()}.json").write_text(json.dumps(doc))


@pytest.fixture
def project(tmp_path):
    (tmp_path / "c.toml").write_text(RELATIVE)
    return Settings.from_env(home=tmp_path / "home"), tmp_path / "c.toml"


def test_a_relative_clause_is_scaled_by_this_hosts_calibration(project):
    settings, path = project
    _machine(settings.home, "20261201T000000Z", fp32=20.0, bandwidth=5.0)  # a host half as fast
    c = contract_mod.load(path, settings)
    clauses = {x["metric"]: x for x in c.record_contract()["clauses"]}
    assert clauses["p95_latency"]["value"] == pytest.approx(50 * 40 / 20 * 1.5)  # slower host: more time
    assert clauses["throughput"]["value"] == pytest.approx(100 * 5 / 10)  # and less throughput
    assert "relative" not in clauses["p95_latency"]
    basis = {b["metric"]: b for b in c.resolution}
    assert basis["p95_latency"]["host"] == 20.0 and basis["p95_latency"]["calibration"].endswith(".json")


def test_the_newest_uncontended_calibration_is_used(project):
    settings, path = project
    _machine(settings.home, "20261201T000000Z", fp32=40.0, bandwidth=10.0)
    _machine(settings.home, "20261203T000000Z", fp32=8.0, bandwidth=2.0, notes=[f"{CONTENDED_NOTE} beside a neighbour"])
    c = contract_mod.load(path, settings)
    assert {x["metric"]: x["value"] for x in c.record_contract()["clauses"]}["p95_latency"] == pytest.approx(75)


def test_without_a_calibration_the_error_names_the_command(project):
    settings, path = project
    with pytest.raises(ContractError, match="run `luma machine characterize` on a quiet host"):
        contract_mod.load(path, settings)


def test_an_unresolved_relative_clause_never_reaches_a_record(project):
    _, path = project
    c = contract_mod.load(path)  # no project: as the file states it
    with pytest.raises(ContractError, match="relative to the host"):
        c.record_contract()


def test_absolute_contracts_are_untouched(project):
    settings, _ = project
    c = contract_mod.load("matvec-memory", settings)
    assert c.resolution == [] and c == contract_mod.load("matvec-memory")
