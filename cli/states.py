"""`--state DIM=LEVEL,DIM=LEVEL`: the machine-state option of `luma model predict`, `luma partner
evaluate` and `luma report partner`, parsed here into {dimension: level text} for the library."""

from __future__ import annotations

import click


def parse_state(text: str | None) -> dict[str, str]:
    """{dimension: level} from `DIM=LEVEL,DIM=LEVEL` (empty for None); a usage error names --state."""
    levels: dict[str, str] = {}
    for part in text.split(",") if text else []:
        dim, sep, value = part.partition("=")
        if not sep or not dim.strip():
            raise click.BadParameter(f"expected DIMENSION=LEVEL, got {part.strip()!r}", param_hint="--state")
        levels[dim.strip()] = value.strip()
    return levels


def parse_levels(text: str | None) -> list[str] | None:
    """`--levels '64 MiB,96 MiB'` as a list (None when not given)."""
    return [x.strip() for x in text.split(",") if x.strip()] if text else None
