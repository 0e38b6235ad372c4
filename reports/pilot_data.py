"""The input of the Economic Control Report: one pilot run summary, `pilot.json`, as `luma pilot
run` writes it (format 1) at the end of a run and after each of its segments.

`locate` finds the file (a run id under `$LUMA_HOME/pilots/`, a path to a pilot.json or to its
folder, or the newest run), `load` reads it as an untrusted file and checks it against the
format: a file that is not JSON, lacks a required key or has a value of the wrong type is one
`ConfigError` naming the file and the field (`pilot.json: segments[0].windows[2].p95_latency:
expected a number`). Only the keys the report cannot do without are required (format, run,
started, contract.name and the identity of each list item); everything else may be absent —
a killed run has `"finished": null` and may lack segments, decisions or figures — and the report
says what is missing. Keys it does not know are ignored, so a newer writer's extras do no harm.
`Evidence` and `StateLabels` say what the run states about its figures: the evidence class of
each kind, and short labels S1, S2 ... of its states.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from luma.errors import ConfigError, LumaError
from luma.kb.records.input_files import RECORD_FILE, read_text
from luma.kb.records.units import normalise

#: The format this report reads (the file's `format`).
FORMAT = 1
FILE_NAME = "pilot.json"
#: The segments the pilot runs, in order: the controller, then its two baselines.
PILOT, STATIC, HINDSIGHT = "pilot", "static-largest", "hindsight-best"
#: A long run holds thousands of windows: the bulk record-file limit, not the 1 MiB config limit.
PILOT_FILE = replace(RECORD_FILE, name="pilot summary limit", error=ConfigError)


class _Model(BaseModel):
    # strict: a count written as "39" or a latency written as true is the writer's bug, said as such
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)


Pair = Annotated[list[float], Field(min_length=2, max_length=2)]


class Clause(_Model):
    metric: str
    op: str
    value: float
    unit: str = ""


class Contract(_Model):
    name: str
    service: str | None = None
    clauses: list[Clause] = []


class Machine(_Model):
    cpu: str | None = None
    isa: str | None = None
    cores: float | None = None
    host: str | None = None


class Trace(_Model):
    name: str | None = None
    source: str | None = None
    duration_s: float | None = None
    scale: float | None = None
    points: list[Pair] = []


class Guardrails(_Model):
    # extra="allow": a guardrail the writer adds later is still shown in the Setup table
    model_config = ConfigDict(extra="allow", strict=True)
    margin: float | None = None
    hysteresis: float | None = None
    switch_budget: int | None = None
    max_extensions: int | None = None


class Prices(_Model):
    title: str | None = None
    source: str | None = None
    example: bool = False
    currency: str | None = None
    prices: list[str] = []


class Energy(_Model):
    evidence_class: str | None = None
    how: str | None = None
    counters: str | None = None


class State(_Model):
    key: str
    label: str
    levels: dict[str, Any] = {}
    variant: str | None = None
    settings: dict[str, Any] = {}
    capacity: float | None = None
    p95_latency: float | None = None
    latency_margin: float | None = None
    cost_per_hour: float | None = None
    cost_per_accepted: float | None = None
    energy_per_accepted: float | None = None
    trials: int | None = None
    sources: list[str] = []


class Window(_Model):
    index: int | None = None
    start_s: float
    end_s: float
    rate_offered: float | None = None
    rate_observed: float | None = None
    state: str | None = None
    verification: bool = False
    extension: int | None = None
    requests: int | None = None
    completed: int | None = None
    errors: int | None = None
    accepted: int | None = None
    p95_latency: float | None = None
    p95_ci: Pair | None = None
    slo: float | None = None
    verdict: str | None = None
    cost: float | None = None
    energy_j: float | None = None
    cost_per_accepted: float | None = None
    energy_per_accepted: float | None = None
    cpu_s: float | None = None
    outside_contract: int | None = None
    event: str | None = None


class Estimate(_Model):
    """A figure with its confidence interval."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class Totals(_Model):
    requests: int | None = None
    accepted: int | None = None
    errors: int | None = None
    outside_contract: int | None = None
    outside_share: float | None = None
    cost: float | None = None
    energy_j: float | None = None
    cost_per_accepted: Estimate | None = None
    energy_per_accepted: Estimate | None = None
    duration_s: float | None = None


class Segment(_Model):
    name: str
    title: str | None = None
    state: str | None = None
    windows: list[Window] = []
    totals: Totals | None = None
    same_as: str | None = None


class Predicted(_Model):
    verdict: str | None = None
    p95_latency: float | None = None
    cost_per_accepted: float | None = None
    capacity: float | None = None


class Verification(_Model):
    verdict: str | None = None
    windows: int | None = None


class Side(_Model):
    cost_per_accepted: Estimate | None = None
    energy_per_accepted: Estimate | None = None


class Realized(_Model):
    before: Side | None = None
    after: Side | None = None


class Decision(_Model):
    sequence: int
    window: int | None = None
    start_s: float | None = None
    action: str
    from_: str | None = Field(None, alias="from")
    to: str | None = None
    reason: str | None = None
    predicted: Predicted | None = None
    verification: Verification | None = None
    outcome: str | None = None
    realized: Realized | None = None
    record: str | None = None


class Figures(_Model):
    saving_vs_static: float | None = None
    outside_share: float | None = None
    vs_hindsight: float | None = None
    rollbacks: int | None = None
    upscales: int | None = None
    downscales: int | None = None


class Pilot(_Model):
    """One run summary. `present` lists the top-level keys the file had (absent ones are notes)."""

    format: int
    run: str
    started: str
    finished: str | None = None
    contract: Contract
    machine: Machine | None = None
    trace: Trace | None = None
    window_s: float | None = None
    guardrails: Guardrails | None = None
    price_table: Prices | None = None
    energy: Energy | None = None
    library: list[State] = []
    segments: list[Segment] = []
    decisions: list[Decision] = []
    figures: Figures | None = None
    evidence: dict[str, str] = {}
    present: frozenset[str] = frozenset()

    @property
    def currency(self) -> str:
        return (self.price_table.currency if self.price_table else None) or ""

    def energy_simulated(self) -> bool:
        """Whether the energy figures come from a model (the energy block's class, else the evidence block's)."""
        stated = (self.energy.evidence_class if self.energy else None) or self.evidence.get("energy", "")
        return stated.strip().startswith("simulated")

    def slo(self) -> float | None:
        """The latency SLO in seconds: the windows' own, else the contract's p95_latency clause
        (else its first percentile-latency clause)."""
        for w in (w for seg in self.segments for w in seg.windows):
            if finite(w.slo) is not None:
                return w.slo

        latency = [c for c in self.contract.clauses if c.metric.startswith("p") and c.metric.endswith("_latency")]
        clause = next((c for c in latency if c.metric == "p95_latency"), latency[0] if latency else None)
        try:
            value, unit = normalise(clause.value, clause.unit) if clause else (None, None)
        except LumaError:  # a unit LUMA does not know: no line rather than one at a guessed scale
            return None
        return value if unit == "second" else None

    def segment(self, name: str) -> Segment | None:
        """The segment called `name`; a segment that is `same_as` another (one state measured
        once) lends that one's windows and totals when it has none of its own."""
        seg = next((s for s in self.segments if s.name == name), None)
        if seg is not None and seg.same_as and not seg.windows and seg.totals is None:
            other = next((s for s in self.segments if s.name == seg.same_as), None)
            if other is not None:
                seg = seg.model_copy(update={"windows": other.windows, "totals": other.totals,
                                             "state": seg.state or other.state})
        return seg


# -- what the run states about itself -----------------------------------------------------------

class Evidence:
    """The evidence class of each kind of figure, from the run's `evidence` block."""

    def __init__(self, evidence: dict[str, str]):
        self.evidence = evidence

    def cls(self, key: str) -> str:
        return self.evidence.get(key, "").split(":", 1)[0].strip() or "not stated"

    def of(self, *keys: str) -> str:
        """'measured (latency, errors)' or 'projected (cost); simulated (energy)'."""
        by: dict[str, list[str]] = {}
        for k in keys:
            by.setdefault(self.cls(k), []).append(k)
        return "; ".join(f"{c} ({', '.join(ks)})" for c, ks in by.items())


class StateLabels:
    """Short labels S1, S2 ... of the library's states, cheapest per hour first; a state the run
    names that the library lacks keeps its key (and a note says so)."""

    def __init__(self, p: Pilot):
        order = sorted(range(len(p.library)), key=lambda i: (finite(p.library[i].cost_per_hour) is None,
                                                             finite(p.library[i].cost_per_hour) or 0.0, i))
        self.order = [p.library[i].key for i in order]
        self.short = {k: f"S{n + 1}" for n, k in enumerate(self.order)}
        self.label = {s.key: s.label for s in p.library}
        named = [s.state for s in p.segments] + [w.state for s in p.segments for w in s.windows]
        named += [k for d in p.decisions for k in (d.from_, d.to)]
        self.unknown = [k for k in dict.fromkeys(named) if k and k not in self.short]
        self.short.update({k: f"{k[:8]}?" for k in self.unknown})
        self.order += self.unknown

    def of(self, key: str | None) -> str:
        return "—" if key is None else self.short[key]

    def text(self, key: str | None) -> str:
        if key is None:
            return "—"
        return f"{self.short[key]} ({self.label[key]})" if key in self.label else f"{self.short[key]} (not in the library)"

    def axis(self) -> list[str]:
        return [self.short[k] for k in self.order]


# -- finding the file ---------------------------------------------------------------------------

def runs(home: Path) -> list[Path]:
    """The run folders under `home/pilots/` that hold a pilot.json, oldest first: by the time the
    summary was last written (the run id breaks ties), never by the folder's own time, which a
    report written into it would change."""
    base = Path(home) / "pilots"
    try:
        found = [d for d in base.iterdir() if (d / FILE_NAME).is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda d: ((d / FILE_NAME).stat().st_mtime_ns, d.name))


def locate(ref: str | None, home: Path, source: str | None = None) -> Path:
    """The pilot.json that `ref` names: an existing file, a folder holding one, or a run id under
    `home/pilots/`; None: the newest run. `source` is how the user named `home` (for errors)."""
    if ref:
        path = Path(ref)
        if path.is_dir() and (path / FILE_NAME).exists():
            return path / FILE_NAME
        if path.exists() and not path.is_dir():
            return path  # read_text says what it is when it is no regular file
        by_id = Path(home) / "pilots" / ref / FILE_NAME
        if "/" not in ref and by_id.exists():
            return by_id
        known = [d.name for d in runs(home)]
        listed = f" (runs there: {', '.join(known[-5:])})" if known else ""
        raise ConfigError(f"no pilot run {ref!r}: not a pilot.json, a folder holding one, nor a run under "
                          f"{Path(home) / 'pilots'}{listed}", source=source)
    found = runs(home)
    if not found:
        raise ConfigError(f"no pilot run under {Path(home) / 'pilots'}: `luma pilot run` makes one, or give "
                          "the path of a pilot.json", source=source)
    return found[-1] / FILE_NAME


# -- reading it ---------------------------------------------------------------------------------

def _where(loc: tuple) -> str:
    """pydantic's `('segments', 0, 'windows', 2, 'p95_latency')` as `segments[0].windows[2].p95_latency`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("float", "int", "str", "bool", "list", "dict", "none") and "[" not in str(part):
            out += f".{part}" if out else str(part)
    return out


_WORDS = {"float_type": "expected a number", "int_type": "expected an integer", "string_type": "expected text",
          "bool_type": "expected true or false", "list_type": "expected a list", "dict_type": "expected an object",
          "model_type": "expected an object", "missing": "missing (a required key of the pilot summary)",
          "too_short": "expected a pair [a, b]", "too_long": "expected a pair [a, b]"}


def _first_error(exc: ValidationError) -> tuple[str, str]:
    """(field, message) of the first problem; of a `number | null` field's two complaints, the
    one about the value rather than 'should be None'."""
    errors = exc.errors(include_url=False)
    loc = _where(errors[0]["loc"])
    err = next((e for e in errors if _where(e["loc"]) == loc and e["type"] != "none_required"), errors[0])
    words = _WORDS.get(err["type"], err["msg"])
    if err["type"] != "missing":
        words += f", got {json.dumps(err.get('input'))[:60]}"
    return loc or "(top level)", words


def parse(text: str, source: str) -> Pilot:
    """The summary in `text` (named `source` in errors), checked against format 1."""
    try:
        # NaN / Infinity are not JSON; a writer that lets one through means "no value".
        doc = json.loads(text, parse_constant=lambda _: None)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", source=source) from None
    except RecursionError:
        raise ConfigError("not valid JSON (nested too deeply)", source=source) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"expected a JSON object (the pilot summary), got {type(doc).__name__}", source=source)
    if "format" in doc and doc["format"] != FORMAT and isinstance(doc["format"], int):
        raise ConfigError(f"{doc['format']} is not a format this luma reads (it reads format {FORMAT})",
                          source=source, field="format")
    try:
        pilot = Pilot.model_validate({k: v for k, v in doc.items() if k != "present"})
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise ConfigError(message, source=source, field=field) from None
    return pilot.model_copy(update={"present": frozenset(k for k in doc if doc[k] is not None)})


def load(path: Path, settings=None) -> Pilot:
    """Read and check the pilot.json at `path`; `settings` (the command's) sets the file limit."""
    text = read_text(path, PILOT_FILE.of(settings))
    return parse(text, str(path))


def finite(x: float | None) -> float | None:
    """`x` when it is a finite number, else None (what the report treats as no value)."""
    return x if x is not None and math.isfinite(x) else None
