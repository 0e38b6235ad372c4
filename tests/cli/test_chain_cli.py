"""`luma chain assemble` as a lab would use it: trial records ingested with `luma kb ingest`, a chain
assembled from them, `luma rules run` — the measured chain qualifies, the vendor-claim one does
not; a missing piece is listed and the command fails with one `Error:` line, writing nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.trust.runners import signer
from luma.kb.vocab import ID
from tests.experiments.chains.conftest import LAB, complete, reps

XEON = {**LAB, "name": "Lab Xeon 8480"}


def luma(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ok(result):
    assert result.exit_code == 0, result.output
    return result


def ledger_rows(home: Path) -> int:
    with sqlite3.connect(home / "ledger.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM ledger_record").fetchone()[0]


def qualified() -> list[str]:
    out = ok(luma("kb", "query", "--format", "json", "PREFIX luma: <https://w3id.org/luma/ns#> "
                  "SELECT ?chain WHERE { ?q a luma:QualifiedBoundary ; luma:qualifies ?chain }")).stdout
    return [row["chain"]["value"] for row in json.loads(out)["results"]["bindings"]]


def test_assembled_chains_qualify_exactly_when_measured(luma_home, evidence, tmp_path):
    ok(luma("runner", "keygen", "--name", "lab-a"))
    lab = signer(luma_home, "lab-a")
    evidence.write_signed(lab, tmp_path / "measured.jsonl", *complete())
    (tmp_path / "vendor.jsonl").write_text("".join(json.dumps(d) + "\n" for d in complete(
        evidence="vendor-claim", architecture=XEON)))
    ok(luma("kb", "ingest", tmp_path / "measured.jsonl", tmp_path / "vendor.jsonl"))

    measured = ok(luma("chain", "assemble", "--contract", "matvec-memory", "--architecture", LAB["name"],
                       "--format", "json"))
    m = json.loads(measured.stdout)
    assert m["status"] == "ingested" and m["notes"] == []
    assert (m["chain"]["min_pass"], m["chain"]["adjacent_fail"], m["chain"]["binding_resource"],
            m["chain"]["recovered"], m["chain"]["repetitions"]) == ("8 MiB", "6 MiB", "host_memory", True, 3)
    vendor = ok(luma("chain", "assemble", "--contract", "matvec-memory", "--architecture", XEON["name"]))
    assert "(vendor-claim)" in vendor.stdout and "only measured chains qualify" in vendor.stderr
    v = json.loads(ok(luma("chain", "assemble", "--contract", "matvec-memory", "--architecture", XEON["name"],
                           "--format", "json")).stdout)
    assert v["status"] == "already in the ledger"

    ok(luma("rules", "run"))
    assert qualified() == [f"{ID}chain/{m['chain']['record'][:32]}"]


def test_a_missing_piece_is_listed_and_nothing_is_written(luma_home, evidence, tmp_path):
    ok(luma("runner", "keygen", "--name", "lab-a"))
    path = tmp_path / "trials.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in reps(3, 8, "PASS", evidence="vendor-claim")
                            + reps(3, 12, "PASS", evidence="vendor-claim")))
    ok(luma("kb", "ingest", path))
    before = ledger_rows(luma_home)
    result = luma("chain", "assemble", "--contract", "matvec-memory", "--no-ingest", "--out", tmp_path / "c.json")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "  - no FAIL at an adjacent level: levels tried 8 MiB (PASS ×3), 12 MiB (PASS ×3)",
        "Error: no chain from 6 trial record(s) of contract 'matvec-memory': 1 piece missing (listed above); "
        "nothing was written"]
    assert ledger_rows(luma_home) == before and not (tmp_path / "c.json").exists()


def test_usage_errors_name_the_flags(luma_home):
    assert luma("chain", "assemble").exit_code == 2
    result = luma("chain", "assemble", "--sprint", "s", "--no-ingest")
    assert result.exit_code == 2 and "--out FILE" in result.output
