"""The cases of data/<format>/<case>/: each folder holds a tool's file(s) and case.json (format,
tool, version, command, real, source, files, printed: the figures the tool itself printed)."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"


def folders() -> list[Path]:
    return sorted(p.parent for p in DATA.glob("*/*/case.json"))


def meta(folder: Path) -> dict:
    return json.loads((folder / "case.json").read_text())


def main_file(folder: Path) -> Path:
    return folder / meta(folder)["files"][0]
