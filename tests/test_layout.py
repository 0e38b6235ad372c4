"""The repository's layout: packaging that matches the folders, small modules, `luma.` imports,
and the committed JSON Schema kept equal to the one the record model generates."""

from __future__ import annotations

import ast
import copy
import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
TOP_LEVEL = {"kb", "ontology", "rules", "experiments", "kernels", "cli", "reports", "luma"}
DATA_FOLDERS = ["ontology", "kb/queries", "rules"]
MAX_LINES = 600
_SKIP_DIRS = {".venv", "venv", ".git", "__pycache__", "build", "dist", "node_modules", ".pytest_cache", ".hypothesis"}
#: Top-level folders that are only importable as `luma.<name>`.
_BARE = TOP_LEVEL - {"luma"}


def _walk(root: Path, skip_tests: bool):
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = set(rel.parts[:-1])
        if parts & _SKIP_DIRS or any(p.endswith(".egg-info") for p in rel.parts):
            continue
        if skip_tests and rel.parts[0] == "tests":
            continue
        yield path, rel


def _package_folders() -> dict[str, str]:
    """Every folder holding an __init__.py under the mapped top-level folders, as {package: folder}."""
    found = {}
    for top in sorted(TOP_LEVEL):
        base = ROOT / top
        for init in sorted(base.rglob("__init__.py")):
            folder = init.parent.relative_to(ROOT)
            if set(folder.parts) & _SKIP_DIRS:
                continue
            inner = folder.relative_to(top).parts
            prefix = "luma" if top == "luma" else f"luma.{top}"
            found[".".join([prefix, *inner])] = folder.as_posix()
    return found


def test_packages_match_the_folders():
    folders = _package_folders()
    assert sorted(SETUPTOOLS["packages"]) == sorted(folders)
    assert len(SETUPTOOLS["packages"]) == len(set(SETUPTOOLS["packages"]))


def test_package_dir_maps_each_package_to_its_folder():
    mapping = SETUPTOOLS["package-dir"]
    assert mapping == _package_folders()
    tops = {pkg: folder for pkg, folder in mapping.items() if pkg.count(".") <= 1}
    assert set(tops.values()) == TOP_LEVEL


def test_no_unmapped_top_level_package():
    mapped = set(SETUPTOOLS["package-dir"].values())
    stray = [p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in mapped and p.parent.name != "tests"]
    assert stray == []


@pytest.mark.parametrize("folder", DATA_FOLDERS)
def test_data_folders_are_packages(folder):
    assert (ROOT / folder / "__init__.py").is_file()


def test_package_data_is_declared():
    data = SETUPTOOLS["package-data"]
    assert "*.ttl" in data["luma.ontology"] and "*.json" in data["luma.ontology"]
    assert "*.rq" in data["luma.kb.queries"] and "*.rq" in data["luma.rules"]
    assert list((ROOT / "kb" / "queries").glob("*.rq")), "no named query shipped"


def test_no_python_file_is_too_long():
    long = {str(rel): n for path, rel in _walk(ROOT, skip_tests=True)
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules (over {MAX_LINES} lines): {long}"


def test_no_bare_imports_of_the_top_level_folders():
    offenders = []
    for path, rel in _walk(ROOT, skip_tests=False):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{rel}:{node.lineno}: {n}" for n in names if n.split(".")[0] in _BARE]
    assert offenders == [], "import these as `luma.<folder>`"


# -- the committed JSON Schema -------------------------------------------------------------------

SCHEMA_PATH = ROOT / "ontology" / "pex-chain.schema.json"
VALID = json.loads((ROOT / "tests" / "kb" / "data" / "valid_chain.json").read_text())


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("record_type", ["pex-chain", "kernel-result", "pex-trial", "machine", "intervention-parameters",
                                         "optimize-result", "pilot-decision"])
def test_committed_schema_is_the_generated_one(record_type):
    from luma.kb.records.schema import schema_text

    assert (ROOT / "ontology" / f"{record_type}.schema.json").read_text() == schema_text(record_type), (
        f"ontology/{record_type}.schema.json is stale: regenerate it with `luma kb schema --record-type {record_type}`"
    )


def test_kernel_result_schema_accepts_the_example():
    schema = json.loads((ROOT / "ontology" / "kernel-result.schema.json").read_text())
    example = json.loads((ROOT / "tests" / "kb" / "data" / "kernel_result.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(example)


def test_schema_accepts_the_valid_chain(validator):
    assert list(validator.iter_errors(VALID)) == []


@pytest.mark.parametrize("where", ["pass_state", "fail_state", "crossed_dimension", "binding_resource"])
def test_schema_rejects_an_unknown_dimension(validator, where):
    bad = copy.deepcopy(VALID)
    if where.endswith("_state"):
        bad[where]["dimensions"]["warp_drive"] = {"value": 1, "unit": "core"}
    else:
        bad[where] = "warp_drive"
    errors = list(validator.iter_errors(bad))
    assert errors and any("warp_drive" in e.message for e in errors)


def test_schema_rejects_what_the_model_rejects(validator):
    extra = {**VALID, "colour": "red"}
    missing = {k: v for k, v in VALID.items() if k != "workload"}
    wrong = {**VALID, "repetitions": "3"}
    for bad in (extra, missing, wrong):
        assert list(validator.iter_errors(bad)), bad
