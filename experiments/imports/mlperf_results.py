"""`luma import mlperf-results PATH`: published MLPerf Inference results as third-party evidence.

Reads a clone of an MLPerf Inference results repository (or the sample shipped in
`experiments/imports/published/mlperf/`): every system description becomes a machine record,
every VALID performance result a vendor-claim pex-trial record, PASS at the system's state
against the benchmark's latency bounds (experiments/imports/mlperf_records.py). INVALID results,
results without a system description, and benchmarks or scenarios LUMA does not read are
skipped and counted. Every record is validated before any is ingested: all or nothing.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import RecordError
from luma.experiments.imports import mlperf_benchmarks as bench
from luma.experiments.imports import mlperf_records as records
from luma.experiments.imports.mlperf_tree import read_summary, scan
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import LoadedRecord, validate_document

SCENARIOS = ("Server", "Offline")
_ROUND = re.compile(r"(v\d+\.\d+)")


def sample_path() -> Path:
    """The shipped sample: a few systems of MLPerf Inference v4.1, byte-identical (SOURCES.md)."""
    root = importlib.resources.files("luma.experiments.imports.published") / "mlperf" / "inference_results_v4.1"
    return Path(str(root))


@dataclass(frozen=True)
class ResultRow:
    """One imported result, as the CLI and the Design-In report list it."""

    round: str
    submitter: str
    system: str
    machine: str
    accelerator: str
    count: int
    benchmark: str
    scenario: str
    throughput: float
    unit: str
    path: str


@dataclass
class MlperfImport:
    """What a results tree yields: validated records, the rows they list, what was skipped."""

    root: Path
    round: str
    machines: list[LoadedRecord] = field(default_factory=list)
    trials: list[LoadedRecord] = field(default_factory=list)
    rows: list[ResultRow] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)

    @property
    def records(self) -> list[LoadedRecord]:
        return self.machines + self.trials

    def summary(self) -> str:
        """One line: how many systems and results, and why the others were skipped."""
        subs = len({r.model.provenance.source.citation.split(",")[0] for r in self.machines})
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        return (f"MLPerf Inference {self.round}: {len(self.machines)} systems of {subs} submitters -> machine records; "
                f"{len(self.trials)} valid results -> vendor-claim trials; skipped: {skipped}")


def round_of(root: Path, given: str | None) -> str:
    """The round: as given (v5.0), else from the clone's folder name (inference_results_v5.0)."""
    if given:
        if not re.fullmatch(r"v\d+\.\d+", given):
            raise RecordError(f"round must look like v5.0, got {given!r}", field="round")
        return given
    m = _ROUND.search(Path(root).resolve().name)
    if not m:
        raise RecordError(f"cannot tell the round from the folder name {Path(root).name!r}; give it (e.g. v5.0)",
                          source=str(root), field="round")
    return m.group(1)


def read_results(path: Path, round_: str | None = None,
                 progress: Callable[[int, int], None] | None = None) -> MlperfImport:
    """Read and validate every record a results tree yields (nothing is written)."""
    tree = scan(Path(path))
    out = MlperfImport(tree.root, round_of(tree.root, round_))
    systems = {}
    for system in tree.systems:
        rec = validate_document(records.machine_record(system, out.round), system.file.path)
        systems[(system.division, system.submitter, system.key)] = (system, rec)
        out.machines.append(rec)
    total = len(tree.summaries)
    for i, p in enumerate(tree.summaries):
        if progress:
            progress(i, total)
        s = read_summary(tree.root, p)
        found = systems.get((s.division, s.submitter, s.system))
        reason = ("no system description" if found is None else "invalid" if not s.valid
                  else "benchmark not read" if bench.benchmark(s.benchmark) is None
                  else f"{s.scenario} scenario not read" if s.scenario not in SCENARIOS else None)
        if reason:
            out.skipped[reason] += 1
            continue
        system, machine = found
        doc = records.trial_record(s, system, out.round, len(out.trials))
        out.trials.append(validate_document(doc, s.file.path))
        throughput = [c for c in doc["contract"]["clauses"] if c["metric"].endswith("throughput")][-1]
        out.rows.append(ResultRow(out.round, s.submitter, system.get("system_name"), machine.model.name,
                                  machine.model.architecture.name, doc["state"]["dimensions"].get(
                                      "accelerator_count", {}).get("value", 0),
                                  s.benchmark, s.scenario, throughput["value"], throughput["unit"], s.file.path))
    if progress:
        progress(total, total)
    return out


def ingest(settings, result: MlperfImport):
    """Add every record of `result` to the project's KB in one commit (all or nothing)."""
    with KnowledgeBase.open(settings) as kb:
        return kb.ingest_records(result.records, submitter=records.TOOL)


def write(result: MlperfImport, out: Path) -> Path:
    """The records as JSON Lines (for `luma kb ingest` later), written whole or not at all."""
    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text("".join(json.dumps(r.model.model_dump(mode="json", exclude_none=True)) + "\n"
                           for r in result.records))
    tmp.replace(out)
    return out
