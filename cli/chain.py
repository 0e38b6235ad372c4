"""`luma chain assemble`: a PEX chain from pex-trial records already in the ledger
(experiments/chains/assemble.py does the work; this module parses and prints)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows, slug_callback
from luma.cli.project import READ, project, require
from luma.errors import RecordError
from luma.experiments.chains.assemble import AssembleConfig, Assembly, assemble_chain
from luma.experiments.chains.selection import Selection
from luma.kb.vocab import EVIDENCE_CLASSES

_STATES = ["role", "state", "variant", "verdicts", "trials"]


@click.command("assemble")
@click.option("--sprint", help="The trials of this sprint (a pex-trial record's `sprint`).")
@click.option("--contract", help="The trials of this contract (by name).")
@click.option("--workload", help="Only trials of this workload (by name).")
@click.option("--architecture", help="Only trials of this architecture (by name).")
@click.option("--evidence-class", type=click.Choice(sorted(EVIDENCE_CLASSES)), help="Only trials of this class.")
@click.option("--dimension", help="The crossed dimension (default: the contract's sprint dimension when the "
                                  "trials vary in it, else the one dimension they vary in).")
@click.option("--intervention", help="The intervention (default: the contract's, among the variants tried at the "
                                     "FAIL state).")
@click.option("--variant", help="The intervention's variant, when the contract does not name it.")
@click.option("--baseline", help="The baseline variant, when the contract does not name it.")
@click.option("--key", callback=slug_callback, help="Sign with this key of $LUMA_HOME/keys/ (default: the project's "
                                                    "signing key; a measured chain must be signed).")
@click.option("--no-ingest", is_flag=True, help="Check and write the chain (--out) without ingesting it.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the chain to this file.")
@format_option()
@project(READ)
def assemble_cmd(sprint, contract, workload, architecture, evidence_class, dimension, intervention, variant,
                 baseline, key, no_ingest, out, fmt) -> None:
    """Build a pex-chain from pex-trial records in the ledger (imported or measured). Its trials at
    the minimum PASS state, the adjacent FAIL and the intervention's recovered state are checked as
    ingest checks a sprint's chain, then it is signed and ingested. What is missing is listed, one
    line each, and nothing is written."""
    if sprint is None and contract is None:
        raise click.UsageError("name the trials: --sprint NAME or --contract NAME")
    if no_ingest and out is None:
        raise click.UsageError("--no-ingest writes the chain to a file: give --out FILE")
    if variant is not None and intervention is None:
        raise click.UsageError("--variant names the variant of --intervention: give both")
    config = AssembleConfig(Selection(sprint, contract, workload, architecture, evidence_class), dimension,
                            intervention, variant, baseline, key)
    result = assemble_chain(require(), config, ingest=not no_ingest, out=out)
    if result.missing:
        for line in result.missing:
            click.echo(f"  - {line}", err=True)
        n = len(result.missing)
        raise RecordError(f"no chain from {result.considered} trial record(s) of {result.selection}: {n} "
                          f"piece{'s' * (n != 1)} missing (listed above); nothing was written")
    _print(result, fmt)


def _print(a: Assembly, fmt: str) -> None:
    summary = a.summary()
    done = ("ingested" if a.ingested else "already in the ledger" if a.duplicate else "not ingested") + (
        f", written to {a.written}" if a.written else "")
    if fmt == "json":
        click.echo(json.dumps({"chain": summary, "status": done, "states": a.states, "notes": a.notes}, indent=2))
        return
    if fmt == "csv":
        print_rows([summary], list(summary), fmt)
        return
    print_rows(a.states, _STATES, fmt, title=f"trials of {a.selection}")
    click.echo(f"chain {a.content_hash[:12]} ({summary['evidence_class']}): {summary['crossed_dimension']} minimum "
               f"PASS {summary['min_pass']}, adjacent FAIL {summary['adjacent_fail']}; binding resource "
               f"{summary['binding_resource']}" + (f" (co-binding: {summary['co_binding']})" if summary['co_binding']
                                                   else "")
               + f"; {summary['intervention']} {'recovered' if summary['recovered'] else 'did not recover'} PASS; "
               f"{summary['repetitions']} repetition(s); {done}")
    for note in a.notes:
        click.echo(f"note: {note}", err=True)
