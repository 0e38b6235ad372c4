"""The import graph of LUMA's own modules: no cycles (imports inside functions count), few imports
hidden inside functions (each with its reason), lower layers never importing upper ones, small CLI
modules. The scanner follows `package-dir`, so `luma.kb.x` is the file `kb/x.py`."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]

#: Share of internal imports that may sit inside a function (heavy optional dependencies only).
MAX_INSIDE_FUNCTIONS = 0.15
MAX_CLI_LINES = 200

#: The layers, lowest first: a module may import its own layer and those below it, never one
#: above. The longest matching prefix names a module's layer; the bare `luma` (the package's
#: `__init__`) matches only itself.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("luma", "luma.errors", "luma.settings", "luma.names", "luma.privacy", "luma.extras", "luma.ontology")),
    ("kb", ("luma.kb",)),
    ("rules", ("luma.rules",)),
    ("host", ("luma.experiments.host",)),
    ("kernels", ("luma.kernels",)),
    ("experiments", ("luma.experiments",)),
    ("reports", ("luma.reports",)),
    ("cli", ("luma.cli",)),
    ("api", ("luma.api",)),
]


@dataclass(frozen=True)
class Import:
    """One import statement's edge from a module to another LUMA module."""

    source: str
    target: str
    line: int
    inside_function: bool
    reason: str  # the comment on the import's line or the line above it ("" when none)


def modules() -> dict[str, Path]:
    """Every LUMA module as {dotted name: file}."""
    found = {}
    for package, folder in PACKAGE_DIR.items():
        for path in (ROOT / folder).glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def _comment(lines: list[str], lineno: int) -> str:
    here = lines[lineno - 1]
    if "#" in here:
        return here.split("#", 1)[1].strip()
    above = lines[lineno - 2].strip() if lineno >= 2 else ""
    return above[1:].strip() if above.startswith("#") else ""


def imports() -> list[Import]:
    """Every import of a LUMA module by a LUMA module; imports under `if TYPE_CHECKING:` do not run
    and are left out."""
    known = modules()
    found: list[Import] = []
    for module, path in known.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        package = module if path.stem == "__init__" else module.rsplit(".", 1)[0]

        def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
            if isinstance(node, ast.Import):
                return [alias.name for alias in node.names]
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            return [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]

        def walk(node: ast.AST, inside: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for statement in child.orelse:
                        walk(ast.Module(body=[statement], type_ignores=[]), inside)
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    seen = set()
                    for name in targets(child):
                        target = _resolve(name, known) if name.split(".")[0] == "luma" else None
                        if target and target != module and target not in seen:
                            seen.add(target)
                            found.append(Import(module, target, child.lineno, inside, _comment(lines, child.lineno)))
                    continue
                walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        walk(ast.parse(text, filename=str(path)), False)
    return found


def layer(module: str) -> int:
    """The index of a module's layer in LAYERS."""
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or ("." in prefix and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} belongs to no layer"
    return best[0]


@pytest.fixture(scope="module")
def edges() -> list[Import]:
    return imports()


def test_the_scanner_sees_the_whole_package(edges):
    assert len(modules()) > 150 and len(edges) > 500
    assert any(e.source == "luma.cli.main" for e in edges)


def test_no_import_cycles(edges):
    graph = nx.DiGraph()
    graph.add_edges_from((e.source, e.target) for e in edges)
    cycles = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
    assert cycles == [], f"{len(cycles)} import cycles: {cycles}"


def test_few_imports_inside_functions(edges):
    inside = [e for e in edges if e.inside_function]
    share = len(inside) / len(edges)
    assert share <= MAX_INSIDE_FUNCTIONS, f"{len(inside)} of {len(edges)} internal imports ({share:.0%}) sit inside functions"


def test_each_import_inside_a_function_says_why(edges):
    silent = [f"{e.source}:{e.line} -> {e.target}" for e in edges if e.inside_function and not e.reason]
    assert silent == [], "an import inside a function carries a one-line reason (a comment on or above it)"


def test_lower_layers_never_import_upper_ones(edges):
    upward = [f"{e.source}:{e.line} ({LAYERS[layer(e.source)][0]}) -> {e.target} ({LAYERS[layer(e.target)][0]})"
              for e in edges if layer(e.target) > layer(e.source)]
    assert upward == []


def test_every_module_has_a_layer():
    for module in modules():
        layer(module)


def test_no_cli_module_is_long():
    long = {path.name: n for name, path in modules().items() if name.startswith("luma.cli")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_CLI_LINES}
    assert long == {}, f"CLI modules parse, call one library function and format; split these: {long}"
