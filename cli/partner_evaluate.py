"""`luma partner evaluate RECORD --contract C --state S`: does a partner's intervention move the
accepted-service frontier after its own costs? Projected with the analytical model
(experiments/model/partner.py), with the frozen experiment matrix a PEX sprint runs to prove it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows


def _record(ref: str):
    """(InterventionParameters, source) from a record file, or from the project's ledger by
    content-hash prefix or record name (a record `luma partner add` ingested)."""
    from luma.settings import Settings

    home = Settings.from_env().home
    path = Path(ref)
    if path.is_file():
        from luma.kb.partners import read_partner_files

        loaded = read_partner_files([path], None, home)
        if len(loaded) != 1:
            from luma.errors import RecordError

            raise RecordError(f"holds {len(loaded)} records; evaluate one at a time", source=str(path))
        return loaded[0].model, str(path)
    from luma.kb.ledger import Ledger
    from luma.kb.partners import read_ledger

    from luma.errors import UnknownName

    settings = Settings.from_env()
    if settings.db_url.startswith("sqlite:///") and not Path(settings.db_url[len("sqlite:///"):]).is_file():
        raise UnknownName(f"no record file {ref!r}, and the project has no ledger to look it up in", field="RECORD")
    ledger = Ledger(settings.db_url)
    try:
        entry = read_ledger(ledger).find(ref)
    finally:
        ledger.dispose()
    return entry.record, f"ledger:{entry.content_hash[:12]}"


def _fmt(v, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, str):
        return v
    if unit == "B":
        return f"{v / 1e9:,.1f} GB"
    if unit == "s":
        return f"{v * 1e3:,.2f} ms"
    if unit == "J":
        return f"{v:,.4g} J"
    return f"{v:,.4g}"


def evaluation_options(fn):
    """The options `luma partner evaluate` and `luma report partner` share."""
    options = [
        click.argument("record_ref", metavar="RECORD"),
        click.option("--contract", "contract_ref", default="llm-chat", show_default=True,
                     help="Contract name or path (the model's own, e.g. llm-chat, or a sprint contract)."),
        click.option("--state", "state_text", help="Machine state, e.g. "
                     "'accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8' (as `luma model "
                     "predict`)."),
        click.option("--llm", "llm_ref", help="The LLM served (preset such as llama-2-70b, or a config.json path); "
                     "default: the --space file's model."),
        click.option("--space", "space_ref", help="A space file whose machines, prices, quality and accelerator "
                     "counts to use."),
        click.option("--repetitions", type=click.IntRange(1, 20), help="Repetitions per state in the experiment "
                     "matrix (default: the contract's sprint setting, else 3)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions):
    """(the evaluation as a dict, the InterventionParameters record) for the shared options."""
    from luma.cli.model import _calibration, _contract
    from luma.cli.states import parse_state
    from luma.experiments.model import partner, space

    levels = parse_state(state_text)
    record, source = _record(record_ref)
    c = _contract(contract_ref)
    base = space.load(space_ref, c) if space_ref else None
    ev = partner.evaluate(record, c, levels, llm_ref=llm_ref, base=base, calibration=_calibration(),
                          source=source, repetitions=repetitions)
    return ev.as_dict(), record


@click.command("evaluate")
@evaluation_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the evaluation and the frozen experiment matrix as JSON.")
@format_option(choices=("table", "json"))
def evaluate(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions, out_path, fmt) -> None:
    """Project whether the intervention of RECORD (a record file, or an ingested record's hash
    prefix or name) moves the accepted-service frontier of the contract after its own costs:
    minimum machine state, concurrency, accelerator count, memory tier, cost and energy per
    accepted output, the binding resource next; with the experiment matrix that proves it."""
    doc, _ = run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions)
    if out_path:
        out_path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    ch = doc["changes"]
    units = {"memory_need_per_device": "B", "energy_per_request": "J", "energy_per_token": "J"}
    rows = []
    for key in ("accelerator_count", "max_concurrency", "memory_need_per_device", "binding", "binds_next",
                "cost_per_hour", "cost_per_request", "cost_per_token", "energy_per_request", "energy_per_token"):
        d = ch[key]
        change = d.get("change")
        rows.append({"figure": key, "baseline": _fmt(d["before"], units.get(key, "")),
                     "intervention": _fmt(d["after"], units.get(key, "")),
                     "change": "" if change is None else f"{change:+.1%}"})
    tier = ch["memory_tier"]
    rows.append({"figure": "memory_tier", "baseline": tier["before"]["tier"], "intervention": tier["after"]["tier"],
                 "change": ""})
    state = ", ".join(f"{k}={v}" for k, v in doc["state"].items())
    rec = doc["record"]
    print_rows(rows, ["figure", "baseline", "intervention", "change"], "table",
               title=f"{rec['partner']}/{rec['name']}@{rec['version']} on {doc['contract']} ({doc['model']}; {state})")
    click.echo(f"verdict: {doc['verdict']} (after the intervention's own costs; cost in {doc['cost_unit']})")
    for r in doc["reasons"]:
        click.echo(f"  - {r}")
    b = doc["matrix"]["candidate_boundary"]
    click.echo("candidate boundary (accelerator_count PASS/FAIL): baseline "
               f"{b['baseline']['accelerator_count']['pass']}/{b['baseline']['accelerator_count']['fail']}, intervention "
               f"{b['intervention']['accelerator_count']['pass']}/{b['intervention']['accelerator_count']['fail']}; "
               f"matrix {doc['matrix']['sha256'][:12]} ({doc['matrix']['repetitions']} repetitions per state)")
    click.echo(f"evidence: {doc['evidence_class']}" + (f"; written to {out_path}" if out_path else ""))
    for note in doc["notes"]:
        click.echo(f"note: {note}")
