"""`luma partner evaluate RECORD --contract C --state S`: does a partner's intervention move the
accepted-service frontier after its own costs? Projected with the analytical model
(experiments/model/partner.py), with the frozen experiment matrix a PEX sprint runs to prove it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.model_record import record_option, recorded_line
from luma.cli.project import WRITE, project


def _record(ref: str):
    """(InterventionParameters, source) from a record file, or from the project's ledger by
    content-hash prefix or record name (a record `luma partner add` ingested)."""
    from luma.cli.project import settings as command_settings

    settings = command_settings()
    path = Path(ref)
    if path.is_file():
        from luma.kb.records.input_files import PARTNER_FILE
        from luma.kb.trust.partners import read_partner_files

        loaded = read_partner_files([path], None, settings.home, PARTNER_FILE.under(settings))
        if len(loaded) != 1:
            from luma.errors import RecordError

            raise RecordError(f"holds {len(loaded)} records; evaluate one at a time", source=str(path))
        return loaded[0].model, str(path)
    from luma.kb.store.ledger import Ledger
    from luma.kb.trust.partners import read_ledger

    from luma.errors import UnknownName

    if settings.db_url.startswith("sqlite:///") and not Path(settings.db_url[len("sqlite:///"):]).is_file():
        raise UnknownName(f"no record file {ref!r}, and the project has no ledger to look it up in", field="RECORD")
    ledger = Ledger(settings.db_url)
    try:
        entry = read_ledger(ledger).find(ref)
    finally:
        ledger.dispose()
    return entry.record, f"ledger:{entry.content_hash[:12]}"


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


def _state_level(state_text: str | None, dimension: str) -> str | None:
    for part in (state_text or "").split(","):
        dim, sep, value = part.partition("=")
        if sep and dim.strip() == dimension:
            return value.strip()
    return None


def default_space(contract, state_text: str | None, llm_ref: str | None):
    """The space an evaluation without --space uses: the first shipped LLM space (by name) that
    fits the contract and prices the state's accelerator_type — its model (unless --llm),
    prices, quality per precision and accelerator counts. None for a contract that is not an
    LLM's, or with --llm when no shipped space prices the accelerator."""
    from luma.cli.project import settings
    from luma.errors import ConfigError
    from luma.experiments.model import space

    if contract.service != "decoder":
        return None  # the evaluation itself says what it needs
    wanted = _state_level(state_text, "accelerator_type")
    for name, path in sorted(space.shipped().items()):
        try:
            candidate = space.load(path, contract, project=settings())
        except ConfigError:
            continue  # a space for another kind of contract
        if not candidate.is_llm or (wanted is not None and wanted not in candidate.cost):
            continue
        click.echo(f"note: no --space given: the shipped space {name} supplies "
                   f"{'the prices' if llm_ref else 'the model (' + candidate.model.name + '), the prices'}, quality per "
                   "precision and accelerator counts", err=True)
        return candidate
    if llm_ref:
        return None
    raise ConfigError(f"no shipped space prices accelerator_type {wanted!r}: give --space SPACE.toml with a [cost] "
                      f"entry for it (shipped: {', '.join(sorted(space.shipped()))})", field="--space")


def run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions, context: dict | None = None):
    """(the evaluation as a dict, the InterventionParameters record) for the shared options;
    `context`, when given, receives the contract, the state's space and the record's source (what
    `--record` predicts the evaluation's states with)."""
    from luma.cli.model import _calibration, _contract
    from luma.cli.project import settings
    from luma.cli.states import parse_state
    from luma.experiments.model import partner, space

    levels = parse_state(state_text)
    record, source = _record(record_ref)
    c = _contract(contract_ref)
    base = space.load(space_ref, c, project=settings()) if space_ref else default_space(c, state_text, llm_ref)
    ev = partner.evaluate(record, c, levels, llm_ref=llm_ref, base=base, calibration=_calibration(),
                          source=source, repetitions=repetitions, project=settings())
    if context is not None:
        context.update(contract=c, state=space.from_state(levels, c, llm_ref, base, settings()), source=source)
    return ev.as_dict(), record


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
    context: dict = {}
    doc, parameters = run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions, context)
    if record:
        from luma.cli.model_record import record_partner

        doc["recorded"] = record_partner(doc, parameters, context)
    if out_path:
        out_path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    from luma.reports import partner_figures as figures

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
