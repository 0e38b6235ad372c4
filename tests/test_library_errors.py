"""Library errors name fields, the CLI names flags (STYLE: "Parse text in the CLI; pass typed
values"). No error raised under kb/, rules/, reports/ or experiments/ names a command-line flag
as what is at fault -- a library caller has no flags -- though it may suggest a whole command
to run (`luma rules run --exploratory`, in backticks).

And one error tree (STYLE: "one `LumaError` hierarchy"): every exception class the package
defines lives in luma/errors.py under LumaError, and its docstring draws the tree."""

from __future__ import annotations

import ast
import builtins
import re
import tomllib
from pathlib import Path

from luma import errors

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ("kb", "rules", "reports", "experiments")
#: A flag outside a backticked command: `--name`, `--state accelerator_type`.
_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*")
_COMMAND = re.compile(r"`luma [^`]*`")
#: The names of the error tree (luma/errors.py).
_TREE = {name for name, obj in vars(errors).items() if isinstance(obj, type) and issubclass(obj, BaseException)}


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
        if not (name.endswith(("Error", "Refused", "Timeout", "Busy", "Floor", "NotRun")) or name in _TREE):
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


# -- One error tree: every exception LUMA defines is a LumaError defined in luma/errors.py ---------

#: Private parse signals that never leave the module that raises them, by class name: each turns
#: into a RecordError there. DuplicateKey and Ambiguous must be PyYAML ConstructorErrors (the YAML
#: loader reports them with their marks); _Duplicate escapes json's object_pairs_hook.
PARSE_SIGNALS = {"DuplicateKey", "Ambiguous", "_Duplicate"}
_BUILTIN_EXCEPTIONS = {name for name, obj in vars(builtins).items()
                       if isinstance(obj, type) and issubclass(obj, BaseException)}


def _source_files():
    """Every .py file of the package, through the folders pyproject's package-dir maps."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    seen = set()
    for folder in sorted(set(dirs.values())):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path not in seen:
                seen.add(path)
                yield path


def _exception_classes():
    """(path, class name) of every class whose bases lead to an exception, by name (a base spelled
    `module.Name` counts by its last part; a foreign base counts when its name says Error/Exception)."""
    classes = []
    for path in _source_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                classes.append((path, node.name, bases))
    known = set(_BUILTIN_EXCEPTIONS)
    while True:
        grown = {name for _, name, bases in classes if name not in known and any(
            b in known or b.endswith(("Error", "Exception")) for b in bases)}
        if not grown:
            break
        known |= grown
    return [(path, name) for path, name, _ in classes if name in known and name not in _BUILTIN_EXCEPTIONS]


def test_every_exception_lives_in_errors_and_is_a_luma_error():
    home = ROOT / "luma" / "errors.py"
    found = _exception_classes()
    outside = [f"{p.relative_to(ROOT)}: {name}" for p, name in found if p != home and name not in PARSE_SIGNALS]
    assert not outside, "exception classes outside luma/errors.py:\n" + "\n".join(outside)
    in_errors = [name for p, name in found if p == home]
    assert len(in_errors) > 20, in_errors  # the walk found the tree itself
    not_luma = [name for name in in_errors if not issubclass(getattr(errors, name), errors.LumaError)]
    assert not not_luma, f"outside the LumaError tree: {not_luma}"


def test_the_docstring_draws_the_whole_tree():
    """The module docstring has one indented line per class, each under its base."""
    lines = [ln for ln in errors.__doc__.splitlines() if re.match(r"\s{4,}[A-Z]\w+\s", ln + " ")]
    drawn = [(len(ln) - len(ln.lstrip()), ln.split()[0]) for ln in lines]
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, BaseException) and cls.__module__ == errors.__name__}
    assert sorted(name for _, name in drawn) == sorted(classes)
    for i, (indent, name) in enumerate(drawn):
        parent = next((n for ind, n in reversed(drawn[:i]) if ind < indent), None)
        if parent is None:
            assert name == "LumaError"
        else:
            assert classes[parent] in classes[name].__mro__[1:], f"{name} is drawn under {parent}"


def test_leaves_keep_what_callers_catch():
    """ConfigError's leaves are ConfigErrors; the leaves that were built-in errors still are."""
    for leaf in (errors.ContractError, errors.StateError, errors.HardwareError, errors.TrustError,
                 errors.CharacterizeError):
        assert issubclass(leaf, errors.ConfigError)
    assert issubclass(errors.UnitProblem, ValueError) and issubclass(errors.KVBudgetError, ValueError)
    assert issubclass(errors.LaunchError, RuntimeError) and issubclass(errors.CapacityError, RuntimeError)
    launch = errors.LaunchError("the server exited", "log tail")
    assert (str(launch), launch.log_tail) == ("the server exited", "log tail")
