"""`luma record template KIND`: a complete, valid, commented skeleton of a record, generated from
the kind's pydantic model (field order, types, allowed values, `#:` comments and descriptions,
nested models' docstrings) walked over the kind's example values
(`luma.kb.records.template_examples`). Nothing here is a hand-written copy of a model, so the
template follows the model: a field the example leaves out is shown commented out, with its type.

What a clause needs observed comes from `luma.kb.records.observations` (the judge's rules), and a
level's units from the dimension registry, so the comments say what ingest will ask for.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
import types
import typing
from datetime import date, datetime
from functools import cache

from pydantic import BaseModel

from luma.kb.records import observations
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.kinds import BY_NAME
from luma.kb.records.template_examples import example

WIDTH = 100
#: What some fields mean wherever they appear (a model's own `#:` comment or description comes first).
NOTES = {
    "record_type": "The record's kind; `luma record template KIND` writes one of each.",
    "evidence_class": (
        "measured | simulated | projected | vendor-claim. `measured` is earned: the record must be signed by a "
        "runner key the project trusts (`luma runner keygen` once, then `luma runner sign FILE` after the last "
        "edit: any change afterwards breaks the signature), and ingest re-judges every trial from its "
        "observations (pex-trial, pex-chain, optimize-result, pilot-decision). Without a trusted signature write "
        "vendor-claim; simulated and projected are the model's."),
    "metric": "A registered metric name (`luma kb schema --observations` lists them with their units).",
    "unit": "A unit of the metric's or dimension's kind: ms, s, GiB, GB/s, core, request, token/s, dimensionless …",
    "value": "A number, in `unit`.",
    "op": "One of <=, <, >=, > (quote it in YAML: \"<=\").",
    "attestation": "Added by `luma runner sign FILE`; never written by hand.",
    "provenance": "Who or what produced the record: the tool (free text), host, start time.",
    "dimensions": "Dimension name -> level (`luma kb schema` lists the dimension names).",
    "started": "Date and time, ISO 8601 with a zone: 2026-12-05T09:00:00+00:00.",
    "name": "A name of your choice (free text).",
    "crossed_dimension": "The dimension whose level differs between pass_state and fail_state (only it).",
    "binding_resource": "The dimension that binds: restoring it alone at the FAIL state recovers PASS.",
    "recovered": "Whether the intervention recovered PASS at the FAIL state: true needs at least `repetitions` "
                 "recovered-state trials, all PASS; false needs one that did not PASS.",
    "repetitions": "Trials per state the claim rests on: at least this many PASS trials in the pass state (and, "
                   "when recovered, in the recovered state).",
    "trials": "The trials the claim rests on (measured: every one re-judged from its observations against the "
              "contract, so each carries the observations its clauses need).",
    "Trial.state": "Which state the trial ran: pass (pass_state), fail (fail_state) or recovered (fail_state with the "
             "intervention).",
    "Trial.repetition": "1, 2, … within its state.",
    "verdict": "What the contract's clauses give on the observations (ingest recomputes it): PASS when every "
               "clause holds on its whole interval, FAIL when one fails, INCONCLUSIVE otherwise.",
    "failure_cause": "slo-miss / quality-miss (what the failing clauses give), or a physical failure: oom, "
                     "timeout, crash … (a FAIL whatever was observed).",
    "observations": "What the trial observed: every clause's metric, and for a percentile clause its bounds "
                    "and sample count (the comment beside each says what it is for).",
    "variant": "The software variant that ran (fp32, int8-weights …).",
    "sprint": "The run this trial belongs to (free text).",
    "sequence": "The trial's number within its run, from 0.",
    "PexTrial.state": "The machine state the trial ran: a level per dimension.",
    "phase": "Which step of a sprint ran it (boundary for a hand-written trial).",
    "attempts": "How often the trial ran before it counted (1 unless a run was retried).",
    "Workload.model": "The model served (its name or file).",
    "Workload.task": "What the service does: generation, embedding, classification …",
    "Architecture.kind": "cpu, gpu, accelerator or system.",
    "Architecture.vendor": "Who makes it (AMD, Intel, NVIDIA …).",
    "Intervention.kind": "software (a change to the service), hardware, or partner (a partner's technology).",
    "Provenance.tool": "What produced the figures: your benchmark tool and its version (free text).",
    "git_revision": "The revision of the code that ran, if any.",
    "host": "The machine the figures were measured on (a name, never a person's).",
    "intervention": "The mechanism applied at the FAIL state (its name, kind: software, hardware or partner).",
}


#: Fields whose note here says more to a writer than the model's developer comment.
_OURS = ("attestation", "evidence_class")


def template(kind: str, fmt: str = "yaml") -> str:
    """The skeleton of `kind` as YAML with comments, or as plain JSON (JSON has no comments: the
    YAML form carries the explanations)."""
    doc = example(kind)
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    model = BY_NAME[kind].model_class()
    lines = [*_comment(_header(kind, model, doc), 0), ""]
    _fields(model, doc, 0, lines)
    return "\n".join(lines) + "\n"


def _header(kind: str, model: type[BaseModel], doc: dict) -> str:
    measured = doc.get("evidence_class") == "measured"
    return (
        f"{'An' if kind[0] in 'aeiou' else 'A'} {kind} record: {_first_paragraph(model.__doc__)} Written by `luma record template {kind}`; the "
        "values are made up for illustration: replace them with yours. A field shown commented out is "
        "optional. " + ("It is `measured`: sign it with `luma runner sign FILE` after your last edit (or set "
                        "evidence_class: vendor-claim). " if measured else "")
        + "Add it with `luma kb ingest FILE`, which lists every problem of a record, one per line."
    )


def _fields(model: type[BaseModel], doc: dict, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for name, info in model.model_fields.items():
        text = describe(model, name)
        if name not in doc:
            lines += _comment(f"{name}: (optional{_default(info)}) {text}", indent)
            continue
        value = doc[name]
        lines += _comment(text, indent)
        sub = _model_of(info.annotation)
        if isinstance(value, dict) and value and name == "dimensions":
            lines.append(f"{pad}{_key(name)}:")
            for key, level in value.items():
                lines.append(f"{pad}  {_key(key)}: {_flow(level)}  # {_dimension(key)}")
        elif isinstance(value, dict) and value and sub is not None and not _mapping(info.annotation) \
                and not _flat(sub, value):
            lines.append(f"{pad}{_key(name)}:")
            _fields(sub, value, indent + 2, lines)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{pad}{_key(name)}:")
            _items(sub, value, indent + 2, lines)
        elif isinstance(value, list) and len(_flow(value)) > WIDTH - indent - len(name) - 2:
            lines.append(f"{pad}{_key(name)}:")
            lines += [f"{pad}  - {_flow(v)}" for v in value]
        else:
            lines.append(f"{pad}{_key(name)}: {_flow(value)}" + _absent(sub, value))


def _items(sub: type[BaseModel] | None, values: list[dict], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for i, item in enumerate(values):
        if sub is not None and _flat(sub, item):
            if i == 0:
                lines += _comment("Each: " + "; ".join(f"{k}: {describe(sub, k)}" for k in sub.model_fields), indent)
            lines.append(f"{pad}- {_flow(item)}" + (_item_note(sub, item) or _absent(sub, item)))
            continue
        if sub is None:
            lines.append(f"{pad}- {_flow(item)}")
            continue
        if i > 0:
            lines += _comment(f"[{i}]: as the first item (the comments there apply)", indent)
        body: list[str] = []
        (_fields if i == 0 else _bare)(sub, item, indent + 2, body)
        first = next(j for j, line in enumerate(body) if not line.lstrip().startswith("#"))
        lines += body[:first] + [pad + "- " + body[first].lstrip()] + body[first + 1:]


def _absent(model: type[BaseModel] | None, value) -> str:
    """A trailing comment naming the optional fields a one-line block leaves out."""
    if model is None or not isinstance(value, dict):
        return ""
    missing = [f"{k}: [{_type_text(i.annotation)}]" for k, i in model.model_fields.items() if k not in value]
    return "  # optional too: " + "; ".join(missing) if missing else ""


def _bare(model: type[BaseModel], doc: dict, indent: int, lines: list[str]) -> None:
    """Like _fields, without the comments (a list's later items)."""
    out: list[str] = []
    _fields(model, doc, indent, out)
    lines += [line for line in out if not line.lstrip().startswith("#")]


def _item_note(model: type[BaseModel], item: dict) -> str:
    metric = item.get("metric")
    if not isinstance(metric, str):
        return ""
    if "op" in model.model_fields:  # a clause
        return "  # " + observations.clause_text(metric)
    role = observations.role(metric)
    return "  # " + (role or "telemetry: shown, not judged")


def describe(model: type[BaseModel], name: str) -> str:
    """What field `name` of `model` means and takes: its description or `#:` comment, else a note on
    the name, else its block's docstring; then its type."""
    info = model.model_fields[name]
    sub = _model_of(info.annotation)
    noted = next((NOTES[k] for k in [f"{c.__name__}.{name}" for c in model.__mro__] + [name] if k in NOTES), None)
    own = None if name in _OURS else info.description or _source_comments(model).get(name)
    text = (own or noted
            or (_first_paragraph(sub.__doc__) if sub is not None else ""))
    kind = _type_text(info.annotation)
    return f"{text} [{kind}]" if text else f"[{kind}]"


@cache
def _source_comments(model: type[BaseModel]) -> dict[str, str]:
    """Field -> its `#:` comment in the model's source (and its bases')."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#:"):
                pending.append(stripped[2:].strip())
                continue
            m = re.match(r"(\w+)\s*:", stripped)
            if m and pending:
                found[m.group(1)] = " ".join(pending)
            pending = []
    return found


def _type_text(tp) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin is typing.Literal:
        return "one of: " + ", ".join(map(str, args)) if len(args) > 1 else f"always {args[0]}"
    if origin in (typing.Union, types.UnionType):
        parts = [_type_text(a) for a in args if a is not type(None)]
        text = " or ".join(dict.fromkeys(parts))
        return text + (", optional" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_text(args[0]).replace('a block', 'blocks')}" if args else "list"
    if origin is dict:
        return f"mapping of name to {_type_text(args[1])}" if args else "mapping"
    if isinstance(tp, type):
        word = next((w for base, w in _TYPE_WORDS if issubclass(tp, base)), None)
        if word is not None:
            return word
    return getattr(tp, "__name__", str(tp))


#: A field type in words, the first base that fits (bool before int, datetime before date: each
#: is a subclass of the next).
_TYPE_WORDS = ((BaseModel, "a block"), (bool, "true or false"), (int, "whole number"), (float, "number"),
               (str, "text"), (datetime, "date-time"), (date, "date, YYYY-MM-DD"))


def _mapping(tp) -> bool:
    """Whether a field holds a mapping of names (`dimensions`, `settings`), not one block."""
    if typing.get_origin(tp) is dict:
        return True
    return any(_mapping(a) for a in typing.get_args(tp) if not isinstance(a, (str, int, float)))


def _model_of(tp) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, in a list, a mapping or an optional)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _flat(model: type[BaseModel], value: dict) -> bool:
    """Whether a block is short and of scalars, so it reads best on one line (`{value: 8, unit: core}`)."""
    return all(not isinstance(v, (dict, list)) for v in value.values()) and len(_flow(value)) <= 80 \
        and len(model.model_fields) <= 4


def _default(info) -> str:
    if info.is_required():
        return ""
    default = info.get_default(call_default_factory=True)
    return "" if default in (None, [], {}) else f", default {_flow(default)}"


def _dimension(key: str) -> str:
    dim = record_dimensions().get(key)
    if dim is None:
        return "not a known dimension"
    if dim.categorical:
        return "categorical: a text value, no unit"
    return "units: " + ", ".join(dim.accepts_units)


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"}


def _key(key: str) -> str:
    return key if _PLAIN.fullmatch(key) and key.lower() not in _WORDS else json.dumps(key)


def _flow(value) -> str:
    """A value as a YAML flow scalar, sequence or mapping."""
    if isinstance(value, str):
        return value if _PLAIN.fullmatch(value) and value.lower() not in _WORDS else json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    text = json.dumps(value)
    if isinstance(value, float) and "e" in text and "." not in text:
        # 5e-06 is a number in YAML 1.2 but text in YAML 1.1; 5.0e-06 is a number in both.
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _comment(text: str, indent: int) -> list[str]:
    pad = " " * indent + "# "
    return [pad + line for line in textwrap.wrap(text, WIDTH - len(pad), break_on_hyphens=False,
                                                 break_long_words=False)]


def _first_paragraph(doc: str | None) -> str:
    return " ".join((inspect.cleandoc(doc or "").split("\n\n") or [""])[0].split())
