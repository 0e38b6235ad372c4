"""Growing the set: a sprint's outcome in one phrase, contention over an interval, a machine entry
written (and appended to only from the key that signed it)."""

from __future__ import annotations

import pytest

from luma.errors import ConfigError
from luma.experiments.evidence import manifest, recording
from luma.kb.trust import attestation as att


def test_outcome_says_boundary_recovery_or_why_none():
    base = {"dimension": "host_memory", "min_pass": "8 MiB", "adjacent_fail": "6 MiB", "binding": "host_memory",
            "intervention": "int8-weights", "requalified_min_pass": "6 MiB"}
    assert recording.outcome({**base, "recovered": True}) == (
        "qualified boundary: host_memory min PASS 8 MiB, adjacent FAIL 6 MiB, binding host_memory; recovered by "
        "int8-weights (min PASS 6 MiB)")
    assert recording.outcome({**base, "recovered": False}) == (
        "not recovered: boundary host_memory min PASS 8 MiB, adjacent FAIL 6 MiB, binding host_memory; int8-weights "
        "did not recover PASS")
    assert "passes already at its lowest level (8 MiB)" in recording.outcome({**base, "adjacent_fail": None})
    assert recording.outcome({**base, "min_pass": None, "problems": ["every level failed"]}) == (
        "no boundary: every level failed")
    assert recording.outcome({**base, "min_pass": None}) == "no boundary: no level passed"


def test_contention_is_the_share_of_ticks_over_the_interval():
    before = {"load": [1.0, 1.0, 1.0], "ticks": [100, 0, 50, 800, 0, 0, 0, 50]}
    after = {"load": [2.0, 1.5, 1.2], "ticks": [400, 0, 100, 850, 0, 0, 0, 150]}  # 500 ticks: 100 stolen, 50 idle
    c = manifest.contention_between(before, after)
    assert c == {"load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 1.5, 1.2], "steal_pct": 20.0, "busy_pct": 90.0}
    assert manifest.contention_between({"load": None, "ticks": None}, after)["steal_pct"] is None
    now = manifest.contention()
    assert len(now["ticks"]) == 8 and len(now["load"]) == 3


def test_a_machine_entry_is_written_and_appended_to_only_with_its_key(project, tmp_path):
    out, key = tmp_path / "set", att.generate()
    pub = att.public_bytes(key)
    machine = manifest.describe_machine("test-box", att.fingerprint(pub))
    skipped = recording.ContractRun("vllm-qwen-hbm", None, None, None, "not run: needs an NVIDIA GPU")
    recording.export_machine(project, out, machine, [skipped], pub)
    data = manifest.read(out)
    assert data["machines"][0]["contracts"][0]["outcome"] == "not run: needs an NVIDIA GPU"
    assert (out / "keys" / "test-box.pub").read_text().strip() == att.public_key_text(pub)
    other = att.public_bytes(att.generate())
    with pytest.raises(ConfigError, match="append from the project that holds its key"):
        recording.export_machine(project, out, manifest.describe_machine("test-box", att.fingerprint(other)),
                                 [skipped], other, append=True)
    assert manifest.machine_id().count("-") >= 2
