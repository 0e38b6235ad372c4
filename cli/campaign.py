"""`luma campaign`: contracts × machine classes on a Ray cluster of runners -- plan, run,
status, cancel (experiments/fleet/)."""

from __future__ import annotations

import json
import os

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import Tracker
from luma.cli.project import NONE, READ, WRITE, project, require, settings
from luma.cli.ray_session import on_cluster
from luma.errors import ConfigError
from luma.experiments.fleet import campaign as campaigns, planner
from luma.experiments.fleet.head import Head, done_units, folder, saved_states


_UNIT_COLUMNS = ["unit", "machine_class", "status", "attempts", "host", "node", "key", "wall_s", "trials", "min_pass",
                 "adjacent_fail", "recovered", "frontier", "chain", "note"]


def _load(path: str):
    return campaigns.load(path, settings())


@click.command("plan")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--cluster", metavar="ADDRESS", help="Count the live trusted runners of each class on this Ray "
                                                   "cluster (default: the file's `machines`).")
@format_option()
@project(NONE)
def plan_cmd(file: str, cluster: str | None, fmt: str) -> None:
    """Sprints, most trials and expected wall time per machine class of the campaign FILE."""
    c = _load(file)
    machines = untrusted = None
    if cluster:
        require()
        with on_cluster(settings()):
            machines, untrusted = planner.cluster_machines(c, settings(), cluster)
    out = planner.plan(c, machines, untrusted)
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    t = out["total"]
    rows = out["classes"] + [{"class": "all", "machines": t["machines"], "sprints": t["sprints"],
                              "max_trials": t["max_trials"], "serial_s": t["serial_s"], "wall_s": t["wall_s"],
                              "note": f"budget {t['trial_budget']} trials; {t['trial_seconds']:g} s per trial"}]
    print_rows(rows, ["class", "labels", "machines", "sprints", "max_trials", "serial_s", "wall_s", "note"], fmt,
               title=f"campaign {out['campaign']}: plan")


@click.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--cluster", metavar="ADDRESS", required=True,
              help="The Ray cluster's address (host:port of its head, as `ray start --head` printed it).")
@format_option()
@project(WRITE)
def run_cmd(file: str, cluster: str, fmt: str) -> None:
    """Run the campaign FILE on the cluster: each sprint on a trusted runner of its class, its
    signed records ingested here all at once. Running the same file again resumes it: sprints
    the ledger already holds are not run again."""

    c = _load(file)
    err = console(stderr=True)
    earlier = done_units(settings(), c)
    err.print(f"campaign {c.id}: {len(c.units)} sprints on {cluster}"
              + (f" ({len(earlier)} recorded by an earlier run)" if earlier else ""), highlight=False, markup=False)
    with _progress(len(c.units) - len(earlier), err) as progress, on_cluster(settings()):
        state = Head(c, settings(), cluster, note=progress).run()
    _show(state, fmt)
    if state["status"] != "completed":
        raise SystemExit(1)


def _progress(sprints: int, console):
    """The live line of a campaign: sprints finished of those to run, elapsed, ETA; each
    finished sprint's line stays on screen."""
    class Sprints(Tracker):
        def __call__(self, message: str) -> None:
            super().__call__(message)
            self.log(f"  {message}")

    return Sprints("campaign run", [("sprint", 1.0)] * max(sprints, 1), unit="sprint", ends=lambda m: True,
                   console=console)


def _show(state: dict, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(state, indent=2))
        return
    print_rows(state["units"], _UNIT_COLUMNS, fmt, title=f"campaign {state['id']}: {state['status']}")
    if fmt == "table":
        par = state.get("parallelism")
        click.echo(f"wall {state['wall_s']:.1f} s; the sprints' own times add up to {state['sum_of_units_s']:.1f} s"
                   + (f" (parallelism ×{par:.2f})" if par else "") + f"; {state['trials']} trials "
                   f"of a budget of {state['trial_budget']}")


def _states(home) -> list[dict]:
    return [_alive(state) for state in saved_states(home)]


def _find(home, campaign_id: str) -> dict:
    """The state of campaign `campaign_id`; a ConfigError naming the known ones otherwise."""
    states = _states(home)
    match = [st for st in states if st["id"] == campaign_id]
    if not match:
        known = ", ".join(st["id"] for st in states) or "none"
        raise ConfigError(f"no campaign {campaign_id!r} in {home} (known: {known})", field="ID")
    return match[0]


def _alive(state: dict) -> dict:
    """A state that says running while its head process is gone (same host) was interrupted."""
    import socket

    if state.get("status") == "running" and state.get("host") == socket.gethostname():
        try:
            os.kill(int(state["pid"]), 0)
        except (OSError, ValueError, KeyError):
            state["status"] = "interrupted"
    return state


@click.command("status")
@click.argument("campaign_id", metavar="ID", required=False)
@format_option()
@project(READ)
def status_cmd(campaign_id: str | None, fmt: str) -> None:
    """The campaigns of this project, or one campaign's sprints (ID as `luma campaign run` named it)."""
    s = require()
    if campaign_id is None:
        states = _states(s.home)
        rows = [{"id": st["id"], "status": st["status"], "started": st["started"],
                 "done": sum(u["status"] == "done" for u in st["units"]), "sprints": len(st["units"]),
                 "trials": st.get("trials"), "wall_s": st.get("wall_s")} for st in states]
        print_rows(rows, ["id", "status", "started", "done", "sprints", "trials", "wall_s"], fmt, title="campaigns")
        return
    _show(_find(s.home, campaign_id), fmt)


@click.command("cancel")
@click.argument("campaign_id", metavar="ID")
@project(READ)
def cancel_cmd(campaign_id: str) -> None:
    """Stop campaign ID: its head cancels the sprints still queued or running (their records are
    never taken in); what is already recorded stays. `luma campaign run` on its file resumes it."""
    s = require()
    st = _find(s.home, campaign_id)
    (folder(s.home, campaign_id) / "cancel").write_text("cancel\n")
    if st["status"] == "running":
        click.echo(f"campaign {campaign_id}: cancel asked; its head (pid {st['pid']} on {st['host']}) stops "
                   "its sprints within a second")
    else:
        was, st["status"] = st["status"], "cancelled"
        (folder(s.home, campaign_id) / "state.json").write_text(json.dumps(st, indent=1))
        click.echo(f"campaign {campaign_id} was {was}: marked cancelled")
