"""`luma report`: the Resource Boundary Report and the Design-In Report, as Markdown and as one
self-contained HTML page (plots inline as SVG) in an output folder; the Partner Evaluation Report
and the Economic Control Report of a pilot run likewise."""

from __future__ import annotations

import time
from pathlib import Path

import click

from luma.cli.partner_evaluate import evaluation_options, run_evaluation
from luma.cli.project import NONE, READ, project, require, settings, where
from luma.errors import ConfigError, LumaError
from luma.kb.query.scope import Scope
from luma.reports.build import boundary_report, design_in_report, partner_report, pilot_report

_OUT = click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
                    help="Folder to write report.md, report.html and plots/*.svg into (created if missing).")


def _written(written, start: float) -> None:
    for path in written.paths():
        click.echo(str(path))
    click.echo(f"read, drew and rendered in {time.perf_counter() - start:.2f} s", err=True)


@click.command("boundary")
@click.argument("chain", required=False)
@click.option("--sprint", "sprint", default=None, help="The chain recorded by this sprint (its id, as `luma sprint "
              "run` prints it).")
@click.option("--latest", is_flag=True, help="The most recently ingested qualified chain (the default).")
@_OUT
@project(READ)
def boundary_cmd(chain: str | None, sprint: str | None, latest: bool, out: Path) -> None:
    """Resource Boundary Report of one PEX chain: CHAIN (an IRI such as id:chain/…), --sprint ID,
    or --latest qualified chain."""
    if sum(bool(x) for x in (chain, sprint, latest)) > 1:
        raise click.UsageError("give one of CHAIN, --sprint ID or --latest")
    start = time.perf_counter()
    _written(boundary_report(require(), out, chain=chain, sprint=sprint), start)


@click.command("design-in")
@click.option("--scope", default="owner", show_default=True,
              help="Whose view: owner (everything) or partner:NAME (public graphs and that partner's own). "
                   "A view, not access control: see docs/security.md.")
@click.option("--max-rows", type=click.IntRange(1, 10_000), default=25, show_default=True,
              help="Rows per long table, and requirements whose derivation is drawn.")
@click.option("--prices", "prices_path", type=click.Path(path_type=Path), default=None,
              help="Price table (TOML: core_hour, memory_gib_hour, kwh, accelerator_hour.TYPE, each with currency, "
                   "source and date; or a model space file's [cost]) for the lifetime economics. Default: the "
                   "shipped EXAMPLE table (kb/examples/prices.toml), labelled as examples in the report.")
@_OUT
@project(READ)
def design_in_cmd(scope: str, max_rows: int, prices_path: Path | None, out: Path) -> None:
    """Design-In Report: hardware requirements, their candidate capability classes ranked by support x
    economic gain, the lifetime economics (projected, with every price's source), counter-evidence,
    recurring remedies, derivations, and the evidence of each class (needs `luma rules run` first)."""
    start = time.perf_counter()
    try:
        written = design_in_report(require(), out, Scope.parse(scope), max_rows, prices_path)
    except LumaError as exc:
        if exc.field != "scope":
            raise
        raise click.ClickException(f"--scope: {exc.message}") from None
    _written(written, start)


@click.command("partner")
@evaluation_options
@click.option("--scope", default="owner", show_default=True,
              help="Whose view: owner, or partner:NAME (then RECORD must be that partner's). "
                   "A view, not access control: see docs/security.md.")
@_OUT
@project(NONE)
def partner_cmd(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions, scope: str, out: Path) -> None:
    """Partner Evaluation Report of RECORD (a record file, or an ingested record's hash prefix or
    name): the partner's stated figures, the projected frontier change after its own costs, and
    the frozen experiment matrix (also written as matrix.json) that a PEX sprint runs to prove it."""
    start = time.perf_counter()
    wanted = Scope.parse(scope)
    evaluation = run_evaluation(record_ref, contract_ref, state_text, llm_ref, space_ref, repetitions)
    try:
        written, matrix = partner_report(evaluation, out, wanted)
    except ConfigError as exc:
        if exc.field != "scope":
            raise
        raise ConfigError(exc.message, field="--scope") from None
    _written(written, start)
    click.echo(str(matrix))


@click.command("pilot")
@click.argument("run", required=False)
@click.option("--latest", is_flag=True, help="The newest run under $LUMA_HOME/pilots/ (the default).")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to write report.md, report.html and plots/*.svg into (created if missing). Default: "
                   "report/ beside the run's pilot.json.")
@project(READ)
def pilot_cmd(run: str | None, latest: bool, out: Path | None) -> None:
    """Economic Control Report of one pilot run (`luma pilot run`), from its pilot.json alone: RUN
    (a run id under $LUMA_HOME/pilots/, or a pilot.json or its folder), or the --latest run. The
    acceptance figures, setup, a timeline plot, every decision, the realized value against the
    static-largest and hindsight-best baselines, the state library and each figure's evidence class."""
    if run and latest:
        raise click.UsageError("give RUN or --latest, not both")
    start = time.perf_counter()
    # A path needs no project; a run id or --latest is looked up in the project's pilots/ folder.
    _written(pilot_report(settings(), run, out, source=where()), start)
