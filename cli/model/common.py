"""What the `luma model` commands share: a contract by path, shipped name or the model's own
(llm-chat …) and this host's calibration, for the command's project
(luma.experiments.model.partner_evaluation); a model figure in the reports' units."""

from __future__ import annotations

import math

from luma.cli.project import settings
from luma.experiments.model.partner_evaluation import host_calibration, model_contract
from luma.reports.fmt import binary_text, num, seconds_text


def load_contract(ref: str):
    """A contract by path, shipped name, or one of the model's own contracts (e.g. llm-chat)."""
    return model_contract(ref, settings())


def calibration():
    """This host's calibration, with the project's own LLM calibration when it has one."""
    return host_calibration(settings().home)


def figure_text(value, unit: str) -> str:
    """A model figure in the reports' units: memory in binary units (GiB), time in s/ms/µs."""

    if value is None or math.isnan(value):
        return "n/a"
    if unit == "B":
        return binary_text(value)
    if unit == "s":
        return seconds_text(value)
    return f"{num(value, 4)} {unit}".strip()
