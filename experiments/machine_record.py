"""This host as a measured machine record, as a use case (`luma machine characterize` calls it):
characterize it (experiments/characterize.py), sign the record with the project's runner key,
validate it, and write and ingest it under $LUMA_HOME/machines/."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from luma import names
from luma.experiments import characterize as host_characterization
from luma.experiments.characterize import TOOL
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.loader import validate_document
from luma.kb.operations.runner_keys import project_signer


@dataclass
class MachineRecord:
    """The validated machine record, its JSON text, and where it was recorded (None: not ingested)."""

    record: object
    text: str
    recorded: str | None = None


def characterize_host(settings, quick: bool = False, cores: list[int] | None = None, name: str | None = None,
                      ingest: bool = True, out: Path | None = None, progress=None,
                      allow_contended: bool = False) -> MachineRecord:
    """Measure this host, sign the record (a key is made only for a record that goes into the
    project; without `ingest` one the project has signs it), validate it, write it to `out` when
    given, and with `ingest` record it in the ledger and KB."""
    doc = host_characterization.characterize(quick=quick, cores=cores, name=name, progress=progress,
                                             allow_contended=allow_contended)
    signer = project_signer(settings, create=ingest)
    if signer is not None:
        doc = signer.sign(doc, "luma machine characterize")
    rec = validate_document(doc, "luma machine characterize").model
    text = json.dumps(doc, indent=1) + "\n"
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return MachineRecord(rec, text, _ingest(settings, rec.name, text) if ingest else None)


def _ingest(settings, name: str, text: str) -> str:
    """Write the record under $LUMA_HOME/machines/ and ingest it; return the file's path."""
    folder = settings.home / "machines"
    # The record's name is a checked slug; the path is checked too, as every path built from a name.
    path = names.child(settings.home, folder, f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{name}.json",
                       field="name")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with KnowledgeBase.open(settings) as kb:
        kb.ingest([path], submitter=TOOL)
    return str(path)
