"""`luma model predict`: PASS/FAIL per clause of a contract on one machine state, and the binding
resource (luma.experiments.model.predict)."""

from __future__ import annotations

import json
import math

import click

from luma.cli.model.common import calibration, figure_text, load_contract
from luma.cli.model.record import record_option, recorded_line
from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings
from luma.cli.states import parse_state
from luma.experiments.model import predict, space
from luma.experiments.model.recording import record_predictions


@click.command("predict")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--state", "state_text", help="Machine state over the contract's, e.g. 'host_memory=512 MiB,compute=1 core' "
              "(an LLM: 'accelerator_type=nvidia-h100-sxm5-80gb,accelerator_count=4,precision=fp8').")
@click.option("--llm", "llm_ref", help="Serve this LLM (preset such as llama-2-70b, or a config.json path) instead "
              "of the contract's own service.")
@click.option("--space", "space_ref", help="A space file whose machines, prices and quality table to use.")
@record_option
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def predict_cmd(contract_ref, state_text, llm_ref, space_ref, record, fmt) -> None:
    """Predict PASS/FAIL per clause of CONTRACT on one machine state, and the binding resource."""
    levels = parse_state(state_text)
    llm_axes = [k for k in levels if space.AXES.get(k, ("", ""))[1] == "llm"]
    if llm_axes and not (llm_ref or space_ref):  # only --llm or a space's model makes the state an LLM's
        raise click.UsageError(f"--state {llm_axes[0]}={levels[llm_axes[0]]} describes an LLM: name the model served with --llm "
                               "(e.g. --llm llama-2-70b) or a space that names one with --space (e.g. --space llm-70b)")
    c = load_contract(contract_ref)
    base = space.load(space_ref, c, project=settings()) if space_ref else None
    one = space.from_state(levels, c, llm_ref, base, settings())
    p = predict.predict(c, one, calibration())
    recorded = (record_predictions(settings(), "luma model predict", c, [(p, "state")], one, space_ref)
                if record else None)
    if fmt == "json":
        click.echo(json.dumps({**p.as_dict(), **({"recorded": recorded} if recorded else {})}, indent=2, default=str))
        return
    f = p.figures
    llm = "kv_per_device" in f
    memory_check = "memory per device, 1 sequence" if llm else "memory beyond the runtime"
    rows = [{"check": memory_check if r["check"] == "memory" else r["check"], "op": r["op"],
             "predicted": f"{r['predicted']:g} sequences" if r["check"] == "kv_cache" else figure_text(r["predicted"], r["unit"]),
             "threshold": "1 sequence" if r["check"] == "kv_cache" else figure_text(r["threshold"], r["unit"]),
             "margin": "n/a" if math.isnan(r["margin"]) else f"{r['margin']:+.1%}", "verdict": r["verdict"],
             "resource": r["resource"], "band": f"±{r['band']:.0%}" if r.get("band") is not None else ""}
            for r in p.clauses]
    state = ", ".join(f"{k}={v}" for k, v in p.state.items()) or "the contract's state"
    cols = ["check", "op", "predicted", "threshold", "margin", "verdict", "resource"] + (
        ["band"] if any(r["band"] for r in rows) else [])
    print_rows(rows, cols, "table",
               title=f"{p.contract} on {state}")
    click.echo(f"verdict: {p.verdict}" + (f"; binding resource: {p.binding}" if p.binding else
                                          f"; tightest resource: {p.tightest}"))
    click.echo(_memory_line(f, llm))
    shown = [(k, u) for k, u in (("latency", "s"), ("ttft", "s"), ("tpot", "s"), ("throughput", "1/s"),
                                 ("energy_per_token", "J")) if k in f]
    click.echo("p50 figures: " + ", ".join(f"{k} {figure_text(f[k], u)}" for k, u in shown))
    errs = ", ".join(f"{k} {v:.0%}" for k, v in p.errors.items())
    which = ("stated band, leave-one-source-out" if any(n.startswith("error band:") for n in p.notes) else
             "held-out published measurements, p90" if p.error_detail else "held out, max")
    click.echo(f"evidence: {p.evidence_class}" + (f"; calibrated error ({which}): {errs}" if errs else ""))
    for note in p.notes:
        click.echo(f"note: {note}")
    recorded_line(recorded)


def _memory_line(f: dict, llm: bool) -> str:
    """The state's memory figures, each named for what it is (the check above is the first)."""
    if llm:
        cap = f.get("memory_capacity")
        return (f"memory per device: {figure_text(f.get('memory_min'), 'B')} with one sequence (the memory check), "
                f"{figure_text(f.get('memory_need'), 'B')} with every sequence of the load resident"
                + (f"; capacity {figure_text(cap, 'B')}" if cap is not None and math.isfinite(cap) else "")
                + (" (the rest wait for KV room)" if cap is not None and f.get("memory_need", 0) > cap else ""))
    return (f"memory: {figure_text(f.get('memory_need'), 'B')} beyond the runtime's own footprint (the memory check, "
            f"against the host_memory budget); peak RSS with the runtime: {figure_text(f.get('peak_rss'), 'B')}")
