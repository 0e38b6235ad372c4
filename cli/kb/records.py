"""`luma kb init|ingest|load|rebuild|schema`: make the project, add records and RDF, rebuild the KB
from the ledger, the record formats' JSON Schema."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from luma.cli.kb.access import open_for_writing
from luma.cli.output import format_option, print_rows
from luma.cli.submitter import submitter_option
from luma.cli.project import NONE, READ, WRITE, project, require, settings as command_settings
from luma.kb.ingest.evidence_gate import check_before_open
from luma.kb.records.input_files import RECORD_FILE
from luma.kb.store.ledger import _safe_url
from luma.kb.records.kinds import SCHEMA_KINDS
from luma.kb.records.loader import iter_records
from luma.kb.records.observations import table as observation_table
from luma.kb.records.schema import schema_text
from luma.kb.vocab import LOADABLE_CLASSES
from luma.privacy import tighten
from luma.rules.state import DERIVED


_EXTENSIONS = {
    ".ttl": "turtle", ".nt": "ntriples", ".nq": "nquads", ".trig": "trig",
    ".jsonld": "jsonld", ".json": "jsonld",
}


@click.command()
@project(WRITE, announce=False)
def init() -> None:
    """Create the project's ledger and knowledge base (idempotent). On an existing project, every
    file and folder in it is made owner-only (chmod -R go-rwx, links not followed)."""
    with open_for_writing() as base:
        s = base.settings
        click.echo(f"LUMA project at {s.home}\n  ledger: {_safe(s.db_url)}\n  kb:     {s.kb_url}")
        # A project made before LUMA kept its data private, or copied with wide modes (DESIGN §8);
        # under the writer's lock, so no other luma command writes meanwhile.
        tightened = tighten(s.home).describe()
    if tightened:
        click.echo(f"  {tightened}")


#: Inputs up to this size are validated before the KB is opened (larger ones stream through it).
PREVALIDATE_BYTES = 16 * 2**20


def _total_bytes(files) -> int:
    total = 0
    for f in files:
        try:
            total += Path(f).stat().st_size
        except OSError:
            pass  # the reader names the file and why
    return total


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@submitter_option()
@format_option()
@project(WRITE)
def ingest(files: tuple[Path, ...], submitter: str | None, fmt: str) -> None:
    """Validate record FILES (JSON, JSONL, YAML) and add them, all or nothing."""
    if _total_bytes(files) <= PREVALIDATE_BYTES:
        # Small input is validated whole before the KB is even opened: a refused file never
        # waits for, locks or touches it.
        settings = command_settings()
        records = list(iter_records(list(files), settings.home, RECORD_FILE.under(settings)))
        check_before_open(settings, records)  # the measured-evidence gate too, against the ledger
        with open_for_writing() as base:
            report = base.ingest_records(records, submitter)
    else:
        with open_for_writing() as base:
            report = base.ingest(files, submitter)
    rows = [
        {"source": r.source, "kind": r.kind, "evidence_class": r.evidence_class, "hash": r.content_hash[:16], "status": status}
        for status, recs in (("added", report.added), ("duplicate", report.duplicates))
        for r in recs
    ]
    shown = rows[:50] if fmt == "table" else rows  # a table of 100k rows helps nobody
    cols = ["source", "kind", "evidence_class", "hash", "status"]
    if fmt == "json":
        click.echo(json.dumps({
            "added": len(report.added), "duplicates": len(report.duplicates),
            "quads_added": report.quads_added, "records": rows, "seconds": report.seconds,
        }, indent=2))
        return
    print_rows(shown, cols, fmt)
    if fmt == "table":
        total = sum(report.seconds.values())
        if len(shown) < len(rows):
            click.echo(f"(first {len(shown)} of {len(rows)} records shown; --format json or csv lists all)")
        click.echo(
            f"{len(report.added)} added, {len(report.duplicates)} duplicate(s), "
            f"{report.quads_added} quads in {total:.2f} s"
        )


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--rdf-format", type=click.Choice(["turtle", "ntriples", "nquads", "trig", "jsonld"]), default=None,
              help="RDF syntax (default: from the file extension).")
@click.option("--evidence-class", type=click.Choice(LOADABLE_CLASSES), required=True,
              help="What kind of evidence these facts are (measured evidence comes from attested runners' "
                   "records, never from plain RDF).")
@submitter_option()
@project(WRITE)
def load(file: Path, rdf_format: str | None, evidence_class: str, submitter: str | None) -> None:
    """Add a plain RDF FILE (Turtle, N-Triples, N-Quads, TriG, JSON-LD) as one record."""
    fmt = rdf_format or _EXTENSIONS.get(file.suffix.lower())
    if fmt is None:
        raise click.UsageError(f"cannot tell the RDF syntax of {file}; give --rdf-format")
    with open_for_writing() as base:
        report = base.load_rdf(file, fmt, evidence_class, submitter)
    if report.added:
        click.echo(f"{file}: loaded {report.quads_added} quads into {base.graph_of(report.added[0].content_hash)}")
    else:
        click.echo(f"{file}: already loaded (same content), nothing added")


@click.command()
@project(READ)
def rebuild() -> None:
    """Recreate the knowledge base from the ledger alone."""
    require()  # a rebuild needs a ledger to rebuild from
    t0 = time.perf_counter()
    with open_for_writing(sync=False) as base:
        derived = _derived_quads(base)
        quads = base.rebuild()
    click.echo(f"rebuilt from the ledger: {quads} quads in {time.perf_counter() - t0:.2f} s")
    if derived:  # the rules' conclusions are not records: the ledger cannot give them back
        click.echo(f"dropped {derived} derived quads (rules' conclusions are not in the ledger): run `luma rules run` "
                   "to derive them again")


def _derived_quads(base) -> int:
    """How many quads the rules derived into this KB (their graphs under rules/state.py DERIVED)."""
    rows = base.store.select(f'SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} '
                             f'FILTER(STRSTARTS(STR(?g), "{DERIVED}")) }}', union=False)
    return int(rows[0]["n"])


def _safe(url: str) -> str:
    return _safe_url(url)


@click.command()
@click.option("--record-type", type=click.Choice(SCHEMA_KINDS), default="pex-chain",
              show_default=True, help="Which record format.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write to a file instead of stdout.")
@click.option("--observations", is_flag=True, help="Instead: per metric, the observations a contract clause on it "
                                                   "needs in every trial (statistic, bounds, sample count) and how "
                                                   "it is judged.")
@format_option()
@project(NONE)
def schema(record_type: str, out: Path | None, observations: bool, fmt: str) -> None:
    """Print the JSON Schema of a record format."""
    if observations:
        print_rows(observation_table(), ["metric", "kind", "unit", "observations", "judged"], fmt)
        return
    text = schema_text(record_type)
    if out:
        out.write_text(text)
    else:
        click.echo(text, nl=False)
