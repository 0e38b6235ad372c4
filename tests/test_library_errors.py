"""Library errors name fields, the CLI names flags (STYLE: "Parse text in the CLI; pass typed
values"). No error raised under kb/, rules/, reports/ or experiments/ names a command-line flag
as what is at fault -- a library caller has no flags -- though it may suggest a whole command
to run (`luma rules run --exploratory`, in backticks)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("kb", "rules", "reports", "experiments")
#: A flag outside a backticked command: `--name`, `--state accelerator_type`.
_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*")
_COMMAND = re.compile(r"`luma [^`]*`")


def _texts(node: ast.AST):
    """The literal text of a call's arguments: strings, and the constant parts of f-strings."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _raised_texts(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        call = node.exc if isinstance(node, ast.Raise) else node if isinstance(node, ast.Return) else None
        call = getattr(call, "value", call) if isinstance(node, ast.Return) else call
        if not isinstance(call, ast.Call):
            continue
        name = getattr(call.func, "id", getattr(call.func, "attr", ""))
        if not (name.endswith(("Error", "Refused", "Timeout", "Busy", "Floor", "NotRun")) or name in (
                "UnknownName", "NothingToReport")):
            continue
        # Adjacent literals ("…(" "--x)") are one constant already; f-string parts come one by one.
        joined = " ".join(_texts(call))
        yield node.lineno, _COMMAND.sub("`cmd`", joined)


def _flags_as_values(path: Path):
    """String constants that are a flag themselves (`field="--state"`, f"--state {name}"), outside
    docstrings: a flag passed down as the name of what is at fault."""
    tree = ast.parse(path.read_text(), str(path))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                and re.match(r"--[a-z]", node.value)):
            yield node.lineno, node.value


#: Modules that build another program's command line (its flags are values there, not ours).
FOREIGN_ARGV = {"experiments/endpoint/aiperf.py", "experiments/endpoint/engines.py", "experiments/endpoint/gguf.py",
                "experiments/host.py"}


def test_library_errors_name_no_flag():
    found = []
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in _raised_texts(path):
                for flag in _FLAG.findall(text):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {flag} in {text[:120]!r}")
            if str(path.relative_to(ROOT)) in FOREIGN_ARGV:
                continue
            for line, text in _flags_as_values(path):
                found.append(f"{path.relative_to(ROOT)}:{line}: {text!r} used as a value")
    assert not found, "library errors naming CLI flags:\n" + "\n".join(found)
