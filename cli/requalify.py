"""`luma sprint requalify`: measure stale boundaries again (the closed loop, issue 16 item 4)."""

from __future__ import annotations

import json

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project


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
    from rich.console import Console

    from luma.cli.project import settings as command_settings
    from luma.cli.sprint import execute, import_service, sprint_trials
    from luma.experiments.sprint import records, requalify
    from luma.experiments.sprint import pex as sprint_mod
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.rules.engine import Engine

    settings = command_settings()
    err = Console(stderr=True)
    with KnowledgeBase.open(settings) as kb:
        picked = requalify.chains_named(kb, list(chains)) if chains else []  # before anything changes
        Engine(kb).run()
        left = requalify.unqualified(kb, picked)
        if left:
            raise click.ClickException(f"chain {left[0]} is no qualified boundary (`luma kb query --name "
                                       "qualified-boundaries` lists them): nothing to measure again")
        rows = requalify.stale_rows(kb)
        if all_stale:
            picked += [r["chain"] for r in rows if r["chain"] not in picked]
        hashes = requalify.chain_hashes(kb, picked)
        folders = requalify.sprint_folders(settings.home) if picked else {}
        targets = [requalify.target(settings, c, hashes[c], folders, kb.ledger) for c in picked]
        proposals = requalify.proposed_optimizations(kb, records.architecture(), records.environment())
    for t in targets:
        t.stale = [r for r in rows if r["chain"] == t.chain]
    plans, runs = [], {}
    for t in targets:  # boundaries of one sprint set-up are measured again by one sprint
        runs.setdefault(t.key(), []).append(t)
    for group in runs.values():
        t = group[0]
        import_service(t.contract)
        plan = sprint_mod.plan(t.contract, t.dimension, t.levels, t.intervention, t.repetitions)
        plans.append((plan, group))
    budget = sum(sprint_trials(p) for p, _ in plans)
    listing = [{"chain": r["chain"], "contract": r.get("contractName") or _short(r["contract"]),
                "dimension": _short(r["crossed"]), "software": _software(r.get("variant"), r.get("settings")),
                "reason": r["reason"], "newer": r["newer"],
                "newer_software": _software(r.get("newerVariant"), r.get("newerSettings"))} for r in rows]
    plan_rows = [{"contract": p.contract.name, "dimension": p.dimension, "levels": len(p.levels),
                  "intervention": p.intervention, "repetitions": p.repetitions, "max_trials": sprint_trials(p),
                  "chains": ", ".join(t.chain.rsplit("/", 1)[-1][:12] for t in group)} for p, group in plans]
    if fmt == "table":
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
        if plans:
            print_rows(plan_rows, ["contract", "dimension", "levels", "intervention", "repetitions", "max_trials",
                                   "chains"], "table", title="to measure again")
        click.echo(f"trial budget: at most {budget} physical trial(s) in {len(plans)} sprint(s)")
    elif not plans:
        click.echo(json.dumps({"stale": listing, "proposed_optimize": proposals, "plans": [], "trial_budget": 0,
                               "sprints": []}, indent=2))
    if not plans:
        if fmt == "table" and rows and not chains and not all_stale:
            click.echo("run `luma sprint requalify --stale` to measure them again")
        return
    if fmt == "json":
        err.print(f"trial budget: at most {budget} physical trial(s) in {len(plans)} sprint(s)")
    done = []
    for plan, group in plans:
        out = execute(plan, settings, record, err)
        done.append({"sprint": out["sprint"], "chain_recorded": "yes" if out["chain_recorded"] else "no",
                     "min_pass": out["min_pass"],
                     "records_folder": out["records_folder"], "requalifies": [t.chain for t in group]})
    still = []
    if record:
        with KnowledgeBase.open(settings) as kb:
            Engine(kb).run()
            open_now = {r["chain"] for r in requalify.stale_rows(kb)}
        still = [t.chain for t in targets if t.chain in open_now]
    if fmt == "json":
        click.echo(json.dumps({"stale": listing, "proposed_optimize": proposals, "plans": plan_rows,
                               "trial_budget": budget, "sprints": done, "still_stale": still}, indent=2))
        return
    print_rows(done, ["sprint", "min_pass", "chain_recorded", "records_folder"], "table", title="measured again")
    click.echo("still stale: " + (", ".join(still) if still else "none") if record else
               "not recorded (--no-record): the stale marks stay")


def _short(iri: str | None) -> str | None:
    return iri.rsplit("/", 1)[-1] if iri else iri


def _key(iri: str) -> str:
    """`chain 965cb94013b1` / `optimum 9e9367a83b91` for a chain, boundary or optimum IRI."""
    parts = iri.removesuffix("/qualified").rsplit("/", 2)
    return f"{parts[-2]} {parts[-1][:12]}"


def _software(variant: str | None, settings: str | None) -> str | None:
    return f"{variant} ({settings})" if variant and settings else variant
