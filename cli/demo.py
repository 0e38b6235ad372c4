"""`luma demo`: the main demo on the embedded default, end to end in a few seconds."""

from __future__ import annotations

import importlib.resources
import os
import tempfile
from pathlib import Path

import click

from luma.cli.output import print_rows, print_sparql_table


@click.command()
@click.option("--home", "demo_home", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project directory (default: $LUMA_HOME, else ./.luma-demo so a real project is not mixed with examples).")
def demo(demo_home: Path | None) -> None:
    """Ingest the shipped example records, load RDF, query, and show a rejected record.

    The examples are illustrative (their provenance says so), not measurements.
    """
    from luma.errors import LumaError
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.named_queries import get_named_query
    from luma.settings import Settings

    home = demo_home or Path(os.environ.get("LUMA_HOME") or ".luma-demo")
    os.environ["LUMA_HOME"] = str(home)
    examples = importlib.resources.files("luma.kb.examples")
    with importlib.resources.as_file(examples) as folder:
        records = sorted(p for p in Path(folder).iterdir() if p.suffix in (".json", ".yaml"))
        with KnowledgeBase.open(Settings.from_env(home)) as base:
            click.secho(f"== project {base.settings.home} (SQLite ledger + embedded Oxigraph)", bold=True)
            report = base.ingest(records, submitter="luma-demo")
            click.echo(f"ingested {len(report.added)} record(s), {len(report.duplicates)} already present, {report.quads_added} quads")
            ttl = Path(folder) / "spec-sheets.ttl"
            loaded = base.load_rdf(ttl, "turtle", "vendor-claim", submitter="luma-demo")
            click.echo(f"loaded {ttl.name} as vendor-claim: {loaded.quads_added} quads")

            click.secho("\n== luma kb query --name qualified-boundaries", bold=True)
            print_sparql_table(base.store.query(get_named_query("qualified-boundaries").sparql).json())
            click.secho("== luma kb query --name evidence-by-class", bold=True)
            print_sparql_table(base.store.query(get_named_query("evidence-by-class").sparql).json())

            click.secho("== a malformed record is refused, and nothing is written", bold=True)
            before = base.store.count()
            with tempfile.TemporaryDirectory() as tmp:
                bad = Path(tmp) / "bad-record.json"
                bad.write_text((Path(folder) / "embedding-minilm.json").read_text().replace('"GiB"', '"GHz"'))
                try:
                    base.ingest([bad], submitter="luma-demo")
                except LumaError as exc:
                    click.echo(f"error: {exc.one_line()}")
            click.echo(f"quads before: {before}, after: {base.store.count()}")

            click.secho("\n== luma kb stats", bold=True)
            st = base.stats()
            print_rows([{"what": k, "value": v} for k, v in st.items() if k != "by_kind_and_evidence"], ["what", "value"], "table")
    click.echo(f"Try: LUMA_HOME={home} luma kb query 'SELECT * WHERE {{ ?c a <https://w3id.org/luma/ns#BoundaryQualification> }}'")
