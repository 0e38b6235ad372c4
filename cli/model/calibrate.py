"""`luma model calibrate`: a short design of trials per contract on this host, the model's
efficiency figures fitted to them, and its error per metric."""

from __future__ import annotations

import json

import click

from luma.cli.model.common import load_contract
from luma.cli.model.llm import calibrate_llm
from luma.cli.model.mlperf import calibrate_mlperf
from luma.cli.output import console, format_option, print_rows
from luma.cli.progress import trials as trial_progress
from luma.cli.project import WRITE, project, settings as command_settings
from luma.experiments.model import calibrate, facts, trials
from luma.experiments.sprint import contract
from luma.experiments.sprint.run import import_service


@click.command("calibrate")
@click.argument("contract_refs", metavar="[CONTRACT]...", nargs=-1)
@click.option("--repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Rounds of the design (each point's figures are the median of its rounds).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the error figures into the KB (evidence class simulated).")
@click.option("--llm", "llm_mode", is_flag=True,
              help="Calibrate the LLM serving model on published measurements instead (no trials run here).")
@click.option("--published", type=click.Path(exists=True, dir_okay=False),
              help="With --llm: a file of your own published figures (the format of "
                   "experiments/model/published/llm-serving.json) to add.")
@click.option("--quick", is_flag=True,
              help="With --llm: fit only, without the leave-one-source/engine/machine-out refits the error bands "
                   "come from (predictions then state the held-out p90 per metric).")
@click.option("--mlperf", "mlperf_mode", is_flag=True,
              help="Calibrate the LLM serving model on the MLPerf results imported into this project's KB "
                   "(`luma import mlperf-results`), each submitter held out in turn.")
@format_option(choices=("table", "json"))
@project(WRITE)
def calibrate_cmd(contract_refs, repeats, record, llm_mode, published, quick, mlperf_mode, fmt) -> None:
    """Measure a short design of trials per contract (default: every shipped contract), fit the
    model's efficiency figures, and report its error per metric. With --llm: fit the LLM serving
    model to published measurements and report its error on the held-out ones. With --mlperf: fit it to the
    imported MLPerf results, each submitter held out in turn, and report the error on each."""
    if mlperf_mode:
        if contract_refs or llm_mode or published or quick:
            raise click.UsageError("--mlperf calibrates on the imported MLPerf results; it takes no CONTRACT, --llm "
                                   "or --published")
        calibrate_mlperf(fmt)
        return
    if quick and not (llm_mode or published):
        raise click.UsageError("--quick goes with --llm")
    if llm_mode or published:
        if contract_refs:
            raise click.UsageError("--llm calibrates on published measurements; it takes no CONTRACT")

        calibrate_llm(published, record, fmt, quick)
        return
    import numpy as np

    project = command_settings()
    home = project.home
    # The analytical model describes the in-process services; an endpoint's engine is not one of them.
    contracts = [load_contract(r) for r in contract_refs] or [c for _, p in sorted(contract.shipped().items())
                                                          if (c := contract.load(p)).endpoint is None]

    for c in contracts:
        import_service(c)  # the trials run the services in child processes: a missing extra is one line here

    # The host's figures first (one step), then every design point of every contract per round.
    expected = 1 + repeats * sum(len(trials.design(c)) for c in contracts)
    with trial_progress("model calibrate", expected, console(stderr=True)) as progress:
        progress("measuring the host")
        cal = calibrate.calibrate(contracts, project, repeats=repeats,
                                  progress=lambda m: progress(f"host measured -> {m[6:]}" if m.startswith("host: ") else m))
    cal["ledger_check"] = facts.ledger_check(project, cal)
    if record:
        cal["facts"] = str(facts.record(project, cal))
    if fmt == "json":
        click.echo(json.dumps({k: v for k, v in cal.items() if k != "trials"}, indent=2))
        return
    rows = [{"contract": c, "metric": m, "trials": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}",
             "held-out median": _pct(e.get("held_out_median")), "held-out max": _pct(e.get("held_out_max")),
             "at contract load": _pct(e.get("contract_load_max"))}
            for c, ms in cal["errors"].items() for m, e in ms.items()]
    print_rows(rows, ["contract", "metric", "trials", "median", "max", "held-out median", "held-out max",
                      "at contract load"], "table",
               title="model error (relative, |predicted - measured| / measured)")
    val = [{"contract": c, "metric": m, "trials": e["n"], "median": f"{e['median']:.1%}", "max": f"{e['max']:.1%}"}
           for c, ms in cal["validation"].items() for m, e in ms.items()]
    if val:
        print_rows(val, ["contract", "metric", "trials", "median", "max"], "table",
                   title=f"the previous calibration ({cal['previous']}) on these new trials")
    spread = [r["p50_latency_spread"] for r in cal["trials"] if r.get("p50_latency_spread") is not None]
    if spread:
        click.echo(f"p50 latency spread between rounds of the same trial: median {np.median(spread):.0%}, "
                   f"max {max(spread):.0%} (the host's own noise)")
    for service, m in (cal.get("limit_margins") or {}).items():
        click.echo(f"{service}: a memory limit needs {m['bytes'] / 2**20:.2f} MiB beyond the predicted peak "
                   f"(fitted to {m['trials']} sprint trials in the ledger)")
    for r in cal["ledger_check"]:
        click.echo(f"{r['contract']}: the model reproduces {r['agree']} of {r['trials']} sprint verdicts in the ledger")
    click.echo(f"calibration: {calibrate.path(home)}" + (f"; facts: {cal['facts']}" if record else ""))


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"
