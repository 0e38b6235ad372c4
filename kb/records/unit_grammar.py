"""The unit grammar: what unit text may say before pint reads it.

pint evaluates unit text as an arithmetic expression, so `10**10**10` hangs it and `GiB/0` ends
in a ZeroDivisionError. Units in records are untrusted, so only this small language reaches pint:

    unit    := "1" | ["1" "/"] factor (op factor)*
    factor  := name [power]
    name    := "%" | letter (letter | digit | "_")*      letters: A-Z a-z and µ/μ (micro)
    power   := ("^" | "**") ["-"] 1..4
    op      := "*" | "·" | "/"

One optional space may stand on each side of an operator (pint writes "byte / second" and
"meter ** 2"); nothing else: no numbers besides the leading "1", no parentheses, no control
characters, at most 64 characters. pint then reads `pint_text(text)`, the same tokens with the
spaces dropped and `^`/`·` spelt `**`/`*`, so what was checked is exactly what pint sees.
"""

from __future__ import annotations

import re

from luma.errors import UnitSyntaxError

#: Longest unit text accepted ("kilogram * meter ** 2 / second ** 3" is 35 characters).
MAX_LENGTH = 64
#: Largest exponent magnitude (m^2 of an area, s^-1 of a rate; nothing in LUMA needs more).
MAX_POWER = 4

_NAME = r"(?:%|[A-Za-zµμ][A-Za-z0-9_]*)"
_POWER = rf"(?: ?(?:\^|\*\*) ?-?[1-{MAX_POWER}])"
_FACTOR = rf"{_NAME}{_POWER}?"
_OP = r"(?: ?[*·/] ?)"
_UNIT = re.compile(rf"1|(?:1 ?/ ?)?{_FACTOR}(?:{_OP}{_FACTOR})*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check(text: str) -> str:
    """`text` without its padding spaces; UnitSyntaxError unless it is in the grammar."""
    if not isinstance(text, str):
        raise UnitSyntaxError(f"unit must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:  # first: nothing below looks at more than this
        raise UnitSyntaxError(f"unit is longer than {MAX_LENGTH} characters")
    if _CONTROL.search(text):
        raise UnitSyntaxError(f"unit {text!r} contains a control character")
    core = text.strip(" ")
    if not core:
        raise UnitSyntaxError("unit is missing")
    if not _UNIT.fullmatch(core):
        raise UnitSyntaxError(f"unit {core!r} is not a unit expression (write e.g. 'GiB', 'ms', "
                              f"'token/s', 'mm^2' or '1/s'; no numbers, parentheses or powers above {MAX_POWER})")
    return core


def pint_text(text: str) -> str:
    """The text pint is handed for `text` (checked first): its tokens, spaces dropped."""
    return check(text).replace(" ", "").replace("^", "**").replace("·", "*")
