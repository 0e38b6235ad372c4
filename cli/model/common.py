"""What the `luma model` commands share: a contract by path, shipped name or the model's own
(llm-chat …), this host's calibration, a model figure in the reports' units."""

from __future__ import annotations

import math

from luma.cli.project import settings, settings as command_settings
from luma.errors import ConfigError
from luma.experiments.model import calibrate, llm_calibrate
from luma.experiments.sprint import contract
from luma.reports.fmt import binary_text, num, seconds_text


def load_contract(ref: str):
    """A contract by path, shipped name, or one of the model's own contracts (e.g. llm-chat)."""
    import importlib.resources
    from pathlib import Path


    own = {p.name[:-5]: Path(str(p)) for p in importlib.resources.files("luma.experiments.model.contracts").iterdir()
           if p.name.endswith(".toml")}
    try:
        return contract.load(ref, settings())
    except ConfigError as exc:
        if ref in own:
            return contract.load(own[ref], settings())
        if Path(ref).exists() or "(shipped:" not in exc.message:
            raise  # a file that is there but wrong: its own error
        names = sorted({*contract.shipped(), *own})
        raise ConfigError(f"no contract file or shipped contract named {ref!r} (known: {', '.join(names)})",
                          source=ref) from None


def calibration():
    """This host's calibration, with the project's own LLM calibration when it has one."""

    home = command_settings().home
    cal = calibrate.load(home) or {}
    if llm_calibrate.path(home).is_file():
        cal = {**cal, "llm": llm_calibrate.current(home)}
    return cal or None


def figure_text(value, unit: str) -> str:
    """A model figure in the reports' units: memory in binary units (GiB), time in s/ms/µs."""

    if value is None or math.isnan(value):
        return "n/a"
    if unit == "B":
        return binary_text(value)
    if unit == "s":
        return seconds_text(value)
    return f"{num(value, 4)} {unit}".strip()
