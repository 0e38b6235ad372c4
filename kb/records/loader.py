"""Reading record files (JSON, JSON Lines, YAML, TOML) into validated, typed records.

Errors name the file, the record's position in it and the field, e.g.
`runs/a.json: record 3: pass_state.dimensions.hbm_capacity.unit: 'GHz' does not fit ...`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from luma.errors import RecordError
from luma.kb.records import units
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.input_files import RECORD_FILE, Limit, read_text
from luma.kb.records.documents import parse_json, parse_toml, parse_yaml
from luma.kb.records.kinds import BY_NAME, COMMAND_ONLY, FILE_KINDS

#: record_type -> model class of the kinds a record file may hold (from luma.kb.records.kinds).


def record_types() -> dict[str, type[BaseModel]]:
    """The model class of every kind a record file may hold. Each class is imported when first
    asked for (kinds.py), so a command that reads one kind does not build every record model."""
    return {name: BY_NAME[name].model_class() for name in FILE_KINDS}

#: What the content hash leaves out: the signature is over the hash, so it cannot be part of it.
UNHASHED = {"attestation"}


@dataclass(frozen=True)
class LoadedRecord:
    """A validated record with its canonical form and identity. `canonical` (what the content
    hash covers) leaves a runner's attestation out; `payload`, what the ledger keeps, has it."""

    kind: str
    model: BaseModel
    canonical: str
    content_hash: str
    source: str
    attested: str | None = None  # the canonical JSON with the attestation, when there is one

    @property
    def evidence_class(self) -> str:
        return self.model.evidence_class

    @property
    def payload(self) -> str:
        """The ledger payload: the canonical JSON, plus the attestation when the record carries one
        (so a rebuild, or a revocation later, can check the signature again)."""
        return self.attested or self.canonical

    def with_attestation(self, attestation) -> "LoadedRecord":
        """This record with `attestation` (a runner's signature over its content hash) in its
        model: what validating the signed document gives, without validating it again (the hash
        leaves the attestation out, so it stays; the ledger payload gains the block)."""
        model = self.model.model_copy(update={"attestation": attestation})
        return replace(self, model=model, attested=model.model_dump_json(exclude_none=True))


def read_documents(path: Path, limit: Limit = RECORD_FILE,
                   counted: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    """Yield (label, document) for each record in a JSON / JSONL / YAML / TOML file of at most
    `limit` bytes (a JSON Lines record comes unparsed, as a `_Line`: `iter_records` validates it
    straight from its text). `counted(n)`: told how many records the file holds once it is read,
    before the first is yielded."""
    name = str(path)
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise RecordError("unsupported file type (use .json, .jsonl, .yaml, .yml or .toml)", source=name)
    text = read_text(path, limit)
    if not text.strip():
        raise RecordError("file is empty: it holds no record", source=name)
    if suffix in (".jsonl", ".ndjson"):
        # "\n" only: str.splitlines would also split inside a string holding U+2028 or U+0085.
        # The non-blank lines, numbered, found once (the count and the records both need them).
        numbered = [(lineno, line) for lineno, line in enumerate(text.split("\n"), 1) if line.strip()]
        if counted is not None:
            counted(len(numbered))
        for lineno, line in numbered:
            # Parsed lazily, as iter_records reaches it: a bulk file is never all dicts at once.
            yield f"line {lineno}", _Line(line, name, lineno)
        return
    if suffix in (".yaml", ".yml"):
        docs = [d for d in parse_yaml(text, name) if d is not None]
    elif suffix == ".json":
        docs = [parse_json(text, name)]
    else:
        docs = [_toml(text, name)]
    flat = [item for doc in docs for item in (doc if isinstance(doc, list) else [doc])]
    if not flat:
        raise RecordError("file holds no record", source=name)
    many = len(flat) > 1
    if counted is not None:
        counted(len(flat))
    for i, doc in enumerate(flat, 1):
        yield (f"record {i}" if many else ""), doc


_SUFFIXES = (".json", ".jsonl", ".ndjson", ".yaml", ".yml", ".toml")


def _toml(text: str, name: str) -> Any:
    """One record per TOML file, or several as a `[[records]]` array of tables (when that is the
    file's only key)."""
    data = parse_toml(text, name)
    if set(data) == {"records"} and isinstance(data["records"], list):
        return data["records"]
    return data


def validate_document(doc: Any, source: str, home: Path | None = None, dims: dict | None = None) -> LoadedRecord:
    """Validate one parsed document; raise RecordError naming the field at fault."""
    if isinstance(doc, _Line):
        doc = doc.parse()
    if not isinstance(doc, dict):
        raise RecordError(f"a record must be an object, got {type(doc).__name__}", source=source)
    kind = doc.get("record_type")
    if kind is None:
        raise RecordError("record_type is missing (known: " + ", ".join(sorted(FILE_KINDS)) + ")", source=source, field="record_type")
    if not isinstance(kind, str) or kind not in FILE_KINDS:
        raise RecordError(
            f"unknown record_type {kind!r} (known: {', '.join(sorted(FILE_KINDS))})",
            source=source,
            field="record_type",
        )
    model_cls = BY_NAME[kind].model_class()
    context = {"dimensions": dims if dims is not None else record_dimensions(home), "home": home}
    try:
        model = model_cls.model_validate(doc, context=context)
    except ValidationError as exc:
        raise RecordError.of([RecordError(message, source=source, field=field)
                              for field, message in all_errors(exc)], source) from None
    return _loaded(kind, model, source)


def _loaded(kind: str, model: BaseModel, source: str) -> LoadedRecord:
    # The canonical form is the model's JSON: fields in declaration order, dimension maps sorted
    # by key (the model sorts them), no nulls. A test pins the hash of the example record.
    canonical = model.model_dump_json(exclude_none=True, exclude=UNHASHED)
    return LoadedRecord(kind, model, canonical, hashlib.sha256(canonical.encode()).hexdigest(), source,
                        _with_attestation(model, canonical))


def _with_attestation(model: BaseModel, canonical: str) -> str | None:
    """The canonical JSON with the record's attestation, None without one. Where the model
    declares `attestation` last (every signed kind does), it is the canonical JSON with that one
    field appended: the second serialisation of the whole record cost ~30 us of each record's
    ~1.2 ms ingest."""
    block = getattr(model, "attestation", None)
    if block is None:
        return None
    if next(reversed(type(model).model_fields)) == "attestation" and canonical != "{}":
        return f'{canonical[:-1]},"attestation":{block.model_dump_json(exclude_none=True)}}}'
    return model.model_dump_json(exclude_none=True)


class _Line:
    """One line of a JSON Lines file, not yet parsed."""

    __slots__ = ("text", "name", "lineno")

    def __init__(self, text: str, name: str, lineno: int):
        self.text, self.name, self.lineno = text, name, lineno

    def parse(self) -> Any:
        return parse_json(self.text, self.name, self.lineno)


def _validate_line(line: _Line, source: str, home: Path | None, dims: dict) -> LoadedRecord:
    """A JSON Lines record: validated straight from its text by pydantic's JSON mode (the bulk
    path). Anything that fails there takes the general path, which words the error exactly as
    for the other formats."""
    # Parsed first all the same: pydantic keeps the last of two equal keys silently, and nests
    # 200 levels deep. The parse costs about a third of the validation.
    doc = line.parse()
    if _PEX_MARK in line.text:
        try:
            model = BY_NAME["pex-chain"].model_class().model_validate_json(line.text, context={"dimensions": dims, "home": home})
        except ValidationError:
            pass
        else:
            return _loaded("pex-chain", model, source)
    return validate_document(doc, source, home, dims)


_PEX_MARK = '"pex-chain"'


def first_error(exc: ValidationError) -> tuple[str | None, str]:
    """(field path, message) of a validation error's first problem, as LUMA words it: the field
    at fault in `a.b[2].c` form (a model-level check's own field folded in), without pydantic's
    union tags and prefixes."""
    errors = exc.errors(include_url=False)
    loc = _format_loc(errors[0]["loc"])
    return _worded([e for e in errors if _format_loc(e["loc"]) == loc], loc)


def all_errors(exc: ValidationError) -> list[tuple[str | None, str]]:
    """(field path, message) of every problem of a validation error, one per field, in order
    (worded as `first_error` words the first)."""
    by_loc: dict[str | None, list[dict]] = {}
    for e in exc.errors(include_url=False):
        by_loc.setdefault(_format_loc(e["loc"]), []).append(e)
    return [_worded(same, loc) for loc, same in by_loc.items()]


def _worded(same: list[dict], loc: str | None) -> tuple[str | None, str]:
    """One field's problem from its errors (`same`: every error at `loc`)."""
    # A union (number | text) reports one error per branch; the type mismatches say least.
    err = next((e for e in same if "should be a valid" not in e["msg"]), same[0])
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, units.UnitProblem):
        msg = str(ctx_err)
    # Model-level validators name the field themselves ("pass_state.dimensions.x: ...").
    if ": " in msg and not msg.startswith(("Input", "unknown unit")):
        head, rest = msg.split(": ", 1)
        if " " not in head:
            loc = f"{loc}.{head}" if loc else head
            msg = rest
    return loc, msg


_INTERNAL_TAGS = {"int", "float", "str", "bool", "list", "dict", "none"}


def _format_loc(parts: tuple) -> str | None:
    """`('contract', 'clauses', 1, 'unit')` -> `contract.clauses[1].unit`, without pydantic's union tags."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or "(" in part or part.startswith("constrained-") or part in _INTERNAL_TAGS:
            continue
        else:
            out += f".{part}" if out else part
    return out or None


class RecordsLeft:
    """How many records an `iter_records` has yet to yield: None until its last file is read
    (earlier files say nothing of the later ones), then exact. Ingest sizes its last chunks by it."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count: int | None = None


def iter_records(paths: list[Path], home: Path | None = None, limit: Limit = RECORD_FILE,
                 left: RecordsLeft | None = None) -> Iterator[LoadedRecord]:
    """Read and validate the records of every file (each within `limit`), one at a time
    (RecordError at the first problem). Runner trust and revocation records are refused: only
    `luma runner` writes them. `left`: kept up to date with the records still to come."""
    dims = record_dimensions(home)

    def counted(n: int) -> None:
        left.count = n

    for i, path in enumerate(paths):
        last = left is not None and i == len(paths) - 1
        for label, doc in read_documents(Path(path), limit, counted if last else None):
            if last:
                left.count -= 1
            source = f"{path}: {label}" if label else str(path)
            if isinstance(doc, _Line):
                rec = _validate_line(doc, source, home, dims)
            else:
                rec = validate_document(doc, source, home, dims)
            if rec.kind in COMMAND_ONLY:
                # A submitted file must never make the project trust the key that signed it.
                raise RecordError(f"{rec.kind!r} records are written by `luma runner trust|revoke`, not ingested "
                                  "from files", source=source, field="record_type")
            yield rec
