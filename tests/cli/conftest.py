"""Fixtures of the CLI tests: `luma` as after the README's base install, without the kernels extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from luma.extras import EXTRAS

#: A `sitecustomize` on PYTHONPATH makes every module of the `kernels` extra unimportable, in the
#: process and in its children (sprint trials, probes), without uninstalling anything.
SITECUSTOMIZE = f'''
import importlib.abc, sys

class _WithoutKernelsExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {sorted(EXTRAS["kernels"])!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _WithoutKernelsExtra())
'''


def run_luma(args: list[str], home: Path, block: Path | None = None, cwd: Path | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """`luma ARGS` in a fresh interpreter with LUMA_HOME=home (the kernels extra hidden when
    `block` is the folder of that sitecustomize)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUMA_")}
    env["LUMA_HOME"] = str(home)
    env["LUMA_KERNEL_CACHE"] = str(home / ".kernel-cache")  # never the user's measured GEMM choices
    # the session's rule verdicts (tests/conftest.py rules_cache), never the user's
    env["LUMA_RULES_CACHE"] = os.environ.get("LUMA_RULES_CACHE") or str(home / ".rules-cache")
    if block is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(block), *filter(None, [env.get("PYTHONPATH")])])
    code = "import sys; from luma.cli.main import main; sys.argv = ['luma', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


@pytest.fixture(scope="session")
def no_kernels_extra(tmp_path_factory) -> Path:
    """The folder to put on PYTHONPATH to run without the kernels extra (see `run_luma`)."""
    folder = tmp_path_factory.mktemp("without-kernels-extra")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return folder


@pytest.fixture
def luma_without_kernels(no_kernels_extra):
    """`run(args, home, cwd=None)`: luma in a fresh interpreter without the kernels extra."""
    def run(args, home, cwd=None, timeout=300):
        return run_luma([str(a) for a in args], home, no_kernels_extra, cwd, timeout)
    return run
