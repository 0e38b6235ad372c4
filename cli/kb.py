"""`luma kb`: the knowledge base — init, ingest, load, query, export, stats, rebuild, bench."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click

from luma.cli.output import (echo_bytes, format_option, print_rows, print_sparql_csv, print_sparql_table,
                             raw_requested, submitter_option)
from luma.cli.project import NONE, READ, WRITE, project
from luma.kb.records.kinds import SCHEMA_KINDS
from luma.kb.vocab import LOADABLE_CLASSES
from luma.privacy import tighten

_EXTENSIONS = {
    ".ttl": "turtle", ".nt": "ntriples", ".nq": "nquads", ".trig": "trig",
    ".jsonld": "jsonld", ".json": "jsonld",
}


def _open(sync: bool = True):
    """The project's KB for a command that writes (waits per --wait / LUMA_WAIT)."""
    from luma.cli.project import settings
    from luma.kb.knowledge_base import KnowledgeBase

    return KnowledgeBase.open(settings(), sync=sync)


def open_for_reading():
    """The project's KB for a command that only reads: concurrent with other readers, and with a
    running writer it reads the state that writer started from (said on stderr)."""
    from luma.cli.project import require
    from luma.kb.knowledge_base import KnowledgeBase

    base = KnowledgeBase.open(require(), read_only=True)
    writer = base.snapshot_writer
    if writer:
        click.echo(f"note: pid {writer.get('pid')} ({writer.get('command', '?')}) is writing the knowledge base "
                   f"since {writer.get('since', '?')}; this shows it as it was then", err=True)
    return base


@click.group()
def kb() -> None:
    """The evidence ledger and the knowledge base projected from it."""


@kb.command()
@project(WRITE, announce=False)
def init() -> None:
    """Create the project's ledger and knowledge base (idempotent). On an existing project, every
    file and folder in it is made owner-only (chmod -R go-rwx, links not followed)."""
    with _open() as base:
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


@kb.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@submitter_option()
@format_option()
@project(WRITE)
def ingest(files: tuple[Path, ...], submitter: str | None, fmt: str) -> None:
    """Validate record FILES (JSON, JSONL, YAML) and add them, all or nothing."""
    from luma.kb.ingest.evidence_gate import check_before_open
    from luma.cli.project import settings as command_settings
    from luma.kb.records.input_files import RECORD_FILE
    from luma.kb.records.loader import iter_records

    if _total_bytes(files) <= PREVALIDATE_BYTES:
        # Small input is validated whole before the KB is even opened: a refused file never
        # waits for, locks or touches it.
        settings = command_settings()
        records = list(iter_records(list(files), settings.home, RECORD_FILE.under(settings)))
        check_before_open(settings, records)  # the measured-evidence gate too, against the ledger
        with _open() as base:
            report = base.ingest_records(records, submitter)
    else:
        with _open() as base:
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


@kb.command()
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
    with _open() as base:
        report = base.load_rdf(file, fmt, evidence_class, submitter)
    if report.added:
        click.echo(f"{file}: loaded {report.quads_added} quads into {base.graph_of(report.added[0].content_hash)}")
    else:
        click.echo(f"{file}: already loaded (same content), nothing added")


@contextmanager
def _maybe_exploratory(base, exploratory: bool):
    """`base` itself, or a view of the last exploratory rule run's copy of the KB (rules/exploratory.py)
    read under the same project lock."""
    if not exploratory:
        yield base
        return
    from luma.kb.store.embedded import EmbeddedStore
    from luma.rules import exploratory as explore

    path = explore.store_path(base.settings.home)
    run = explore.last_run(base.settings.home)
    if run is None or not path.is_dir():
        raise click.ClickException("no exploratory run yet: `luma rules run --exploratory --param …` makes one")
    click.echo(f"note: exploratory results (run {run['at']}, parameters {run['parameters'] or 'defaults'}), "
               "not the KB's", err=True)
    store = EmbeddedStore(path, read_only=True)
    try:
        yield _ExploratoryView(store, base.ledger, base.settings)
    finally:
        store.close()


@dataclass
class _ExploratoryView:
    """The exploratory copy's store with the project's ledger and settings (what a query reads)."""

    store: object
    ledger: object
    settings: object


@kb.command()
@click.argument("sparql", required=False)
@click.option("--file", "query_file", type=click.Path(dir_okay=False, path_type=Path), help="Read the query from a file.")
@click.option("--name", "query_name", help="Run a named query (see --list).")
@click.option("--list", "list_names", is_flag=True, help="List the named queries and exit.")
@click.option("--timeout", type=click.FloatRange(min=0.001), default=60.0, show_default=True,
              help="Seconds before the query is stopped.")
@click.option("--memory", default=None, metavar="SIZE",
              help="Memory the query may use, e.g. 2GiB (default: $LUMA_QUERY_MEMORY, else 4GiB).")
@click.option("--scope", default="owner", show_default=True, metavar="owner|partner:NAME",
              help="What the query sees: everything (owner), or the public facts and one partner's records. "
                   "A view, not access control: see docs/security.md.")
@click.option("--exploratory", is_flag=True,
              help="Query the last `luma rules run --exploratory` (its copy of the KB) instead of the KB.")
@click.option("--limit", type=click.IntRange(min=0), default=None,
              help="Rows of the answer to return (a page; see --offset). Without ORDER BY, pages follow the "
                   "store's order, the same while the KB does not change.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Rows of the answer to skip before the page.")
@format_option()
@project(READ)
def query(sparql, query_file, query_name, list_names, timeout, memory, scope, exploratory, limit, offset, fmt) -> None:
    """Run a read-only SPARQL query (argument, --file or --name) over all named graphs, or over
    what --scope partner:NAME may see (never another partner's records). FROM / FROM NAMED are
    honoured (within the scope). --limit/--offset return one page of the answer.

    json output is the W3C SPARQL 1.1 Query Results JSON format; csv is for spreadsheets (the
    layout of SPARQL CSV, a text cell starting with = + - @ tab or CR escaped with a leading ',
    numeric literals as they are); csv --raw is the W3C SPARQL 1.1 CSV format, byte for byte.
    Updates, SERVICE, LOAD and \\u escapes are refused. On the embedded store the query runs in a
    child process without network access, stopped at --timeout, --memory or the answer size
    limit ($LUMA_QUERY_MAX_ANSWER_BYTES, default 2GiB). Named queries that read what the rules
    derive (qualified-boundaries …) need `luma rules run` first, and say so.
    """
    import tempfile

    from luma.errors import LumaError
    from luma.kb.store.base import QueryLimits
    from luma.kb.query.named import get_named_query, named_queries
    from luma.kb.query.paging import paged
    from luma.kb.query.safety import check_user_query
    from luma.cli.project import require
    from luma.cli.project import settings as command_settings
    from luma.kb.query.scope import Scope, scoped_query
    from luma.settings import MIN_QUERY_MEMORY, parse_size

    if list_names:
        rows = [{"name": q.name, "description": q.description} for q in named_queries().values()]
        print_rows(rows, ["name", "description"], fmt)
        return
    given = [x for x in (sparql, query_file, query_name) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of: a SPARQL argument, --file F, --name NAME")
    source, named = "query", None
    try:
        if query_file:
            from luma.kb.records.input_files import QUERY_FILE, read_text

            sparql = read_text(query_file, QUERY_FILE.under(command_settings()))  # untrusted: no FIFO, no device, 1 MiB
            source = str(query_file)
        if query_name:
            named = get_named_query(query_name)
            sparql, source = named.text(limit, offset), f"--name {query_name}"
        else:
            sparql = paged(sparql, limit, offset, source)
        where = Scope.parse(scope)
        settings = command_settings()
        memory_limit = parse_size(memory, "--memory", settings.query_memory, MIN_QUERY_MEMORY)
    except LumaError as exc:
        flag = _FLAGS.get(exc.field) or (exc.source if exc.source in _FLAGS.values() else None)
        if flag is None:
            raise
        if flag == "--name":  # not a malformed value: a name this LUMA does not ship (exit 1)
            raise click.ClickException(f"{flag}: {exc.message}") from None
        raise click.BadParameter(exc.message, param_hint=flag) from None
    # LUMA's usual prefixes (`luma:` …) are declared in front; the check sees the text that runs.
    checked = check_user_query(sparql, source)
    limits = QueryLimits(timeout, memory_limit, settings.query_answer_bytes, settings.require_sandbox)
    # csv for people is made from TSV, which keeps each term's datatype (a number is not escaped).
    results = ("csv" if raw_requested() else "tsv") if fmt == "csv" and checked.kind != "graph" else "json"
    require(settings)
    with (tempfile.TemporaryDirectory(prefix=".luma-query-", dir=settings.home) as spool, open_for_reading() as base,
          _maybe_exploratory(base, exploratory) as view):
        _check_derived(view, named)
        try:
            answer = scoped_query(view, checked, where, results=results, limits=limits, spool=Path(spool))
        except LumaError as exc:
            if exc.field not in ("scope", "memory"):
                raise
            raise click.ClickException(f"{_FLAGS[exc.field]}: {exc.message}") from None
        _print_answer(answer, fmt)


#: Library fields (luma.errors.LumaError.field) that are this command's options.
_FLAGS = {"name": "--name", "limit": "--limit", "offset": "--offset", "scope": "--scope", "memory": "--memory"}


def _check_derived(view, named) -> None:
    """A named query that reads derived facts: a one-line error before the rules have run, a note
    on stderr when records came in after their last run."""
    if named is None or not named.derived_by:
        return
    from luma.rules.derivations import require
    from luma.rules.loader import load_all

    rules = load_all(view.settings.home / "rules")
    notes = set()
    for rule in named.derived_by:
        note = require(view.store, rule, f"named query {named.name}", rules).stale_note()
        if note:
            notes.add(note)
    for note in sorted(notes):
        click.echo(f"note: {note}", err=True)


#: Largest answer shown as a table (bigger ones: --format json or csv, streamed).
TABLE_MAX_BYTES = 64 * 2**20


def _print_answer(answer, fmt: str) -> None:
    if answer.kind == "graph":
        _stream(answer)
    elif fmt == "table":
        if answer.size() > TABLE_MAX_BYTES:
            raise click.ClickException(f"the answer is {answer.size() / 2**20:.0f} MiB: too large for a table; "
                                       "use --format json or csv")
        print_sparql_table(answer.json())
    elif fmt == "json":
        if not answer.complete:
            answer.json()  # refuse to pass on an answer that broke off
        _stream(answer)
    elif raw_requested():
        _stream(answer)
    else:
        print_sparql_csv(answer)


def _stream(answer) -> None:
    """The answer to stdout as it is (streamed from its spool file), ending with a newline."""
    import sys

    sys.stdout.flush()
    out = sys.stdout.buffer
    answer.write_to(out)
    if answer.size() and not _ends_with_newline(answer):
        out.write(b"\n")
    out.flush()


def _ends_with_newline(answer) -> bool:
    if answer.file is None:
        return answer.body.endswith(b"\n")
    with open(answer.file, "rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


@kb.command()
@click.argument("iri")
@click.option("--depth", type=click.IntRange(min=0), default=20, show_default=True,
              help="Levels of prov:wasDerivedFrom to follow.")
@click.option("--max-supports", type=click.IntRange(min=1), default=50, show_default=True,
              help="Supports listed per node (all supporting records are still named).")
@click.option("--exploratory", is_flag=True,
              help="Explain from the last `luma rules run --exploratory` (its copy of the KB), not the KB.")
@format_option(choices=("table", "json"))
@project(READ)
def explain(iri: str, depth: int, max_supports: int, exploratory: bool, fmt: str) -> None:
    """The derivation tree of IRI (full or prefixed, e.g. id:chain/…) down to the ingested records.

    Derived nodes show the rule, version and parameters of the run that derived them; leaves show
    the record (content hash, kind, evidence class). Every supporting record is named at the end.
    """
    from luma.rules.explain import explain as explain_tree
    from luma.rules.explain import records

    with open_for_reading() as base, _maybe_exploratory(base, exploratory) as view:
        tree = explain_tree(view, iri, max_depth=depth, max_supports=max_supports)
    hashes = records(tree)
    if fmt == "json":
        click.echo(json.dumps({**tree, "records": hashes}, indent=2))
        return
    for line in _tree_lines(tree):
        click.echo(line)
    click.echo(f"{len(hashes)} supporting record(s): {', '.join(hashes) if hashes else '-'}")


def _node_text(node: dict) -> str:
    from luma.cli.output import compact, display

    if node.get("see_above"):
        return f"{display(node['iri'])} (see above)"
    parts = [display(node["iri"])]
    if node.get("types"):
        parts.append("[" + ", ".join(compact(t) for t in node["types"]) + "]")
    if node.get("label"):
        parts.append(repr(node["label"]))
    run = node.get("derived_by")
    if run:
        params = f" ({', '.join(run['parameters'])})" if run["parameters"] else ""
        exploratory = " [EXPLORATORY: below the rules' floors]" if run.get("exploratory") else ""
        parts.append(f"<- rule {run['rule']} v{run['version']}{params}{exploratory}")
    elif node.get("evidence_class"):
        parts.append(f"evidence: {node['evidence_class']}")
    return " ".join(parts)


def _record_text(rec: dict) -> str:
    who = f", by {rec['submitter']}" if rec.get("submitter") else ""
    when = f", ingested {rec['ingested_at']}" if rec.get("ingested_at") else ""
    return f"record {rec['content_hash']} ({rec['record_kind']}, {rec['evidence_class']}{when}{who})"


def _tree_lines(node: dict, prefix: str = "", last: bool = True, root: bool = True) -> list[str]:
    """An indented text tree: one line per node, its record as a child line."""
    branch = "" if root else ("└── " if last else "├── ")
    lines = [prefix + branch + _node_text(node)]
    inner = prefix + ("" if root else ("    " if last else "│   "))
    children: list = []
    if node.get("record"):
        children.append(("record", node["record"]))
    children += [("node", s) for s in node.get("supports", [])]
    shown = sum(1 for s in node.get("supports", []) if (s.get("record") or {}).get("graph") != s["iri"])
    more = node.get("supports_total", 0) - shown
    if node.get("truncated"):
        children.append(("text", f"… {node['supports_total']} support(s) below --depth"))
    elif more > 0:
        children.append(("text", f"… {more} more support(s) not listed (--max-supports)"))
    for i, (kind, child) in enumerate(children):
        end = i == len(children) - 1
        if kind == "node":
            lines += _tree_lines(child, inner, end, root=False)
        else:
            lines.append(inner + ("└── " if end else "├── ") + (_record_text(child) if kind == "record" else child))
    return lines


@kb.command()
@click.option("--format", "fmt", type=click.Choice(["nquads", "trig", "turtle", "jsonld"]), default="nquads", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write to a file instead of stdout.")
@project(READ)
def export(fmt: str, out: Path | None) -> None:
    """Export every named graph (N-Quads lines are sorted, so two exports diff cleanly)."""
    with open_for_reading() as base:
        data = base.store.dump(fmt, sort=True)
    if out:
        out.write_bytes(data)
        click.echo(f"wrote {len(data)} bytes to {out}", err=True)
    else:
        echo_bytes(data)


@kb.command()
@format_option()
@project(READ)
def stats(fmt: str) -> None:
    """Counts: quads, record graphs, ledger records by kind and evidence class."""
    with open_for_reading() as base:
        st = base.stats()
    if fmt == "json":
        click.echo(json.dumps(st, indent=2))
        return
    rows = [{"what": k, "value": v} for k, v in st.items() if k != "by_kind_and_evidence"]
    rows += [{"what": f"records {k}", "value": v} for k, v in st["by_kind_and_evidence"].items()]
    print_rows(rows, ["what", "value"], fmt)


@kb.command()
@project(READ)
def rebuild() -> None:
    """Recreate the knowledge base from the ledger alone."""
    from luma.cli.project import require

    require()  # a rebuild needs a ledger to rebuild from
    t0 = time.perf_counter()
    with _open(sync=False) as base:
        quads = base.rebuild()
    click.echo(f"rebuilt from the ledger: {quads} quads in {time.perf_counter() - t0:.2f} s")


def _safe(url: str) -> str:
    from luma.kb.store.ledger import _safe_url

    return _safe_url(url)


@kb.command()
@click.option("--records", default="1000,10000,100000", show_default=True, help="Comma-separated batch sizes.")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Runs per named query (min and median reported).")
@click.option("--rdflib-max", type=int, default=10_000, show_default=True, help="Largest size also run on rdflib's in-memory store.")
@click.option("--rdflib-timeout", type=float, default=120.0, show_default=True, help="Seconds per rdflib query before giving up.")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None, help="Keep the work directories here.")
@format_option(choices=("table", "json"))
@project(NONE)
def bench(records: str, repeat: int, rdflib_max: int, rdflib_timeout: float, keep: Path | None, fmt: str) -> None:
    """Benchmark ingest and named queries on synthetic records against raw Oxigraph and rdflib."""
    from luma.cli.progress import Tracker, sizes_plan
    from luma.rules.pipeline_bench import run_bench

    try:
        sizes = [int(x) for x in records.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("give whole numbers separated by commas", param_hint="--records") from None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    with Tracker("kb bench", sizes_plan(sizes, rdflib_max)) as progress:
        results = run_bench(sizes, repeat, rdflib_max, rdflib_timeout, keep, progress=progress)
    if fmt == "json":
        click.echo(json.dumps(results, indent=2))
        return
    from luma.cli.bench_report import print_bench

    print_bench(results)


@kb.command()
@click.option("--record-type", type=click.Choice(SCHEMA_KINDS), default="pex-chain",
              show_default=True, help="Which record format.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write to a file instead of stdout.")
@project(NONE)
def schema(record_type: str, out: Path | None) -> None:
    """Print the JSON Schema of a record format."""
    from luma.kb.records.schema import schema_text

    text = schema_text(record_type)
    if out:
        out.write_text(text)
    else:
        click.echo(text, nl=False)
