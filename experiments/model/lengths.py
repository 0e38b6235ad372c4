"""Prompt and output lengths as a distribution (placeholder until the length-mix module lands)."""

from __future__ import annotations

from dataclasses import dataclass

from luma.errors import ContractError


@dataclass(frozen=True)
class LengthMix:
    """Representative (prompt, output) points with weights."""

    prompt: tuple
    output: tuple
    weight: tuple
    name: str = "fixed"

    @property
    def mean_prompt(self) -> float:
        return sum(p * w for p, w in zip(self.prompt, self.weight))

    @property
    def mean_output(self) -> float:
        return sum(p * w for p, w in zip(self.output, self.weight))

    @property
    def mean_prompt_sq(self) -> float:
        return sum(p * p * w for p, w in zip(self.prompt, self.weight))


def fixed(prompt: int, output: int) -> LengthMix:
    return LengthMix((float(prompt),), (float(output),), (1.0,))


def parse(value, field: str) -> LengthMix:
    if isinstance(value, dict) and {"prompt", "output"} <= set(value):
        try:
            return fixed(float(value["prompt"]["mean"]), float(value["output"]["mean"]))
        except (KeyError, TypeError, ValueError):
            raise ContractError("needs prompt.mean and output.mean", field=field) from None
    raise ContractError(f"unknown length mix {value!r}", field=field)
