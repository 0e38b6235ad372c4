"""Contract thresholds relative to the host: a clause may state its value for a reference host
and scale it by this host's own calibration (`luma machine characterize`: matmul throughput per
precision or memory bandwidth, on a number of cores) times a stated margin, so that a contract
written on one machine means the same on a faster or slower one.

    [[clauses]]
    metric = "p95_latency"
    op = "<="
    value = 150                   # on the reference host
    unit = "ms"
    [clauses.relative]
    figure = "fp32"               # fp32 | bf16 | int8 (matmul GFLOP/s) | bandwidth (GB/s)
    cores = 1
    reference = 41.3              # the figure on the reference host
    reference_host = "..."        # which host, and where its figure comes from
    margin = 1.0

resolved = value × (reference / host) × margin for an upper bound (a time), value × (host /
reference) / margin for a lower bound (a throughput). The figure is this host's newest measured
machine record under `$LUMA_HOME/machines/` (what `luma machine characterize` writes), never
measured on the fly: a calibration taken beside a busy neighbour would loosen the threshold, so
`luma machine characterize` refuses to record a contended host. The resolved absolute threshold is
what every trial record carries (its contract block), with the basis in `Contract.resolution`.
"""

from __future__ import annotations

import json
from pathlib import Path

from luma.errors import ContractError
from luma.experiments.characterize import CONTENDED_NOTE
from luma.experiments.host import cpu, default_name

#: What a relative clause may scale by: the machine record's compute precisions and bandwidth.
FIGURES = ("fp32", "bf16", "int8", "bandwidth")


def host_name() -> str:
    """The name `luma machine characterize` gives this host's record (CPU model and usable CPUs)."""
    info = cpu()
    return default_name(info["cpu_model"] or "unknown CPU", info["usable_cpus"] or info["logical_cpus"] or 1)


def host_figure(home: Path, figure: str, cores: int) -> tuple[float, str]:
    """This host's `figure` on `cores` cores (GFLOP/s or GB/s) from its newest characterization in
    the project, and the file it came from; ContractError naming the command when there is none."""
    name = host_name()
    folder = Path(home) / "machines"
    found = sorted(folder.glob(f"*-{name}.json")) if folder.is_dir() else []
    for path in reversed(found):  # newest first: the files are named by their UTC time stamp
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("name") != name or doc.get("evidence_class") != "measured":
            continue
        if any(str(n).startswith(CONTENDED_NOTE) for n in doc.get("notes", [])):
            continue  # measured beside a neighbour: its low figures would loosen the threshold
        if figure == "bandwidth":
            rows = [m["bandwidth"] for m in doc.get("memory", []) if m.get("cores") == cores and m.get("bandwidth")]
        else:
            rows = [c["throughput"] for c in doc.get("compute", []) if c.get("precision") == figure
                    and c.get("cores") == cores and c.get("throughput")]
        if rows:
            return float(rows[0]["value"]), str(path)
    raise ContractError(f"a clause's threshold is relative to this host's {describe(figure, cores)}, and the project "
                        f"has no calibration of this host ({name}): run `luma machine characterize` on a quiet "
                        "host first (about a minute; its quick mode about 15 s)", field="clauses.relative")


def describe(figure: str, cores: int) -> str:
    what = "memory bandwidth" if figure == "bandwidth" else f"{figure} matmul throughput"
    return f"{what} on {cores} core{'s' * (cores != 1)}"


def scaled(value: float, op: str, reference: float, host: float, margin: float) -> float:
    """The clause's value on this host (see the module's docstring)."""
    if op in ("<=", "<"):
        return value * (reference / host) * margin
    return value * (host / reference) / margin


def resolve(contract, home: Path):
    """`contract` with every relative clause's value resolved on this host (a copy; the contract
    itself when none is relative). `resolution` on the copy lists each clause's basis."""
    if not any(getattr(c, "relative", None) for c in contract.clauses):
        return contract
    clauses, basis = [], []
    for c in contract.clauses:
        rel = getattr(c, "relative", None)
        if rel is None:
            clauses.append(c)
            continue
        host, source = host_figure(home, rel.figure, rel.cores)
        value = scaled(c.value, c.op, rel.reference, host, rel.margin)
        clauses.append(c.model_copy(update={"value": float(f"{value:.4g}"), "relative": None}))
        basis.append({"metric": c.metric, "op": c.op, "stated": c.value, "unit": c.unit,
                      "resolved": float(f"{value:.4g}"), "figure": describe(rel.figure, rel.cores),
                      "reference": rel.reference, "reference_host": rel.reference_host, "host": host,
                      "margin": rel.margin, "calibration": source})
    return contract.model_copy(update={"clauses": clauses, "resolution": basis})
