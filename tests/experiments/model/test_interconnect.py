"""Interconnect figures in one convention (one link, one direction, a link count and topology),
tensor-parallel all-reduces that use it, and device capacities as the devices report them."""

from __future__ import annotations

import numpy as np
import pytest

from luma.errors import ConfigError, RecordError
from luma.experiments.model import hardware, llm, llm_config
from luma.kb.records.machine import MachineRecord
from luma.kb.records.machine_catalog import load_machine


def _link_terms(name: str, tp: float) -> dict:
    f = hardware.figures(load_machine(name), "fp16")
    return {"tp": tp, "link": f["interconnect"], "links": f["links"], "topology": f["topology"],
            "lat": f["link_latency"]}


def test_nvlink_and_infinity_fabric_are_stored_in_one_convention():
    h100, mi300x = load_machine("nvidia-h100-sxm5-80gb"), load_machine("amd-instinct-mi300x")
    # NVIDIA's "900 GB/s" sums 18 links and both directions; AMD's "128 GB/s" is one link, both ways.
    assert h100.link("NVLink").bandwidth.si == 25e9 and h100.link("NVLink").links == 18
    assert mi300x.link().bandwidth.si == 64e9 and mi300x.link().links == 7 and mi300x.link().topology == "mesh"
    assert h100.link("NVLink").device_bandwidth == 450e9  # what one GPU sends each way
    assert mi300x.link().device_bandwidth == 448e9
    for name in ("nvidia-a100-sxm4-80gb", "nvidia-h200-sxm-141gb", "nvidia-h100-sxm5-80gb", "amd-instinct-mi300x"):
        assert all(x.method for x in load_machine(name).interconnect)  # how it was read off the sheet


def test_large_tensor_parallel_all_reduce_is_comparable_on_nvlink_and_infinity_fabric():
    # At tp = 8 both use every link (NVSwitch; one direct link per peer): 450 vs 448 GB/s each
    # way. Read as stated (900 GB/s total vs one 128 GB/s link) MI300X came out ~7x slower.
    size = 64 * 2**20
    nv = llm.all_reduce(size=size, **_link_terms("nvidia-h100-sxm5-80gb", 8.0))
    amd = llm.all_reduce(size=size, **_link_terms("amd-instinct-mi300x", 8.0))
    assert nv == pytest.approx(2 * 7 / 8 * size / 450e9 + 2 * hardware.STEP_LATENCY_S, rel=1e-6)
    assert amd / nv == pytest.approx(450 / 448, rel=0.01)
    # At tp = 2 a mesh GPU reaches its one peer over one link; a switch still uses all 18.
    amd2 = llm.all_reduce(size=size, **_link_terms("amd-instinct-mi300x", 2.0))
    nv2 = llm.all_reduce(size=size, **_link_terms("nvidia-h100-sxm5-80gb", 2.0))
    assert amd2 == pytest.approx(size / 64e9, rel=0.01) and amd2 > 6 * nv2


@pytest.mark.parametrize("tp", [2.0, 4.0, 8.0])
def test_small_all_reduce_takes_single_digit_microseconds_on_nvlink(tp):
    # A decode step's all-reduce at batch 1 (8 KiB of fp16 activations): measured 3.7-5.9 us on
    # H100 NVLink at tp 2-8; 2(tp-1) x 5 us gave 70 us at tp = 8.
    t = llm.all_reduce(size=8192.0, **_link_terms("nvidia-h100-sxm5-80gb", tp))
    assert 1e-6 < t < 10e-6


def test_decode_step_pays_two_small_all_reduces_per_layer_not_a_ring_of_latencies():
    cfg = llm_config.PRESETS["llama-2-70b"]
    terms = _link_terms("nvidia-h100-sxm5-80gb", 8.0)
    s = {"weight_bytes": 2.0, "kv_bytes": 2.0, "flops": 989e12, "bandwidth": 3.35e12, "capacity": 85.5e9,
         "interconnect": terms["link"], "links": terms["links"], "topology": terms["topology"],
         "link_latency": terms["lat"], "power": 700.0, "count": 8.0, "tp": 8.0, "pp": 1.0, "concurrency": 1.0,
         "context": 128.0, "new_tokens": 16.0, "eff_compute": 1.0, "eff_bandwidth": 1.0, "eff_link": 1.0,
         "runtime_bytes": 0.0}
    per_all_reduce = llm.serve(cfg, s)["terms"]["tpot"]["interconnect"] / (2 * cfg.layers)
    assert per_all_reduce < 10e-6


def test_a_ring_pays_a_latency_per_hop():
    ring = llm.all_reduce(tp=8.0, size=8.0, link=25e9, links=2.0, topology=2.0, lat=2.5e-6)
    switch = llm.all_reduce(tp=8.0, size=8.0, link=25e9, links=2.0, topology=0.0, lat=2.5e-6)
    assert ring == pytest.approx(14 * 2.5e-6, rel=1e-3) and switch == pytest.approx(2 * 2.5e-6, rel=1e-3)
    assert llm.all_reduce(tp=1.0, size=1e9, link=25e9, links=2.0, topology=0.0, lat=2.5e-6) == 0


def test_a_space_file_declares_a_link_either_way():
    table = hardware.machine_from_spec("x", {"flops": {"fp16": "1 TFLOP/s"}, "memory": {"hbm": "1 GB"},
                                             "bandwidth": {"hbm": "1 TB/s"},
                                             "interconnect": {"bandwidth": "64 GB/s", "links": 7, "topology": "mesh"}},
                                       "machines.x")
    f = hardware.figures(table, "fp16")
    assert (f["interconnect"], f["links"], f["topology"]) == (64e9, 7.0, hardware.TOPOLOGY["mesh"])
    plain = hardware.figures(hardware.machine_from_spec(
        "y", {"flops": {"fp16": "1 TFLOP/s"}, "memory": {"hbm": "1 GB"}, "bandwidth": {"hbm": "1 TB/s"},
              "interconnect": "450 GB/s"}, "machines.y"), "fp16")
    assert (plain["interconnect"], plain["links"], plain["topology"]) == (450e9, 1.0, 0.0)
    with pytest.raises(ConfigError, match="unknown topology 'torus'"):
        hardware.machine_from_spec("z", {"flops": {"fp16": "1 TFLOP/s"}, "memory": {"hbm": "1 GB"},
                                         "bandwidth": {"hbm": "1 TB/s"},
                                         "interconnect": {"bandwidth": "1 GB/s", "topology": "torus"}}, "machines.z")


@pytest.mark.parametrize("bad, field", [({"links": 0}, "links"), ({"topology": "torus"}, "topology")])
def test_a_record_refuses_a_bad_link(bad, field):
    doc = {"record_type": "machine", "evidence_class": "measured", "name": "m",
           "architecture": {"name": "M", "kind": "gpu", "vendor": "V"}, "provenance": {"tool": "t"},
           "interconnect": [{"name": "l", "bandwidth": {"value": 1, "unit": "GB/s"}, **bad}]}
    from luma.kb.records.loader import validate_document

    with pytest.raises(RecordError) as info:
        validate_document(doc, "m.json")
    assert field in (info.value.field or "")
    assert MachineRecord.model_validate({**doc, "interconnect": [{"name": "l", "bandwidth": {"value": 1, "unit": "GB/s"}}]})


@pytest.mark.parametrize("name, mib", [("nvidia-h100-sxm5-80gb", 81_559), ("nvidia-h200-sxm-141gb", 143_771),
                                       ("nvidia-a100-sxm4-80gb", 81_920)])
def test_hbm_capacity_is_what_the_device_reports_not_the_marketing_size(name, mib):
    m = load_machine(name)
    assert m.memory_capacity("hbm") == mib * 2**20  # nvidia-smi's memory.total
    assert any("nvidia-smi" in n and "https://" in n for n in m.notes)  # the source is named


def test_mi300x_capacity_is_the_driver_figure():
    m = load_machine("amd-instinct-mi300x")
    assert m.memory_capacity("hbm") == 8 * 25_767_706_624
    assert np.isclose(m.memory_capacity("hbm") / 2**30, 192, atol=0.1)
