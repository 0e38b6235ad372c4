"""`luma machine characterize --quick`: sane, positive figures of this host. (How long it takes is a
figure for `luma machine characterize`, which prints it, not a test: issue 15 item 26.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # ~13 s of real measurement; tests/cli/test_machine_cli.py covers the command

from luma.experiments import characterize as ch  # noqa: E402
from luma.kb.records.loader import validate_document  # noqa: E402


@pytest.fixture(scope="module")
def measured():
    t = time.monotonic()
    doc = ch.characterize(quick=True, allow_contended=True)  # the figures are checked, whatever the neighbours do
    return doc, time.monotonic() - t


def test_quick_characterization_gives_a_valid_measured_record(measured):
    doc, _ = measured
    m = validate_document(doc, "characterize").model
    cpus = len(ch.usable_cpus())
    assert m.evidence_class == "measured" and m.architecture.kind == "cpu" and m.count == 1
    assert m.provenance.tool == ch.TOOL and m.provenance.environment.usable_cpus == cpus
    assert {c.cores for c in m.compute} == set(range(1, cpus + 1))
    for precision in ("fp32", "bf16", "int8"):
        for cores in range(1, cpus + 1):
            flops = m.compute_flops(precision, cores=cores)
            assert 1e7 < flops < 1e14, (precision, cores, flops)  # 10 MFLOP/s .. 100 TFLOP/s per CPU host
    assert m.compute_flops("fp32") == max(m.compute_flops("fp32", cores=k) for k in range(1, cpus + 1))
    bw = m.memory_bandwidth("host")
    assert 1e8 < bw < 1e13
    assert m.memory_bandwidth("host", cores=1) <= bw  # the device-wide figure is the best core count
    total = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines()
                     if ln.startswith("MemTotal:")).split()[1]) * 1024
    assert 0 < m.memory_capacity("host") <= total
    assert all(c.method for c in m.compute) and all(mem.method for mem in m.memory)


def test_unusable_core_counts_are_refused_before_measuring():
    with pytest.raises(ch.CharacterizeError, match="core counts must be from 1"):
        ch.characterize(quick=True, cores=[len(ch.usable_cpus()) + 1])


def test_usable_memory_never_exceeds_available():
    avail, how = ch.usable_memory_bytes()
    assert avail > 0 and how
    assert ch.last_level_cache_bytes() >= 1 << 20
    assert ch.default_name("AMD EPYC 9654 96-Core Processor", 2) == "amd-epyc-9654-96-core-processor-2c"


class _Busy:
    """A contention watch that saw a neighbour on the usable CPUs."""

    def __init__(self, cores, interval_s=0.5):
        pass

    def follow(self, pid):
        return self

    def stop(self, *args):
        return {"steal_pct": 1.0, "cotenant_pct": 45.0, "cotenant_cpu_s": 9.0}


def test_a_contended_host_is_refused_or_noted_never_silently_kept(monkeypatch):
    canned = {"record_type": "machine", "evidence_class": "measured", "name": "host-2c", "notes": []}
    monkeypatch.setattr(ch, "_characterize", lambda *a: dict(canned, notes=[]))
    monkeypatch.setattr(ch.contention, "Watch", _Busy)
    with pytest.raises(ch.CharacterizeError, match="host too contended to characterize .*other tenants used 45.0 %"):
        ch.characterize(quick=True)
    doc = ch.characterize(quick=True, allow_contended=True)
    assert doc["notes"][-1].startswith(ch.CONTENDED_NOTE)
