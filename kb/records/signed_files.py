"""`luma runner sign`: signed copies of record files (JSON, JSON Lines, YAML).

Each file is read as untrusted (kb/records/input_files.py) by the record loader, every record validated
and its content hash computed exactly as ingest computes it; only when every record of every
file is valid is anything written: in place (a new file moved over the old one) or into a
folder. A record keeps its fields as written, with an `attestation` block added (or replaced);
a file of one record holds it as an object, of several as a list (JSON Lines: one per line).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


from luma.errors import RecordError
from luma.kb.records import yaml_core
from luma.kb.records.loader import read_documents

#: Formats a signed copy can be written in (TOML has no writer in the standard library).
SIGNABLE = (".json", ".jsonl", ".ndjson", ".yaml", ".yml")


def sign_files(paths: list[Path], signer, out: Path | None = None) -> list[tuple[Path, int]]:
    """Sign every record of `paths` with `signer` (kb/runners.Signer); return (written path,
    records) per file. RecordError naming the file and field at the first problem, nothing written."""
    plans = []
    targets: dict[Path, Path] = {}
    for path in map(Path, paths):
        if path.suffix.lower() not in SIGNABLE:
            raise RecordError("can only sign .json, .jsonl, .yaml or .yml files", source=str(path))
        target = (out / path.name) if out is not None else path
        if target in targets:
            raise RecordError(f"two files would be written to {target} (sign them into different folders)",
                              source=str(path))
        targets[target] = path
        docs = []
        for label, doc in read_documents(path):
            if hasattr(doc, "parse"):  # a JSON Lines record comes unparsed
                doc = doc.parse()
            source = f"{path}: {label}" if label else str(path)
            if not isinstance(doc, dict):
                raise RecordError(f"a record must be an object, got {type(doc).__name__}", source=source)
            docs.append(signer.sign(doc, source))
        plans.append((path, target, docs))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for path, target, docs in plans:
        _replace(target, _render(path, docs))
    return [(target, len(docs)) for _, target, docs in plans]


def _render(path: Path, docs: list[dict]) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
    data = docs[0] if len(docs) == 1 else docs  # one record as an object, several as a list
    if suffix == ".json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml_core.dump(data)


def _replace(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)  # readers see the old file or the new one, never half of it
