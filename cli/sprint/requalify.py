"""`luma sprint requalify`: measure stale boundaries again (luma.experiments.sprint.requalify: the
closed loop, issue 16 item 4); the listing and the trial budget are printed before any trial runs."""

from __future__ import annotations

import json

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import trials
from luma.cli.project import WRITE, project, settings as command_settings
from luma.experiments.sprint.requalify import plan_requalification, run_requalification
from luma.experiments.sprint.run import sprint_trials


@click.command("requalify")
@click.argument("chains", nargs=-1, metavar="[CHAIN]...")
@click.option("--stale", "all_stale", is_flag=True,
              help="Measure again every boundary `luma kb query --name stale-boundaries` lists.")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the new trials and chains (without it nothing goes stale or fresh).")
@format_option(choices=("table", "json"))
@project(WRITE)
def requalify_cmd(chains, all_stale, record, fmt) -> None:
    """Measure stale qualified boundaries again: each CHAIN (a chain IRI or 8+ hex digits of its
    key), or with --stale every open stale boundary, re-run as the sprint that measured it (its
    contract, dimension, levels, intervention and repetitions). The trial budget is printed first.
    Without CHAIN or --stale, only lists what is stale and the optimize runs a hardware change
    calls for. The rules are brought up to date before and after (`luma rules run`)."""
    settings = command_settings()
    err = console(stderr=True)
    req = plan_requalification(settings, list(chains), all_stale)
    rows, proposals, plans, budget = req.stale_rows, req.proposals, req.plans, req.budget
    listing = [{"chain": r["chain"], "contract": r.get("contractName") or _short(r["contract"]),
                "dimension": _short(r["crossed"]), "software": _software(r.get("variant"), r.get("settings")),
                "reason": r["reason"], "newer": r["newer"],
                "newer_software": _software(r.get("newerVariant"), r.get("newerSettings"))} for r in rows]
    plan_rows = [{"contract": p.contract.name, "dimension": p.dimension, "levels": len(p.levels),
                  "intervention": p.intervention, "repetitions": p.repetitions, "max_trials": sprint_trials(p),
                  "chains": ", ".join(t.chain.rsplit("/", 1)[-1][:12] for t in group)} for p, group in plans]
    if fmt == "table":
        _print_listing(listing, proposals, plan_rows, budget, len(plans))
    elif not plans:
        click.echo(json.dumps({"stale": listing, "proposed_optimize": proposals, "plans": [], "trial_budget": 0,
                               "sprints": []}, indent=2))
    if not plans:
        if fmt == "table" and rows and not chains and not all_stale:
            click.echo("run `luma sprint requalify --stale` to measure them again")
        return
    if fmt == "json":
        err.print(f"trial budget: at most {budget} physical trial(s) in {len(plans)} sprint(s)")
    done = run_requalification(req, settings, record, lambda p: trials("sprint run", sprint_trials(p), err))
    sprints = [{"sprint": out["sprint"], "chain_recorded": "yes" if out["chain_recorded"] else "no",
                "min_pass": out["min_pass"], "records_folder": out["records_folder"],
                "requalifies": [t.chain for t in group]} for out, group in done.runs]
    if fmt == "json":
        click.echo(json.dumps({"stale": listing, "proposed_optimize": proposals, "plans": plan_rows,
                               "trial_budget": budget, "sprints": sprints, "still_stale": done.still_stale}, indent=2))
        return
    print_rows(sprints, ["sprint", "min_pass", "chain_recorded", "records_folder"], "table", title="measured again")
    click.echo("still stale: " + (", ".join(done.still_stale) if done.still_stale else "none") if record else
               "not recorded (--no-record): the stale marks stay")


def _print_listing(listing: list[dict], proposals: list[dict], plan_rows: list[dict], budget: int, sprints: int) -> None:
    shown = [{**r, "chain": _key(r["chain"]), "newer": _key(r["newer"])} for r in listing]
    if shown:
        print_rows(shown, ["chain", "contract", "dimension", "software", "reason", "newer", "newer_software"],
                   "table", title="stale boundaries")
    else:
        click.echo("stale boundaries: none")
    if proposals:
        print_rows(proposals, ["contract", "state", "best", "measured_at", "reason"], "table",
                   title="proposed optimize runs (the hardware changed since the optimum)")
        for p in proposals:
            click.echo(f"  luma sprint optimize {p['contract']} --state '{p['state']}'")
    else:
        click.echo("proposed optimize runs: none (every optimum ran on this machine's hardware)")
    if plan_rows:
        print_rows(plan_rows, ["contract", "dimension", "levels", "intervention", "repetitions", "max_trials",
                               "chains"], "table", title="to measure again")
    click.echo(f"trial budget: at most {budget} physical trial(s) in {sprints} sprint(s)")


def _short(iri: str | None) -> str | None:
    return iri.rsplit("/", 1)[-1] if iri else iri


def _key(iri: str) -> str:
    """`chain 965cb94013b1` / `optimum 9e9367a83b91` for a chain, boundary or optimum IRI."""
    parts = iri.removesuffix("/qualified").rsplit("/", 2)
    return f"{parts[-2]} {parts[-1][:12]}"


def _software(variant: str | None, settings: str | None) -> str | None:
    return f"{variant} ({settings})" if variant and settings else variant
