"""The public API (`luma.api`) stays honest: `__all__` lists exactly the public names the module
defines or imports (httpx's tests/test_exported_members.py is the model), each of them importable
and documented, and importing it loads neither torch nor ray."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import luma.api as api

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_every_public_name_sorted():
    public = sorted(name for name in vars(api) if not name.startswith("_"))
    assert api.__all__ == public


def test_all_has_no_duplicates():
    assert len(set(api.__all__)) == len(api.__all__)


@pytest.mark.parametrize("name", api.__all__)
def test_each_name_is_importable_and_documented(name):
    namespace: dict = {}
    exec(f"from luma.api import {name}", namespace)  # noqa: S102 — the import a user writes
    obj = namespace[name]
    assert inspect.isclass(obj) or callable(obj), f"{name}: the API exports use cases and types only"
    doc = obj.__doc__ or ""
    # A dataclass without a docstring gets its signature as one: that is not documentation.
    assert doc.strip() and not doc.startswith(f"{obj.__name__}("), f"{name} has no docstring"


@pytest.mark.parametrize("doc", ["docs/architecture.md", "README.md"])
def test_the_docs_show_the_api(doc):
    """The docs show the API and import nothing from it that it does not export."""
    text = (ROOT / doc).read_text()
    shown = [line.split("from luma.api import", 1)[1].split("`")[0] for line in text.splitlines()
             if "from luma.api import" in line]
    assert shown, f"{doc} does not show luma.api"
    for names in shown:
        for name in names.replace("(", " ").replace(")", " ").replace(",", " ").split():
            assert name in api.__all__, f"{doc} imports {name} from luma.api, which has no such name"


def test_importing_the_api_loads_no_torch_or_ray():
    code = ("import sys, luma.api\n"
            "print(sorted(m for m in ('torch', 'ray', 'torchao', 'sklearn', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_luma_package_does_not_import_the_api():
    """`luma/__init__.py` stays light: every `import luma.kb` runs it."""
    code = "import sys, luma.kb\nprint('luma.api' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
