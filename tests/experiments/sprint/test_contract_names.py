"""A shipped contract by either of its names: the file's (what `luma sprint run` is documented
with) and its `name` (what its records, sprint ids and reports carry). The names are not made
equal: the shipped evidence was signed under the `name`s, and its records still load."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.sprint import contract

EVIDENCE = Path(contract.__file__).resolve().parents[1] / "evidence" / "records"


def test_a_shipped_contract_loads_by_the_name_its_records_carry():
    aliases = contract.recorded_names()
    assert aliases["minilm-embedding-memory"].name == "minilm-memory.toml"
    assert aliases["digits-classifier-compute"].name == "digits-compute.toml"
    for name, path in aliases.items():
        assert contract.load(name) == contract.load(path.name[:-5])
    assert "matvec-memory" not in aliases  # the same name twice is no alias


def test_the_shipped_evidence_carries_the_recorded_names():
    chains = [json.loads(line) for path in EVIDENCE.glob("*/minilm-memory.jsonl") for line in path.open()
              if '"pex-chain"' in line]
    assert chains and all("minilm-embedding-memory" in json.dumps(c) for c in chains)


def test_sprint_contracts_shows_both_names():
    out = CliRunner().invoke(cli, ["sprint", "contracts", "--format", "json"])
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["minilm-memory"]["recorded as"] == "minilm-embedding-memory"
    assert rows["matvec-memory"]["recorded as"] == "matvec-memory"
