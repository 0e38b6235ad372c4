"""The use case behind `luma import FORMAT FILE…`: read every file, judge every run at the stated
state, then write all records at once -- ingested (`KnowledgeBase.ingest_records`, all or nothing)
or written to a file for review. Nothing is written on any refusal: every file is read and every
record validated before the first byte goes anywhere."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from luma.errors import ConfigError, RecordError
from luma.experiments.imports import checks, detect
from luma.experiments.imports.formats import FORMATS
from luma.experiments.imports.run import ToolRun
from luma.experiments.imports.trials import TOOL, Judged, Target, check_contract, judge, load_mismatch
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.operations.runner_keys import project_signer
from luma.kb.records.loader import validate_document
from luma.kb.store.ledger_read import payloads_of_kind
from luma.kb.trust.runners import signer


@dataclass
class ImportResult:
    """What an import did: one row per trial (evidence class, verdict, the tool's figures beside
    LUMA's), the sprint it was filed under, and where the records went."""

    sprint: str
    trials: list[Judged] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    ingested: int = 0
    written: Path | None = None
    warnings: list[str] = field(default_factory=list)

    def rows(self) -> list[dict]:
        out = []
        for j in self.trials:
            r = j.record
            row = {"file": j.run.label, "tool": j.run.tool, "version": j.run.version, "sequence": r["sequence"],
                   "evidence_class": j.evidence_class, "verdict": j.verdict, "failure_cause": r.get("failure_cause"),
                   "completed": j.run.completed, "failed": j.run.failed, "reason": j.reason}
            for c in j.rows:
                kind = c["metric"].split("_", 1)[-1]
                name = c["metric"].split("_", 1)[0]
                row[f"luma_{c['metric']}"] = c.get("value")
                if "ci_low" in c:
                    row[f"luma_{c['metric']}_ci"] = [c["ci_low"], c["ci_high"]]
                    row[f"luma_{c['metric']}_samples"] = c.get("samples")
                fig = (j.run.printed.get(f"{kind}_ms") or {}).get(name)
                if fig is not None:
                    row[f"tool_{c['metric']}"] = fig / 1000
            out.append(row)
        return out


def read_runs(fmt: str, paths: list[Path], settings=None, tool_version: str | None = None,
              progress: Callable[[Path], None] | None = None) -> list[ToolRun]:
    """Every run of every file (one-line RecordError naming file and field on the first mistake)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})", field="FORMAT")
    runs = []
    for path in paths:
        data, source = checks.read(path, settings)
        why = detect.mismatch(data, fmt) if not _companion(path, fmt) else None
        if why:
            raise RecordError(why, source=Path(path).name)
        got = FORMATS[fmt].read(Path(path), data, source, lambda p: checks.read(p, settings))
        for run in got:
            if run.version is None and tool_version:
                run.version, run.version_reason = tool_version, None
            elif run.version is None and run.version_reason is None:
                run.version_reason = f"the {fmt} file records no tool version and --tool-version was not given"
        runs += got
        if progress:
            progress(path)
    return runs


def _companion(path: Path, fmt: str) -> bool:
    """Files a format names by role, whose structure the sniffing does not cover (AIPerf's and
    GenAI-Perf's summaries given instead of the records)."""
    return fmt == "aiperf" and Path(path).name.endswith(("_aiperf.json", "profile_export.json"))


def default_sprint(runs: list[ToolRun]) -> str:
    """`import-<12 hex>`: from the files' hashes, so the same files file under the same sprint."""
    h = hashlib.sha256("".join(f.sha256 for r in runs for f in r.files).encode()).hexdigest()
    return f"import-{h[:12]}"


def next_sequence(settings, sprint: str) -> int:
    """One past the highest sequence of the sprint's trials already in the ledger."""
    docs = (json.loads(payload) for _, payload in payloads_of_kind(settings, "pex-trial"))
    seqs = [d.get("sequence", -1) for d in docs if d.get("sprint") == sprint]
    return max(seqs, default=-1) + 1


def import_files(settings, fmt: str, paths: list[Path], target: Target, *, key: str | None = None,
                 sprint: str | None = None, tool_version: str | None = None, ingest: bool = True,
                 out: Path | None = None, progress: Callable[[Path], None] | None = None) -> ImportResult:
    """Read, judge, sign (measured only) and ingest or write the trials of `paths`, all or nothing."""
    check_contract(target.contract, "contract")
    if not ingest and out is None:
        raise ConfigError("records not ingested need a file to go to", field="out")
    runs = read_runs(fmt, paths, settings, tool_version, progress)
    for run in runs:
        why = load_mismatch(run, target.contract)
        if why:
            raise RecordError(why, source=run.label, field="load")
    result = ImportResult(sprint or default_sprint(runs))
    start = next_sequence(settings, result.sprint) if ingest else 0
    for i, run in enumerate(runs):
        if run.concurrency is None:
            result.warnings.append(f"{run.label}: the file does not record its concurrency: judged at the "
                                   f"contract's {target.contract.load.concurrency}, as stated")
        result.trials.append(judge(run, target, result.sprint, start + i))
    signer = _signer(settings, key, ingest) if any(j.evidence_class == "measured" for j in result.trials) else None
    loaded = []
    for j in result.trials:
        label = f"{j.run.label}: pex-trial"
        rec = validate_document(j.record, label, settings.home)
        if j.evidence_class == "measured" and signer is not None:
            rec = signer.attest(rec)
            j.record = {**j.record, "attestation": rec.model.attestation.model_dump(mode="json")}
        elif j.evidence_class == "measured":
            result.warnings.append(f"{j.run.label}: no runner key here: written unsigned (`luma runner sign`)")
        loaded.append(replace(rec, source=str(Path(j.run.files[0].path).name)))
        result.records.append(j.record)
    if out is not None:
        Path(out).write_text("".join(json.dumps(r, default=str) + "\n" for r in result.records))
        result.written = Path(out)
    if ingest:
        with KnowledgeBase.open(settings) as kb:
            report = kb.ingest_records(loaded, submitter=TOOL)
        result.ingested = len(report.added)
    return result


def _signer(settings, key: str | None, create: bool):
    """The runner key that signs the measured records: `key` of $LUMA_HOME/keys/, else the
    project's signing key (made on first use when the records are ingested, as a sprint does)."""
    return signer(settings.home, key) if key else project_signer(settings, create=create)
