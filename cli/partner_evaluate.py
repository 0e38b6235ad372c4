"""`luma partner evaluate RECORD --contract C --state S`: does a partner's intervention move the
accepted-service frontier after its own costs? Projected with the analytical model
(experiments/model/partner.py), with the frozen experiment matrix a PEX sprint runs to prove it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.model.record import record_option, recorded_line
from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings
from luma.cli.states import parse_state
from luma.errors import ConfigError
from luma.experiments.model import space
from luma.experiments.model.partner_evaluation import evaluate_partner
from luma.experiments.model.recording import record_partner
from luma.reports import partner_figures as figures


def evaluation_options(fn):
    """The options `luma partner evaluate` and `luma report partner` share."""
    options = [
        click.argument("record_ref", metavar="RECORD"),
        click.option("--contract", "contract_ref", default="llm-chat", show_default=True,
                     help="Contract name or path: the model's own (llm-chat, llm-long-context) or a sprint contract of "
                          "a generative service (decoder-kv: its clauses and load, applied to the --llm or --space "
                          "model on the accelerators of --state; its own kv_cache dimension is not modelled)."),
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
    """The evaluation (luma.experiments.model.partner_evaluation) for the shared options; a note
    on stderr when a shipped space stands in for --space."""
    levels = parse_state(state_text)
    try:
        return evaluate_partner(settings(), record_ref, contract_ref, levels, llm_ref, space_ref, repetitions,
                                on_note=lambda note: click.echo(f"note: {note}", err=True))
    except ConfigError as exc:
        if exc.field == "contract":  # a contract the model cannot project: the option's value
            raise click.BadParameter(exc.message, param_hint="--contract") from None
        if exc.field != "space":
            raise
        raise ConfigError(f"no shipped space prices accelerator_type {levels.get('accelerator_type')!r}: give --space "
                          f"SPACE.toml with a [cost] entry for it (shipped: {', '.join(sorted(space.shipped()))})",
                          field="--space") from None


@click.command("evaluate")
@evaluation_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the evaluation and the frozen experiment matrix as JSON.")
@record_option
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def evaluate(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions, out_path, record, fmt) -> None:
    """Project whether the intervention of RECORD (a record file, or an ingested record's hash
    prefix or name) moves the accepted-service frontier of the contract after its own costs:
    minimum machine state, concurrency, accelerator count, memory tier, cost and energy per
    accepted output, the binding resource next; with the experiment matrix that proves it."""
    evaluation = run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions)
    doc = evaluation.doc
    if record:
        doc["recorded"] = record_partner(settings(), doc, evaluation.record, evaluation.context())
    if out_path:
        out_path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
        return

    rows = [dict(zip(("figure", "at", "baseline", "intervention", "change"), r, strict=True))
            for r in figures.rows(doc)]
    state = ", ".join(f"{k}={v}" for k, v in doc["state"].items())
    rec = doc["record"]
    print_rows(rows, ["figure", "at", "baseline", "intervention", "change"], "table",
               title=f"{rec['partner']}/{rec['name']}@{rec['version']} on {doc['contract']} ({doc['model']}; {state})")
    click.echo(f"verdict: {doc['verdict']} (after the intervention's own costs; {figures.prices_text(doc)})")
    for r in doc["reasons"]:
        click.echo(f"  - {r}")
    print_rows([{"model input": k, "value": v} for k, v in figures.input_rows(doc["effects"])],
               ["model input", "value"], "table", title="the record as the model applied it")
    b = doc["matrix"]["candidate_boundary"]
    click.echo("candidate boundary (accelerator_count PASS/FAIL): baseline "
               f"{b['baseline']['accelerator_count']['pass']}/{b['baseline']['accelerator_count']['fail']}, intervention "
               f"{b['intervention']['accelerator_count']['pass']}/{b['intervention']['accelerator_count']['fail']}; "
               f"matrix {doc['matrix']['sha256'][:12]} ({doc['matrix']['repetitions']} repetitions per state)")
    click.echo(f"evidence: {doc['evidence_class']}" + (f"; written to {out_path}" if out_path else ""))
    for note in doc["notes"]:
        click.echo(f"note: {note}")
    recorded_line(doc.get("recorded"))
