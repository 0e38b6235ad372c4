"""Finding machine records (kb/records/machine.py): a file, the project's ledger, or the vendor-claim
catalog shipped in `experiments/machines/` (read as package data).
"""

from __future__ import annotations

import difflib
import importlib.resources
import re
import tomllib
from pathlib import Path

from luma.errors import RecordError, UnknownName
from luma.kb.records.loader import read_documents, validate_document
from luma.kb.records.machine import MachineRecord
from luma.kb.store.ledger_read import payloads_of_kind


def catalog() -> dict[str, Path]:
    """The vendor-claim records shipped in `experiments/machines/`, by machine name (= file name)."""
    root = importlib.resources.files("luma.experiments.machines")
    return {p.name[:-5]: Path(str(p)) for p in root.iterdir() if p.name.endswith(".json")}


def alias_key(name: str) -> str:
    """A short name as the alias table spells it: lower case, runs of spaces/underscores as one '-'
    ("H100 SXM" -> "h100-sxm", "Gaudi 3" -> "gaudi-3")."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def aliases() -> dict[str, str]:
    """Short name (alias_key form) -> catalog machine name, from `experiments/machines/aliases.toml`
    (TOML so that `experiments/machines/*.json` stays the list of records)."""
    root = importlib.resources.files("luma.experiments.machines")
    return dict(tomllib.loads(root.joinpath("aliases.toml").read_text())["aliases"])


def read_machine(path: Path) -> MachineRecord:
    """The one machine record of a file (JSON or YAML); RecordError names the field at fault."""
    docs = list(read_documents(Path(path)))
    if len(docs) != 1:
        raise RecordError(f"holds {len(docs)} records; a machine file holds one", source=str(path))
    label, doc = docs[0]
    if isinstance(doc, dict) and doc.get("record_type") != "machine":
        raise RecordError(f"record_type must be 'machine', got {doc.get('record_type')!r}", source=str(path),
                          field="record_type")
    return validate_document(doc, str(path)).model


def stored_machines(project) -> list[tuple[str, MachineRecord]]:
    """(content hash, record) of every machine record in the ledger of `project` (Settings),
    oldest first. Reads nothing (and creates nothing) when the project has no ledger yet."""
    return [(h, MachineRecord.model_validate_json(payload)) for h, payload in payloads_of_kind(project, "machine")]


def load_machine(name_or_path: str | Path, project=None) -> MachineRecord:
    """A machine record from a file path, a machine in the ledger of `project` (Settings; the
    latest of that name), a shipped catalog entry, or a short name of one (`aliases()`, any case:
    "B200", "H100 SXM", "gaudi 3"). An unknown name is an UnknownName error listing the known names."""
    path = Path(name_or_path)
    if path.suffix.lower() in (".json", ".yaml", ".yml") and path.is_file():
        return read_machine(path)
    name = str(name_or_path)
    stored = {rec.name: rec for _, rec in stored_machines(project)} if project is not None else {}
    if name in stored:
        return stored[name]
    shipped = catalog()
    if name in shipped:
        return read_machine(shipped[name])
    # A short name ("B200", "H100 SXM") is tried only after exact names, so it never hides a record.
    target = aliases().get(alias_key(name)) or (alias_key(name) if alias_key(name) in shipped else None)
    if target is not None:
        return read_machine(shipped[target])
    known = sorted(set(shipped) | set(stored))
    short = aliases()
    by_alias = [short[a] for a in difflib.get_close_matches(alias_key(name), short, n=3, cutoff=0.6)]
    close = ([k for k in known if name.lower() in k][:3] or list(dict.fromkeys(by_alias))
             or difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5))
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownName(f"unknown machine {name!r}{hint} (known: {', '.join(known)})")
