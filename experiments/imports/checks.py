"""What every parser checks of a tool's file, with one-line errors naming the file and field:
values that must be finite and not negative, lists that must be as long as the tool says, and
the tool's own summary figures recomputed from the samples with the tool's own percentile
definition (a mismatch beyond rounding means a sample or a figure was edited: the whole file
is refused)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from luma.errors import RecordError
from luma.experiments.imports.run import SourceFile
from luma.kb.records.input_files import RECORD_FILE, read_bytes

#: Relative and absolute tolerance of a recomputed figure: tools save full-precision floats, so
#: only float rounding separates LUMA's recomputation from theirs (a millisecond figure that a
#: tool rounds to 2 decimals passes `rounding=0.005`).
REL_TOL = 1e-6
ABS_TOL = 1e-9


def refuse(path: Path, field: str, message: str) -> RecordError:
    """The one-line error of a file's field (`run.json: ttfts[17]: -0.2 is negative`)."""
    return RecordError(message, source=Path(path).name, field=field)


def read(path: Path, settings=None) -> tuple[bytes, SourceFile]:
    """The bytes of an untrusted tool file (a regular file within the record-file limit)."""
    limit = RECORD_FILE.under(settings) if settings is not None else RECORD_FILE
    data = read_bytes(path, limit)
    return data, SourceFile.of(path, data)


def load_json(path: Path, data: bytes):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse(path, "", f"not valid JSON ({exc})") from None


def number(path: Path, field: str, value, *, whole: bool = False, negative: bool = False) -> float:
    """`value` as a finite number (a whole one when `whole`), not negative unless allowed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise refuse(path, field, f"{value!r} is not a number")
    if not math.isfinite(value):
        raise refuse(path, field, f"{value} is not a finite number")
    if whole and value != int(value):
        raise refuse(path, field, f"{value} is not a whole number")
    if value < 0 and not negative:
        raise refuse(path, field, f"{value} is negative")
    return int(value) if whole else float(value)


def numbers(path: Path, field: str, values, *, length: int | None = None, whole: bool = False) -> list:
    """A list of finite, non-negative numbers (`length` long when given)."""
    if not isinstance(values, list):
        raise refuse(path, field, f"expected a list, got {type(values).__name__}")
    if length is not None and len(values) != length:
        raise refuse(path, field, f"{len(values)} values, but the file counts {length} requests")
    return [number(path, f"{field}[{i}]", v, whole=whole) for i, v in enumerate(values)]


def field_of(path: Path, doc: dict, key: str, kind=(int, float)):
    """`doc[key]`, which the format requires."""
    if key not in doc:
        raise refuse(path, key, "missing (the format requires it)")
    value = doc[key]
    if kind is not None and (isinstance(value, bool) or not isinstance(value, kind)):
        raise refuse(path, key, f"{value!r} is not a {'number' if kind == (int, float) else kind.__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(path, key, f"{value} is not a finite number")
    return value


def linear_percentile(values: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation between order statistics), p in [0, 100]."""
    x = sorted(values)
    if not x:
        return 0.0
    idx = p / 100 * (len(x) - 1)
    lo = int(math.floor(idx))
    hi = min(lo + 1, len(x) - 1)
    return x[lo] + (idx - lo) * (x[hi] - x[lo])


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def agree(path: Path, field: str, mine: float, theirs, what: str, rounding: float = 0.0) -> None:
    """Refuse the file when the tool's figure `theirs` (key `field`) is not what its samples give."""
    got = number(path, field, theirs, negative=True)
    if abs(mine - got) > max(REL_TOL * max(abs(mine), abs(got)), ABS_TOL, rounding):
        raise refuse(path, field, f"the file says {got:g} but its per-request samples give {what} {mine:g}: a "
                                  "sample or the figure was edited (file refused)")


def summary_ms(path: Path, doc: dict, name: str, samples: list[float] | None, rounding: float = 0.0) -> dict:
    """The tool's `mean_/median_/pNN_<name>_ms` figures of `doc` ({"mean": …, "p50": …} in ms),
    each checked against `samples` (seconds; None: nothing to check them against) with
    numpy.percentile's definition, which vLLM's and SGLang's benchmarks use."""
    out = {}
    for key, value in doc.items():
        stat, _, rest = key.partition("_")
        if rest != f"{name}_ms" or value is None:
            continue
        if stat in ("mean", "median"):
            p = 50.0 if stat == "median" else None
            label = stat
        elif stat.startswith("p") and stat[1:].replace(".", "", 1).isdigit():
            p, label = float(stat[1:]), f"p{stat[1:]}"
        else:
            continue
        figure = number(path, key, value, negative=True)
        out["p50" if stat == "median" else label] = figure
        if samples is not None:
            mine = (mean(samples) if p is None else linear_percentile(samples, p)) * 1000
            agree(path, key, mine, figure, f"{label} {name}", rounding)
    return out
