"""`luma partner`: a technology partner's intervention parameter records -- add, list, show, remove."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows, slug_callback
from luma.cli.submitter import submitter_option
from luma.cli.project import READ, WRITE, project, require, settings
from luma.kb.records.input_files import PARTNER_FILE
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger import Ledger
from luma.kb.operations.partners import add, remove
from luma.kb.trust.partners import read_ledger, read_partner_files, record_json, record_row, summary



def _open():
    return KnowledgeBase.open(settings())


def _book():
    """The project's partner records (reading creates nothing: no project is an error)."""
    ledger = Ledger(require().db_url)
    try:
        return read_ledger(ledger)
    finally:
        ledger.dispose()


@click.command("add")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--partner", "name", callback=slug_callback, help="The partner: fills records that name none, refuses others.")
@submitter_option()
@format_option()
@project(WRITE)
def add_cmd(files: tuple[Path, ...], name: str | None, submitter: str | None, fmt: str) -> None:
    """Validate intervention parameter FILES (TOML, YAML, JSON; at most 1 MiB each) and add
    them, all or nothing. Any error names the file and field, and nothing is written."""
    s = settings()
    records = read_partner_files(list(files), name, s.home, PARTNER_FILE.under(s))  # before anything is opened
    with _open() as kb:
        report = add(kb, records, submitter)
    rows = [{"source": r.source, "partner": r.model.partner, "name": r.model.name, "version": r.model.version,
             "evidence_class": r.evidence_class, "hash": r.content_hash[:12], "status": status}
            for status, recs in (("added", report.added), ("duplicate", report.duplicates)) for r in recs]
    print_rows(rows, ["source", "partner", "name", "version", "evidence_class", "hash", "status"], fmt)
    if fmt == "table":
        click.echo(f"{len(report.added)} added, {len(report.duplicates)} duplicate(s)")


@click.command("list")
@format_option()
@project(READ)
def list_cmd(fmt: str) -> None:
    """Every partner of this project: records live and removed, interventions, data classes."""
    rows = summary(_book())
    print_rows(rows, ["partner", "records", "removed", "interventions", "data_classes", "integration_points", "latest"],
               fmt)


@click.command("show")
@click.argument("key", metavar="NAME-or-RECORD")
@format_option(choices=("table", "json"))
@project(READ)
def show_cmd(key: str, fmt: str) -> None:
    """A partner's records (NAME), or one record (a content-hash prefix or a record name) with
    its figures in the units given and in SI."""
    book = _book()
    if key in book.partners():
        entries = book.of(key)
        if fmt == "json":
            click.echo(json.dumps({"partner": key, "records": [record_json(e) for e in entries]}, indent=2))
            return
        print_rows([record_row(e) for e in entries], ["hash", "name", "version", "evidence_class",
                                                      "integration_point", "data_classes", "status"],
                   "table", title=f"partner {key}")
        return
    entry = book.find(key)
    if fmt == "json":
        click.echo(json.dumps(record_json(entry), indent=2))
        return
    _print_record(entry)


def _print_record(entry) -> None:
    r = entry.record
    about = [("partner", r.partner), ("intervention", f"{r.name} {r.version} ({r.kind})"),
             ("evidence class", r.evidence_class), ("record", entry.content_hash),
             ("status", f"removed (retraction {entry.removed_by[:12]})" if entry.removed_by else "live"),
             ("integration point", r.integration_point), ("data classes", ", ".join(r.data_classes)),
             ("formats", ", ".join(r.formats)), ("access patterns", ", ".join(r.access_patterns))]
    if r.coherence:
        c = r.coherence
        about.append(("software", (f"transparent={c.software_transparent}, code changes={c.requires_code_changes}, "
                                   f"cache coherent={c.cache_coherent}")))
        about += [("constraint", text) for text in c.constraints]
    about += [("licensing", r.licensing), ("evaluation boundary", r.evaluation_boundary), ("description", r.description)]
    if r.source:
        about.append(("source", f"{r.source.title} <{r.source.url}>"))
    about += [("limitation", text) for text in r.limitations]
    about.append(("submitted", f"{entry.submitter}, {entry.ingested_at:%Y-%m-%d %H:%M}Z"))
    print_rows([{"item": k, "value": v} for k, v in about if v], ["item", "value"], "table",
               title=f"{r.partner}/{r.name}")
    rows = [{"figure": row["kind"], "data class": row["data_class"], "stated": _stated(row),
             "SI": f"{row['si']:.4g} {_SI.get(row['si_unit'], row['si_unit'])}"} for row in r.figures()]
    print_rows(rows, ["figure", "data class", "stated", "SI"], "table", title=f"{r.evidence_class} figures")


def _stated(row: dict) -> str:
    unit = "" if row["unit"] in ("1", "dimensionless") else f" {row['unit']}"
    return f"{row['value']:g}{unit}"


_SI = {"byte": "B", "byte / second": "B/s", "second": "s", "watt": "W", "dimensionless": "", "meter ** 2": "m²"}


@click.command("remove")
@click.argument("name", metavar="PARTNER", callback=slug_callback)
@click.option("--record", default=None, help="Only this record (content-hash prefix or record name).")
@click.option("--reason", default=None, help="Why (kept in the retraction record).")
@submitter_option("Who removes (default: user@host).")
@project(READ)
def remove_cmd(name: str, record: str | None, reason: str | None, submitter: str | None) -> None:
    """Withdraw a partner's records (all, or --record). The append-only ledger keeps them and
    records a retraction; the KB drops their graphs, and `luma kb rebuild` leaves them out."""
    require()  # nothing to remove from a project that does not exist
    with _open() as kb:
        targets, report = remove(kb, name, record, reason, submitter)
    click.echo(f"removed {len(targets)} record(s) of partner {name}: "
               + ", ".join(f"{e.record.name} {e.record.version} ({e.content_hash[:12]})" for e in targets))
    click.echo(f"retraction {report.added[0].content_hash[:12]} is in the ledger; their graphs left the KB")


# `evaluate` lives in its own module (it needs the analytical model; the rest of the group does not).

