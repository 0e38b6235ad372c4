"""Resume a killed pilot run as a use case (`luma pilot run --resume RUN` calls it): the run's
folder and configuration, its decisions so far, and a check that every state of its library is
still qualified."""

from __future__ import annotations

import json
from datetime import datetime

from luma import names
from luma.errors import ConfigError
from luma.experiments.pilot import run as pilot_run


def prepare_resume(settings, run_id: str):
    """The context (`run.prepare`) of pilot run `run_id`, continuing after its last decision;
    ConfigError when there is no such run or a state of its library is no longer qualified."""
    # The run's folder is read and written: RUN, and the run ID its run.json names, stay
    # inside the project (luma/names.py).
    folder = names.inside(settings.home, pilot_run.folder_of(settings, names.check_name(run_id, field="resume")),
                          field="resume")
    if not (folder / "run.json").is_file():
        raise ConfigError(f"no pilot run {run_id!r} to resume (no {folder / 'run.json'})", field="resume")
    cfg = json.loads((folder / "run.json").read_text())
    names.check_name(cfg.get("run"), source=str(folder / "run.json"), field="run")
    done = len(list(folder.glob("decision-*.json")))
    ctx = pilot_run.prepare(settings, cfg["contract"], trace_ref=cfg["trace"], duration=cfg["duration"],
                            rate_scale=cfg["rate_scale"], window_s=cfg["window_s"], price_path=cfg["price_table"],
                            seed=cfg["seed"], margin=cfg["margin"], run_id=cfg["run"], orphan_s=cfg["orphan_s"],
                            started=datetime.fromisoformat(cfg["started"]), decisions_done=done)
    # Every option of the original run holds (a run.json from before they were kept: the defaults).
    ctx.baselines, ctx.record = bool(cfg.get("baselines", True)), bool(cfg.get("record", True))
    missing = sorted(set(cfg["library"]) - {x.key for x in ctx.library})
    if missing:
        raise ConfigError(f"state(s) {', '.join(missing)} of the run left the library since it started "
                          "(stale or revoked): the run cannot resume", field="resume")
    return ctx


#: run.json's key of each `luma pilot run` option a resume keeps.
OPTIONS = {"contract_ref": "contract", "trace_ref": "trace", "duration": "duration", "rate_scale": "rate_scale",
           "window_s": "window_s", "price_path": "price_table", "margin": "margin", "seed": "seed",
           "baselines": "baselines", "record": "record"}


def conflicts(ctx, given: dict) -> list[str]:
    """The options given to a resume (option name -> value) that differ from the run's own."""
    kept = run_options(ctx)
    return [name for name, value in given.items() if name in OPTIONS and kept.get(OPTIONS[name]) != value]


def run_options(ctx) -> dict:
    """The options a run was started with, as run.json keeps them."""
    return {"contract": ctx.contract_ref, "trace": ctx.trace_ref, "duration": ctx.duration,
            "rate_scale": ctx.rate_scale, "window_s": ctx.window_s, "price_table": ctx.price_path,
            "margin": ctx.guard.margin, "seed": ctx.seed, "baselines": ctx.baselines, "record": ctx.record}
