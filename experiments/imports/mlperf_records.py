"""An MLPerf system description as a machine record, a VALID performance result as a vendor-claim
pex-trial record: PASS at the machine's state against the benchmark's latency bounds, with the
figures the summary states as observations. Every record names its round, submitter and file.

None of this is measured: the results are published and audited by MLCommons, but LUMA did not
run them and holds no per-request samples, so the evidence class is vendor-claim.
"""

from __future__ import annotations

import hashlib
import re

from luma.errors import RecordError
from luma.experiments.imports import mlperf_benchmarks as bench
from luma.experiments.imports.mlperf_tree import FileRef, Summary, System
from luma.kb.records.machine_catalog import load_machine

TOOL = "luma import mlperf-results"
SOURCE_TOOL = "MLPerf Inference results"
REASON = "published, audited MLPerf result without per-request samples: vendor-claim, never measured"
_AMOUNT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?B)\b", re.I)


def amount(text: str, where: str, system: System) -> tuple[float, str] | None:
    """A memory size as the submitter wrote it ('180 GB', '1.5TiB', '2304GB'), None when absent."""
    if not text:
        return None
    m = _AMOUNT.match(text)
    if not m:
        raise RecordError(f"{where}: cannot read a memory size from {text!r}", source=system.file.path, field=where)
    u = m.group(2)
    return float(m.group(1)), u[0].upper() + ("iB" if u[1].lower() == "i" else "B")


def machine_name(system: System) -> str:
    """A slug for the system: submitter and system key, shortened with a hash past 64 characters."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", f"{system.submitter}-{system.key}".lower()).strip("-._")
    return slug if len(slug) <= 64 else slug[:55].rstrip("-._") + "-" + hashlib.sha256(slug.encode()).hexdigest()[:8]


def _catalogue(system: System):
    """(catalogue entry name, record) of the system's device, (None, None) when it has none."""
    accel = system.get("accelerator_model_name")
    name = bench.catalogue_name(accel) if accel else bench.catalogue_name(
        system.get("host_processor_model_name"), bench.CPU_CATALOGUE)
    return (name, load_machine(name)) if name else (None, None)


def architecture(system: System) -> dict:
    accel = system.get("accelerator_model_name")
    if accel and system.number("accelerators_per_node") > 0:
        v = bench.vendor(accel)
        return {"name": accel, "kind": "gpu" if v in ("NVIDIA", "AMD") else "accelerator", "vendor": v}
    cpu = system.get("host_processor_model_name") or "unknown CPU"
    return {"name": cpu, "kind": "cpu", "vendor": bench.vendor(cpu)}


def _import_source(round_: str, files: list[FileRef], citation: str, basis: list[str] = ()) -> dict:
    return {"tool": SOURCE_TOOL, "version": round_, "citation": citation[:256],
            "reason": "; ".join([REASON, *basis])[:256],
            "files": [{"name": f.name, "sha256": f.sha256, "bytes": f.bytes} for f in files]}


def source_url(round_: str, path: str) -> str:
    return f"https://github.com/mlcommons/inference_results_{round_}/blob/HEAD/{path}"


def machine_record(system: System, round_: str) -> dict:
    """The machine record of one system description."""
    accelerated = architecture(system)["kind"] != "cpu"
    count = system.number("accelerators_per_node") if accelerated else max(system.number("host_processors_per_node"), 1)
    cat_name, cat = _catalogue(system)
    by = f"catalogue {cat_name} (the device's datasheet, not the submitter's)"
    memory, compute, links, power = [], [], [], None
    if cat is not None:
        compute = [{**c.model_dump(mode="json", exclude_none=True), "method": f"{by}: {c.method or ''}".rstrip(": ")}
                   for c in cat.compute]
        if accelerated and count > 1:
            links = [{**x.model_dump(mode="json", exclude_none=True), "method": f"{by}: {x.method or ''}".rstrip(": ")}
                     for x in cat.interconnect]
        power = cat.power.model_dump(mode="json") if cat.power else None
    hbm = amount(system.get("accelerator_memory_capacity"), "accelerator_memory_capacity", system) if accelerated else None
    if hbm:
        fig = {"tier": "hbm", "capacity": {"value": hbm[0], "unit": hbm[1]},
               "method": f"system description: accelerator_memory_capacity {system.get('accelerator_memory_capacity')!r}"}
        if cat is not None and any(m.tier == "hbm" and m.bandwidth for m in cat.memory):
            bw = next(m.bandwidth for m in cat.memory if m.tier == "hbm" and m.bandwidth)
            fig["bandwidth"] = bw.model_dump(mode="json")
            fig["method"] += f"; bandwidth: {by}"
        memory.append(fig)
    host = amount(system.get("host_memory_capacity"), "host_memory_capacity", system)
    if host:
        memory.append({"tier": "host", "capacity": {"value": host[0], "unit": host[1]},
                       "method": f"per node, system description: host_memory_capacity {system.get('host_memory_capacity')!r}"})
    notes = [f"MLPerf Inference {round_}, {system.division} division, submitter {system.submitter}: "
             f"{system.get('system_name')} (status {system.get('status') or 'not stated'}, "
             f"{system.number('number_of_nodes', 1)} node(s)).",
             f"Host: {system.number('host_processors_per_node', 1)} x {system.get('host_processor_model_name') or '?'}"
             f" ({system.get('host_processor_core_count') or '?'} cores each); accelerator interconnect: "
             f"{system.get('accelerator_interconnect') or 'not stated'}; framework: {system.get('framework') or '?'}.",
             f"From {system.file.path} (sha256 {system.file.sha256}); " + REASON + "."]
    if cat is None:
        notes.append("No catalogue entry for this device: only the figures the system description states.")
    if not (memory or compute):
        raise RecordError("states no figure LUMA can read (accelerator or host memory)", source=system.file.path,
                          field="host_memory_capacity")
    rec = {"record_type": "machine", "evidence_class": "vendor-claim", "name": machine_name(system),
           "architecture": architecture(system), "count": max(count, 1),
           "source": {"title": f"MLPerf Inference {round_} results: {system.file.path}"[:256],
                      "url": source_url(round_, system.file.path)},
           "compute": compute, "memory": memory, "interconnect": links, "notes": notes,
           "provenance": {"tool": TOOL, "source": _import_source(
               round_, [system.file], f"{system.submitter}, {system.get('system_name')}, {system.file.path}")}}
    if power:
        rec["power"] = power
    return rec


def state(system: System) -> dict:
    """The machine state a result ran at: accelerator type, count and HBM (total), host memory,
    host processor, cores (CPU-only systems), nodes."""
    nodes = system.number("number_of_nodes", 1)
    dims = {"host_processor": {"value": system.get("host_processor_model_name") or "not stated"},
            "node_count": {"value": nodes, "unit": "dimensionless"}}
    arch = architecture(system)
    if arch["kind"] != "cpu":
        n = system.number("accelerators_per_node") * nodes
        cat_name, _ = _catalogue(system)
        dims["accelerator_type"] = {"value": cat_name or arch["name"]}
        dims["accelerator_count"] = {"value": n, "unit": "accelerator"}
        hbm = amount(system.get("accelerator_memory_capacity"), "accelerator_memory_capacity", system)
        if hbm:
            dims["hbm_capacity"] = {"value": round(hbm[0] * n, 6), "unit": hbm[1]}
    else:
        cores = system.number("host_processor_core_count") * max(system.number("host_processors_per_node"), 1)
        if cores:
            dims["compute"] = {"value": cores * nodes, "unit": "core"}
    host = amount(system.get("host_memory_capacity"), "host_memory_capacity", system)
    if host:
        dims["host_memory"] = {"value": round(host[0] * nodes, 6), "unit": host[1]}
    return {"dimensions": dims}


def _ms(ns: float) -> float:
    return round(ns / 1e6, 6)


def contract(s: Summary, b: bench.Benchmark, round_: str) -> tuple[dict, list[str]]:
    """The result's contract (its latency bounds, the throughput it states) and where each bound
    came from."""
    clauses, basis = [], []
    samples = s.number("Completed samples per second", "Samples per second")
    tokens = s.number("Completed tokens per second", "Tokens per second")
    if samples is None:
        raise RecordError("states no samples per second", source=s.file.path, field="Samples per second")
    if s.scenario == "Server":
        p = bench.SERVER_PERCENTILE
        if b.llm:
            for metric, key, ruled in (("ttft", "ttft_latency (ns)", b.server_bounds[0]),
                                       ("tpot", "tpot_latency (ns)", b.server_bounds[1])):
                ns = s.number(key)
                clauses.append({"metric": f"p{p}_{metric}", "op": "<=", "value": _ms(ns) if ns else ruled * 1e3,
                                "unit": "ms"})
                basis.append(f"{metric} bound: {'summary ' + key.split()[0] if ns else 'rules table'}")
        else:
            ns = s.number("target_latency (ns)")
            if not ns and not b.server_bounds:
                raise RecordError("states no target_latency and the rules table has none", source=s.file.path,
                                  field="target_latency (ns)")
            clauses.append({"metric": f"p{p}_latency", "op": "<=", "value": _ms(ns) if ns else b.server_bounds[0] * 1e3,
                            "unit": "ms"})
            basis.append("latency bound: " + ("summary target_latency" if ns else "rules table"))
        basis.append(f"p{p}: loadgen mlperf.conf")
    clauses.append({"metric": "throughput", "op": ">=", "value": samples, "unit": "request/s"})
    if tokens is not None:
        clauses.append({"metric": "token_throughput", "op": ">=", "value": tokens, "unit": "token/s"})
    name = f"mlperf-{round_}-{s.benchmark}-{s.scenario.lower()}"
    return {"name": name, "clauses": clauses}, basis


_PCT = re.compile(r"^(\d+(?:\.\d+)?) percentile (latency|first token latency|time to output token) \(ns\)$")
_PHASE = {"latency": "latency", "first token latency": "ttft", "time to output token": "tpot"}


def observations(s: Summary) -> list[dict]:
    """The figures the summary states: throughput (samples are requests: one sample a query) and
    tokens per second, and its latency percentiles in ns."""
    obs = [{"metric": "throughput", "value": s.number("Completed samples per second", "Samples per second"),
            "unit": "request/s"}]
    tokens = s.number("Completed tokens per second", "Tokens per second")
    if tokens is not None:
        obs.append({"metric": "token_throughput", "value": tokens, "unit": "token/s"})
    for key, text in s.values.items():
        m = _PCT.match(key)
        if m and s.scenario == "Server":  # Offline's latencies are the whole batch's: not a service figure
            pct = m.group(1).rstrip("0").rstrip(".")
            obs.append({"metric": f"p{pct}_{_PHASE[m.group(2)]}", "value": int(float(text)), "unit": "ns"})
    return obs


def trial_record(s: Summary, system: System, round_: str, sequence: int) -> dict:
    """The vendor-claim PASS-at-state trial of one VALID result."""
    b = bench.benchmark(s.benchmark)
    if b is None:
        raise RecordError(f"unknown benchmark {s.benchmark!r} (known: {', '.join(bench.BENCHMARKS)})",
                          source=s.file.path)
    c, basis = contract(s, b, round_)
    citation = f"{s.submitter}, {system.get('system_name')}, {s.benchmark}, {s.scenario}, {s.file.path}"
    return {"record_type": "pex-trial", "evidence_class": "vendor-claim", "sprint": f"mlperf-{round_}",
            "sequence": sequence, "phase": "boundary",
            "workload": {"name": s.benchmark, "model": b.model, "task": b.task},
            "architecture": architecture(system), "contract": c, "state": state(system),
            "variant": (system.get("framework") or "as submitted")[:256], "verdict": "PASS",
            "observations": observations(s),
            "provenance": {"tool": TOOL, "source": _import_source(round_, [system.file, s.file], citation, basis)}}
