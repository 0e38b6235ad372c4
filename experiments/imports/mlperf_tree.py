"""Reading an MLPerf Inference results tree: the layout MLCommons publishes each round in
(github.com/mlcommons/inference_results_vX.Y) and its two kinds of files LUMA reads.

    <division>/<submitter>/systems/<system>.json            the system description
    <division>/<submitter>/results/<system>/<benchmark>/<scenario>/performance/run_1/mlperf_log_summary.txt

Everything else (code, compliance runs, accuracy logs, measurements) is not a result and is not
read. A folder with no `<division>/<submitter>/systems/*.json` is not a results tree: RecordError
says what it lacked. A malformed file is a RecordError naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import RecordError

DIVISIONS = ("closed", "open", "network")
SUMMARY = Path("performance") / "run_1" / "mlperf_log_summary.txt"
#: A system description or log summary is a few KB; anything far larger is not one.
MAX_FILE_BYTES = 1 << 20
_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class FileRef:
    """A file read: its path inside the tree (forward slashes), size and SHA-256."""

    path: str
    sha256: str
    bytes: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class System:
    """One `systems/<system>.json`: its fields as the submitter wrote them."""

    division: str
    submitter: str
    key: str  # the file name without .json: how results/ names the system
    fields: dict
    file: FileRef

    def get(self, name: str) -> str:
        """A field as text, '' when absent or a placeholder (N/A, -, empty)."""
        value = self.fields.get(name)
        text = "" if value is None else str(value).strip()
        return "" if text.lower() in ("", "n/a", "na", "-", "none", "tbd") else text

    def number(self, name: str, default: int = 0) -> int:
        """A whole-number field (submitters write 8 or "8")."""
        text = self.get(name)
        try:
            return int(float(text)) if text else default
        except ValueError:
            raise RecordError(f"{name} must be a number, got {text!r}", source=self.file.path, field=name) from None


@dataclass(frozen=True)
class Summary:
    """One `mlperf_log_summary.txt`: its `key : value` lines (keys with runs of spaces folded)."""

    division: str
    submitter: str
    system: str
    benchmark: str
    scenario: str
    values: dict[str, str]
    file: FileRef

    @property
    def valid(self) -> bool:
        return self.values.get("Result is", "").upper() == "VALID"

    def number(self, *keys: str) -> float | None:
        """The first of `keys` present, as a number (None when none is)."""
        for key in keys:
            if key in self.values:
                try:
                    return float(self.values[key])
                except ValueError:
                    raise RecordError(f"{key!r} is not a number: {self.values[key]!r}", source=self.file.path,
                                      field=key) from None
        return None


@dataclass
class Tree:
    """The systems and result summaries found under a results tree's root."""

    root: Path
    systems: list[System] = field(default_factory=list)
    summaries: list[Path] = field(default_factory=list)


def _ref(root: Path, path: Path) -> tuple[FileRef, bytes]:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RecordError(f"is {size} bytes; an MLPerf system description or summary is a few KB",
                              source=str(path))
        data = path.read_bytes()
    except OSError as exc:
        raise RecordError(f"cannot read: {exc.strerror}", source=str(path)) from None
    rel = path.relative_to(root).as_posix()
    return FileRef(rel, hashlib.sha256(data).hexdigest(), len(data)), data


def scan(root: Path) -> Tree:
    """Find the system descriptions and performance summaries under `root`; RecordError when it
    is not an MLPerf Inference results tree (one line: what it lacked)."""
    root = Path(root)
    if not root.is_dir():
        raise RecordError("is not a folder (give the root of a clone of an MLPerf Inference results repository)",
                          source=str(root))
    tree = Tree(root)
    for division in DIVISIONS:
        for sub in sorted(p for p in (root / division).glob("*") if p.is_dir()):
            for path in sorted((sub / "systems").glob("*.json")):
                tree.systems.append(read_system(root, path, division, sub.name))
            results = sub / "results"
            if results.is_dir():
                tree.summaries += sorted(results.glob(f"*/*/*/{SUMMARY.as_posix()}"))
    if not tree.systems:
        raise RecordError("is not an MLPerf Inference results tree: it has no "
                          f"{{{','.join(DIVISIONS)}}}/<submitter>/systems/<system>.json", source=str(root))
    return tree


def read_system(root: Path, path: Path, division: str, submitter: str) -> System:
    """One system description (JSON object)."""
    ref, data = _ref(root, path)
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise RecordError(f"is not JSON: {exc}", source=ref.path) from None
    if not isinstance(doc, dict):
        raise RecordError("a system description is a JSON object", source=ref.path)
    system = System(division, submitter, path.stem, doc, ref)
    for required in ("submitter", "system_name"):
        if not system.get(required):
            raise RecordError(f"{required} is missing", source=ref.path, field=required)
    return system


def read_summary(root: Path, path: Path) -> Summary:
    """One performance summary, its place in the tree from its path."""
    ref, data = _ref(root, path)
    parts = Path(ref.path).parts  # division/submitter/results/system/benchmark/scenario/performance/run_1/file
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError("is not UTF-8 text", source=ref.path) from None
    if "MLPerf Results Summary" not in text:
        raise RecordError("is not an MLPerf loadgen summary (no 'MLPerf Results Summary' banner)", source=ref.path)
    values: dict[str, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            values.setdefault(" ".join(m.group(1).split()), m.group(2))
    for required in ("Scenario", "Result is"):
        if required not in values:
            raise RecordError(f"{required!r} line is missing", source=ref.path, field=required)
    if values["Scenario"] != parts[5]:
        raise RecordError(f"states scenario {values['Scenario']!r} but sits under {parts[5]!r}", source=ref.path,
                          field="Scenario")
    return Summary(parts[0], parts[1], parts[3], parts[4], parts[5], values, ref)
