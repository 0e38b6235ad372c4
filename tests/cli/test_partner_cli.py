"""`luma partner add|list|show|remove` and `luma kb query --scope` through the CLI, with a temporary
LUMA_HOME: bad input exits 1 with one line naming file and field, and leaves ledger and KB as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
KV = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
CXL = ROOT / "kb" / "examples" / "partner-cxl-expander.toml"
CHAIN = ROOT / "kb" / "examples" / "embedding-minilm.json"
GOOD = {"record_type": "intervention-parameters", "partner": "acme", "name": "kvz", "version": "1.0",
        "integration_point": "driver", "data_classes": ["kv-cache"],
        "effects": [{"data_class": "kv-cache", "capacity_effect": {"value": 1.5, "unit": "1"}}]}


def run(*args: str, ok: bool = True):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def state(home: Path) -> tuple:
    """What a failed command must leave untouched: the ledger rows and every quad of the KB."""
    export = run("kb", "export").output
    stats = json.loads(run("kb", "stats", "--format", "json").stdout)
    return stats["ledger_records"], stats["by_kind_and_evidence"], export


def write(tmp_path: Path, name: str, doc) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if isinstance(doc, (dict, list)) else doc)
    return path


def test_add_list_show_remove(luma_home, tmp_path):
    out = run("partner", "add", str(KV), str(CXL), "--format", "json").stdout
    added = json.loads(out)
    assert {r["partner"] for r in added} == {"kvzip-labs", "memfabric"} and {r["status"] for r in added} == {"added"}
    again = json.loads(run("partner", "add", str(KV), "--format", "json").stdout)
    assert again[0]["status"] == "duplicate"

    listed = {r["partner"]: r for r in json.loads(run("partner", "list", "--format", "json").stdout)}
    assert listed["kvzip-labs"]["records"] == 1 and listed["memfabric"]["data_classes"] == "embeddings, kv-cache, weights"
    csv = run("partner", "list", "--format", "csv").output.splitlines()
    assert csv[0].startswith("partner,records,removed") and len(csv) == 3

    shown = json.loads(run("partner", "show", "kvzip", "--format", "json").stdout)
    assert shown["record"]["partner"] == "kvzip-labs" and shown["status"] == "live"
    assert {f["kind"]: f["si"] for f in shown["figures"]}["decode_throughput"] == pytest.approx(900e9)
    by_hash = json.loads(run("partner", "show", shown["content_hash"][:10], "--format", "json").stdout)
    assert by_hash["content_hash"] == shown["content_hash"]
    partner = json.loads(run("partner", "show", "memfabric", "--format", "json").stdout)
    assert [r["record"]["name"] for r in partner["records"]] == ["mf-cxl-x2"]
    table = run("partner", "show", "mf-cxl-x2").output
    assert "silicon_area" in table and "12.5 mm^2" in table

    out = run("partner", "remove", "kvzip-labs", "--reason", "evaluation ended").output
    assert "removed 1 record(s) of partner kvzip-labs" in out
    listed = {r["partner"]: r for r in json.loads(run("partner", "list", "--format", "json").stdout)}
    assert (listed["kvzip-labs"]["records"], listed["kvzip-labs"]["removed"]) == (0, 1)
    assert json.loads(run("partner", "show", "kvzip", "--format", "json").stdout)["status"] == "removed"
    q = "SELECT ?n WHERE { ?r luma:partnerName ?n ; a luma:InterventionParameterRecord }"
    assert "kvzip-labs" not in run("kb", "query", q, "--format", "csv").output
    run("kb", "rebuild")
    assert "kvzip-labs" not in run("kb", "query", q, "--format", "csv").output
    assert "memfabric" in run("kb", "query", q, "--format", "csv").output

    refused = run("partner", "add", str(KV), ok=False)  # the same bytes cannot come back
    assert refused.exit_code == 1 and "was removed on" in refused.output


def test_remove_one_record_and_errors(luma_home, tmp_path):
    second = write(tmp_path, "v2.json", {**GOOD, "version": "2.0"})
    run("partner", "add", str(write(tmp_path, "v1.json", GOOD)), str(second))
    shown = json.loads(run("partner", "show", "acme", "--format", "json").stdout)["records"]
    v1 = next(r["content_hash"] for r in shown if r["record"]["version"] == "1.0")
    run("partner", "remove", "acme", "--record", v1[:8])
    listed = json.loads(run("partner", "list", "--format", "json").stdout)[0]
    assert (listed["records"], listed["removed"]) == (1, 1)
    for args, message, code in ((("partner", "remove", "nobody"), "unknown partner 'nobody'", 2),
                                (("partner", "remove", "acme", "--record", v1[:8]), "removed already", 1),
                                (("partner", "show", "nothing-like-it"), "no partner record", 2)):
        result = run(*args, ok=False)  # a name that does not exist is a usage mistake (2)
        assert result.exit_code == code and message in result.output and len(result.output.strip().splitlines()) == 1


def test_partner_option_fills_and_refuses(luma_home, tmp_path):
    anonymous = {k: v for k, v in GOOD.items() if k != "partner"}
    path = write(tmp_path, "anon.yaml", json.dumps(anonymous))  # JSON is YAML
    out = json.loads(run("partner", "add", str(path), "--partner", "zeta", "--format", "json").stdout)
    assert out[0]["partner"] == "zeta"
    refused = run("partner", "add", str(KV), "--partner", "zeta", ok=False)
    assert refused.exit_code == 1 and f"{KV}: partner: the record names partner 'kvzip-labs'" in refused.output
    assert run("partner", "add", str(KV), "--partner", "Bad Name", ok=False).exit_code == 2


def _bad_cases() -> dict:
    q = GOOD["effects"][0]
    return {
        "missing-unit": ({**GOOD, "power": {"value": 5}}, "power.unit"),
        "wrong-dimension": ({**GOOD, "added_latency": {"value": 5, "unit": "GB"}}, "added_latency"),
        "negative-ratio": ({**GOOD, "effects": [{**q, "capacity_effect": {"value": -1.5, "unit": "1"}}]},
                           "effects[0].capacity_effect"),
        "nan": (('record_type = "intervention-parameters"\npartner = "acme"\nname = "x"\nversion = "1"\n'
                 'integration_point = "nic"\ndata_classes = ["io-buffers"]\n'
                 'encode_throughput = { value = nan, unit = "GB/s" }\n'), "encode_throughput.value"),
        "unknown-data-class": ({**GOOD, "data_classes": ["kv-cache", "tensors"]}, "data_classes[1]"),
        "oversized": ("# " + "x" * (1024 * 1024) + "\n", None),
        "not-a-partner-record": (json.loads(CHAIN.read_text()), "record_type"),
    }


@pytest.mark.parametrize("case", ["missing-unit", "wrong-dimension", "negative-ratio", "nan", "unknown-data-class",
                                  "oversized", "not-a-partner-record"])
def test_bad_input_exits_1_naming_file_and_field_and_writes_nothing(luma_home, tmp_path, case):
    run("partner", "add", str(CXL))
    run("kb", "ingest", str(CHAIN))
    before = state(luma_home)
    doc, field = _bad_cases()[case]
    bad = write(tmp_path, "bad.toml" if isinstance(doc, str) else "bad.json", doc)
    good = write(tmp_path, "good.json", GOOD)
    result = run("partner", "add", str(good), str(bad), ok=False)  # the good file first: still nothing written
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: {bad}: ")
    if field:
        assert f"{bad}: {field}: " in lines[0]
    else:
        assert "over the partner record limit of 1048576 bytes" in lines[0]
    assert state(luma_home) == before


def test_nothing_is_created_when_the_first_command_fails(luma_home, tmp_path):
    bad = write(tmp_path, "bad.json", {**GOOD, "power": {"value": 5}})
    assert run("partner", "add", str(bad), ok=False).exit_code == 1
    assert list(luma_home.iterdir()) == []
    listed = run("partner", "list", "--format", "json", ok=False)  # there is no project to list
    assert listed.exit_code == 1 and "no LUMA project at" in listed.stderr and listed.stdout == ""
    assert list(luma_home.iterdir()) == []  # reading creates nothing either


def test_kb_query_scope(luma_home):
    run("partner", "add", str(KV), str(CXL))
    run("kb", "ingest", str(CHAIN))
    q = "SELECT DISTINCT ?n WHERE { ?r luma:partnerName ?n } ORDER BY ?n"
    assert run("kb", "query", q, "--format", "csv").output.split() == ["n", "kvzip-labs", "memfabric"]
    assert run("kb", "query", q, "--format", "csv", "--scope", "owner").output.split() == ["n", "kvzip-labs", "memfabric"]
    assert run("kb", "query", q, "--format", "csv", "--scope", "partner:memfabric").output.split() == ["n", "memfabric"]
    answer = json.loads(run("kb", "query", "SELECT ?c WHERE { ?c a luma:BoundaryQualification }", "--format",
                            "json", "--scope", "partner:kvzip-labs").output)
    assert answer["results"]["bindings"]  # the public chain (an example, vendor-claim) is visible
    unknown = run("kb", "query", q, "--scope", "partner:nobody", ok=False)
    assert unknown.exit_code == 1 and "unknown partner 'nobody'" in unknown.output
    assert run("kb", "query", q, "--scope", "everyone", ok=False).exit_code == 2


STATE = "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=2,precision=fp16"


def test_partner_report_without_space_uses_the_shipped_space_that_prices_the_accelerator(luma_home, tmp_path):
    """The README marks --space optional: without it the first shipped LLM space pricing the
    state's accelerator supplies model, prices and quality — the same report as naming it."""
    args = ["report", "partner", str(KV), "--contract", "llm-long-context", "--state", STATE]
    plain = run(*args, "--out", str(tmp_path / "plain"))
    assert "the shipped space llm-70b supplies the model (llama-2-70b)" in plain.stderr
    named = run(*args, "--space", "llm-70b", "--out", str(tmp_path / "named"))
    for name in ("report.md", "matrix.json"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "named" / name).read_bytes()
    evaluated = json.loads(run("partner", "evaluate", str(KV), "--contract", "llm-long-context", "--state", STATE,
                               "--format", "json").stdout)
    assert evaluated["matrix"]["sha256"] == json.loads((tmp_path / "named" / "matrix.json").read_text())["sha256"]
    assert named.exit_code == 0


def test_partner_evaluation_without_space_names_what_to_give(luma_home):
    result = run("partner", "evaluate", str(KV), "--state", "accelerator_type=acme-x1,accelerator_count=2", ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: --space: no shipped space prices accelerator_type 'acme-x1'")
    assert len(result.stderr.strip().splitlines()) == 1


def test_partner_report_under_the_sprint_contract_decoder_kv_says_what_it_projects(luma_home, tmp_path):
    out = run("report", "partner", str(KV), "--contract", "decoder-kv", "--state",
              "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8", "--out", str(tmp_path / "r"))
    assert "matrix.json" in out.stdout
    report = (tmp_path / "r" / "report.md").read_text()
    assert "decoder-kv is a sprint contract (decoder-kv-capacity): its clauses and load are applied to llama-2-70b" \
        in report and "its own dimension (kv_cache) is not modelled" in report
    assert "kv_cache dimension is not modelled" in " ".join(run("report", "partner", "--help").stdout.split())


@pytest.mark.parametrize("contract, what", [("llamacpp-tinyllama-kv", "an engine behind an OpenAI-compatible endpoint"),
                                            ("minilm-memory", "the embedding service on this host")])
def test_a_sprint_contract_the_model_cannot_serve_is_refused_naming_the_ones_it_can(luma_home, tmp_path, contract, what):
    out = run("report", "partner", str(KV), "--contract", contract, "--state",
              "accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4", "--out", str(tmp_path / "r"), ok=False)
    assert out.exit_code == 2 and "Invalid value for --contract" in out.output
    assert what in out.output and "decoder-kv, llm-chat, llm-long-context" in out.output
    assert not (tmp_path / "r").exists()
