"""Names taken from files, and the paths LUMA builds from them.

A contract's, campaign's or machine class's name, a sprint or pilot run ID, a runner key's name
becomes one folder or file name under the project directory (`sprints/<id>/`,
`campaigns/<id>/`, `keys/<name>.key`, `pilots/<run>/`). A contract file is untrusted input
(DESIGN §8): its `name = "../../x/evil"` must not write outside the project, nor make the fleet
head remove someone else's folder. So a name is checked where it is parsed, with the file and
field at fault (`check_name` here, or its `problem` inside a pydantic validator), and every path
built from one is checked again before anything is written or removed there (`inside`), which
also catches a symbolic link planted inside the project that points out of it.

A name: ASCII letters, digits, '.', '_' and '-'; it starts with a letter or a digit (never a
dot or a dash: no hidden file, no option); no '..' anywhere; at most 64 characters (`MAX_NAME`).
An ID built from names (a sprint's is contract-dimension-time, a campaign sprint's is
campaign--contract-dimension-class) may be longer, up to `MAX_ID` (a file name holds 255 bytes;
the head adds `.incoming`). Partner slugs and runner key names are lower-case names (their
record schemas and `kb/trust/attestation.py` say so): they become IRIs as well.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from luma.errors import ConfigError

MAX_NAME = 64
MAX_ID = 200
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RULE = "ASCII letters, digits, '.', '_' or '-', starting with a letter or digit, no '..'"


def problem(name: object, longest: int = MAX_NAME) -> str | None:
    """What is wrong with `name` as a name that becomes a file name (None: nothing)."""
    if not isinstance(name, str):
        return f"a name is text, got {type(name).__name__}"
    shown = repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name)} characters)"
    if not name:
        return "a name cannot be empty"
    if len(name) > longest:
        return f"a name has at most {longest} characters, got {shown}"
    if not _NAME.fullmatch(name) or ".." in name:
        return f"a name is {RULE} (at most {longest}), got {shown}"
    return None


def check_name(name: object, *, source: str | None = None, field: str | None = None,
               longest: int = MAX_NAME) -> str:
    """`name` when it may become a file name; ConfigError naming `source` and `field` otherwise."""
    why = problem(name, longest)
    if why is not None:
        raise ConfigError(why, source=source, field=field)
    return name  # type: ignore[return-value]


def inside(home: str | os.PathLike, path: str | os.PathLike, *, source: str | None = None,
           field: str | None = None) -> Path:
    """`path` when it resolves strictly inside the project directory `home` (symbolic links
    followed, as the write or removal would follow them); ConfigError otherwise. Called before
    anything is written or removed at a path built from a name."""
    root, target = Path(home).resolve(), Path(path).resolve()
    if target == root or not target.is_relative_to(root):
        raise ConfigError(f"{path} is not inside the project directory {home}: nothing written or removed there",
                          source=source, field=field)
    return Path(path)


def child(home: str | os.PathLike, folder: str | os.PathLike, name: object, *, source: str | None = None,
          field: str | None = None, longest: int = MAX_NAME) -> Path:
    """`folder / name`, a folder or file named after `name`, checked both ways: `name` is a name
    and the path stays inside `home`."""
    return inside(home, Path(folder) / check_name(name, source=source, field=field, longest=longest),
                  source=source, field=field)
