"""A small pilot contract on the NumPy matvec service (no torch: its servers start in a second)."""

from __future__ import annotations

import pytest

CONTRACT = """
name = "matvec-pilot"
description = "test pilot contract"
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

[[clauses]]
metric = "error_rate"
op = "<="
value = 0.01
unit = "dimensionless"

[[clauses]]
metric = "cost_per_accepted"
op = "<="
value = 1e-4
unit = "USD/request"

[load]
mode = "closed"
concurrency = 4
requests = 80
warmup = 4
max_batch = 8
timeout_s = 30

[state]
compute = "1 core"
host_memory = "64 MiB"

[pilot]
window_s = 3
patience = 1
"""


@pytest.fixture
def pilot_contract(tmp_path):
    path = tmp_path / "matvec-pilot.toml"
    path.write_text(CONTRACT)
    return path
