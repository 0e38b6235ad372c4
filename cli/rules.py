"""`luma rules`: list, check and run the declarative rule set over the knowledge base."""

from __future__ import annotations

import json

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, READ, project, require, settings as command_settings
from luma.errors import BadParam, BelowFloor, ConfigError, RuleError
from luma.kb.knowledge_base import KnowledgeBase
from luma.rules import exploratory as explore
from luma.rules.analysis import analyse_cached, strata
from luma.rules.isolated_run import RuleProcess, RunLimits, run_rules, runs_isolated
from luma.rules.loader import load_all, resolve_params
from luma.rules.sealing import refuse_unsealed
from luma.settings import MIN_QUERY_MEMORY, parse_size, rules_cache


def _load():
    # Analyses kept in the machine's cache (a rule text that does not analyse is never kept, so
    # its error comes every time): `check` and `list` then answer at once (~3 s of rdflib parsing
    # of the shipped rules before).
    shared = rules_cache() / "analysis"
    analysed = [analyse_cached(r, None, shared) for r in load_all(command_settings().home / "rules")]
    refuse_unsealed(analysed)
    return analysed, strata(analysed)


@click.command("list")
@format_option(choices=("table", "json"))
@project(NONE)
def list_cmd(fmt: str) -> None:
    """The rules, in the order they run, with their parameters."""
    _, ordered = _load()
    rows = [{"stratum": n, "id": a.rule.id, "version": a.rule.version, "file": a.rule.path,
             "parameters": ", ".join(f"{p.name}={p.default}" + (f" (>= {a.rule.floors[p.name][0]:g})"
                                                              if p.name in a.rule.floors else "")
                                     for p in a.rule.params.values()),
             "description": a.rule.description if fmt == "json" else a.rule.description.split(". ")[0]}
            for n, stratum in enumerate(ordered, 1) for a in stratum]
    print_rows(rows, ["stratum", "id", "version", "parameters", "description"], fmt, title="rules")


@click.command("check")
@project(NONE)
def check_cmd() -> None:
    """Validate every rule file and the dependency graph (no cycle through negation)."""
    analysed, ordered = _load()
    click.echo(f"{len(analysed)} rule(s) in {len(ordered)} strata: all valid")


def _overrides(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected name=value, got {v!r}", param_hint="--param")
        out[name.strip()] = value.strip()
    return out


@click.command("run")
@click.option("--param", "params", multiple=True, help="Override a parameter: name=value or rule-id.name=value. "
              "A value below the rule's floor (see `luma rules list`) is refused unless --exploratory.")
@click.option("--full", is_flag=True, help="Recompute every rule from the store (ignore what the last run kept).")
@click.option("--exploratory", is_flag=True,
              help="Run on a copy of the KB ($LUMA_HOME/kb-exploratory) where parameters may go below their "
                   "floors; nothing of it reaches the KB's queries or reports (`luma kb query --exploratory`, "
                   "`luma kb explain --exploratory` read it).")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Threads for strata that do not depend on each other  [default: usable cores, at most 4]")
@click.option("--timeout", type=click.FloatRange(min=0.001), default=None,
              help="Seconds before the run is stopped (default: $LUMA_RULES_TIMEOUT, else 3600).")
@click.option("--memory", default=None, metavar="SIZE",
              help="Memory the run may use, e.g. 2GiB (default: $LUMA_RULES_MEMORY, else 8GiB).")
@format_option(choices=("table", "json"))
@project(READ)
def run_cmd(params: tuple[str, ...], full: bool, exploratory: bool, workers: int | None, timeout: float | None,
            memory: str | None, fmt: str) -> None:
    """Derive: every stratum to its fixpoint; prints per rule its results (nodes of the class it
    derives: new, changed, removed), its quads, how it was evaluated (full, delta = over new
    records only, skip = nothing it reads changed), with timing.

    Rule files are checked as queries are (no SERVICE, no update). On the embedded store the run
    goes to a child process without network access, stopped at --timeout or --memory; a stopped
    or failed run leaves the derived facts as they were."""
    overrides = _overrides(params)
    settings = command_settings()
    try:
        memory_bytes = parse_size(memory, "--memory", settings.rules_memory, MIN_QUERY_MEMORY)
    except ConfigError as exc:
        raise click.BadParameter(exc.message, param_hint="--memory") from None
    limits = RunLimits.of(settings, timeout, memory_bytes)
    try:  # checked before the KB is opened: a usage error touches nothing (not even the exploratory copy)
        resolve_params(load_all(settings.home / "rules"), overrides, exploratory=exploratory)
    except BadParam as exc:
        where = f"{exc.field}: " if exc.field and exc.field != "param" else ""
        hint = " (or run it --exploratory)" if isinstance(exc, BelowFloor) else ""
        raise click.BadParameter(where + exc.message + hint, param_hint="--param") from None
    # Started now, so that its imports overlap opening the KB.
    child = RuleProcess().start() if runs_isolated(settings) else None
    try:
        with KnowledgeBase.open(require()) as kb:
            report = run_rules(kb, limits, overrides, full=full, workers=workers, exploratory=exploratory,
                               process=child)
    except BelowFloor as exc:
        raise click.BadParameter(f"{exc.message} (--exploratory)", param_hint="--param") from None
    except BadParam as exc:  # an unknown name, a value of the wrong type: usage
        raise click.BadParameter(exc.message, param_hint="--param") from None
    except RuleError as exc:
        if exc.field not in ("timeout", "memory"):
            raise
        raise click.ClickException(f"--{exc.field}: {exc.message}") from None  # the limit, by its flag
    finally:
        if child is not None:
            child.close()
    if exploratory:
        click.echo(f"exploratory run in {explore.store_path(kb.settings.home).parent}: its facts are not in the "
                   "KB's queries or reports", err=True)
    rows = [{"stratum": r.stratum, "rule": r.rule, "derives": _local(r.result_class), "derived": r.derived,
             "new": r.derived_new, "changed": r.derived_changed, "removed": r.derived_removed, "quads": r.facts,
             "quads new": r.new, "quads removed": r.removed, "how": r.mode, "rounds": r.rounds,
             "seconds": round(r.seconds, 3)} for r in report.runs]
    if fmt == "json":
        click.echo(json.dumps({"rules": [{k.replace(" ", "_"): v for k, v in row.items()} for row in rows],
                               "new": report.derived_new, "changed": report.derived_changed,
                               "removed": report.derived_removed, "quads_new": report.new,
                               "quads_removed": report.removed, "seconds": round(report.seconds, 3),
                               "changes_from": report.changes_from}, indent=2))
        return
    print_rows(rows, ["stratum", "rule", "derives", "derived", "new", "changed", "removed", "quads", "how", "rounds",
                      "seconds"], "table", title="rules run")
    click.echo(f"{report.derived_new} new, {report.derived_changed} changed and {report.derived_removed} removed "
               f"result(s) in {report.seconds:.2f} s ({report.new} quad(s) written and {report.removed} deleted, "
               "the derivations' bookkeeping included)")


def _local(iri: str | None) -> str:
    """A result class by its local name (luma:HardwareRequirement -> HardwareRequirement)."""
    return iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1] if iri else "—"
