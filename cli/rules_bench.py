"""`luma rules bench`: the rule set on synthetic chains against rdflib (its own module, so that
`luma rules check`, `list` and `run` never import the bench's project and key machinery)."""

from __future__ import annotations

import json

import click

from luma.cli.output import format_option, print_rows
from luma.cli.progress import Tracker, sizes_plan
from luma.cli.project import NONE, project
from luma.rules import engine_bench as rules_bench


@click.command("bench")
@click.option("--records", default="1000,10000", show_default=True, help="Comma-separated chain counts.")
@click.option("--incremental", default=1000, show_default=True, help="Chains added before each incremental run.")
@click.option("--repeat", default=5, show_default=True, type=click.IntRange(1, 50),
              help="Incremental runs (each after its own new chains): the median is reported, the minimum beside it.")
@click.option("--rdflib-max", default=1000, show_default=True, help="Largest size also run on rdflib's store.")
@click.option("--rdflib-timeout", default=600.0, show_default=True, help="Seconds rdflib gets per size.")
@format_option(choices=("table", "json"))
@project(NONE)
def bench_cmd(records: str, incremental: int, repeat: int, rdflib_max: int, rdflib_timeout: float, fmt: str) -> None:
    """The rule set to fixpoint on synthetic chains: full run, re-run, incremental run, rdflib beside it."""
    try:
        sizes = [int(x) for x in records.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated whole numbers, got {records!r}") from None
    with Tracker("rules bench", sizes_plan(sizes, rdflib_max)) as progress:
        results = rules_bench.run_bench(sizes, incremental, rdflib_max, rdflib_timeout, progress=progress, repeat=repeat)
    if fmt == "json":
        click.echo(json.dumps(results, indent=2))
        return
    rows = []
    for r in results:
        rdf = r.get("rdflib", {})
        rows.append({"chains": r.get("records"), "quads": r.get("quads"), "full s": _s(r.get("full_s")),
                     "re-run s": _s(r.get("rerun_s")), "re-run new": r.get("rerun_new"),
                     "+chains": r.get("incremental_records"), "incremental s": _s(r.get("incremental_s")),
                     "incremental min s": _s(r.get("incremental_min_s")),
                     "rdflib full s": _s(rdf.get("full_s")) if "full_s" in rdf else _rdflib_failure(rdf),
                     "rdflib / luma": f"{rdf['full_s'] / r['full_s']:.0f}x" if "full_s" in rdf and r.get("full_s") else None,
                     "error": r.get("error")})
    print_rows(rows, ["chains", "quads", "full s", "re-run s", "re-run new", "+chains", "incremental s",
                      "incremental min s", "rdflib full s", "rdflib / luma", "error"], "table", title="rules bench")
    for note in dict.fromkeys(r["note"] for r in results if r.get("note")):
        click.echo(note)  # the chains' class: measured only in the bench's own marked project
    # Where the time goes, per rule, at the largest size (the incremental column: its median run).
    big = max((r for r in results if "full" in r), key=lambda r: r["records"], default=None)
    if big:
        inc = big.get("incremental", {})
        per_rule = [{"rule": rule, "facts": v["facts"], "full s": _s(v["seconds"]),
                     "incremental": inc.get(rule, {}).get("how"), "incremental s": _s(inc.get(rule, {}).get("seconds"))}
                    for rule, v in sorted(big["full"].items(), key=lambda kv: -kv[1]["seconds"])]
        print_rows(per_rule, ["rule", "facts", "full s", "incremental", "incremental s"], "table",
                   title=f"rules at {big['records']} chains")


def _rdflib_failure(rdf: dict) -> str | None:
    done = rdf.get("rules_finished")
    if done is None:
        return rdf.get("error") or rdf.get("skipped")
    return f"{rdf.get('error')}; finished {len(done)} rule(s): {', '.join(done) or 'none'}"


def _s(value):
    return None if value is None else round(value, 2)
