"""Tables for `luma kb bench`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from luma.cli.output import console as output_console


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:,.1f}"


def print_bench(results: list[dict]) -> None:
    console = output_console()
    ingest = Table(title="Ingest end to end (validation + ledger + KB) vs raw pyoxigraph bulk_load, same triples, same run")
    for col in ("records", "measured", "quads", "ingest s", "without the gate s", "gate cost", "records/s", "quads/s",
                "raw bulk_load s", "ratio", "raw into the start store s", "ratio to it", "raw lenient s",
                "ratio to lenient", "peak RSS MB", "phases s"):
        ingest.add_column(col, justify="right" if col != "phases s" else "left")
    for r in results:
        if "error" in r:
            ingest.add_row(str(r.get("records", "?")), "", "error: " + r["error"])
            continue
        phases = ", ".join(f"{k} {v:.1f}" for k, v in r["phases_s"].items())
        ingest.add_row(
            f"{r['records']:,}", f"{r.get('measured', 0):,}", f"{r['quads']:,}", f"{r['ingest_s']:.1f}",
            f"{r.get('ungated_ingest_s', float('nan')):.1f}", f"{r.get('gate_overhead', float('nan')):+.1%}",
            f"{r['records_per_s']:,.0f}",
            f"{r['quads_per_s']:,.0f}", f"{r['raw_bulk_load_s']:.1f}", f"{r['ratio_vs_raw']:.2f}x",
            f"{r['raw_into_start_s']:.1f}" if "raw_into_start_s" in r else "",
            f"{r['ratio_vs_raw_into_start']:.2f}x" if "raw_into_start_s" in r else "",
            f"{r['raw_lenient_s']:.1f}" if "raw_lenient_s" in r else "",
            f"{r['ratio_vs_raw_lenient']:.2f}x" if "raw_lenient_s" in r else "",
            f"{r['peak_rss_mb']:,.0f}", phases,
        )
    console.print(ingest)
    console.print("raw bulk_load: the same quads into an empty store; raw into the start store: into a copy of the "
                  "store the ingest began with (its ontology and bookkeeping), where RocksDB may compact the loaded "
                  "files before the close (36-47 s of ~170 s at 100k records, none at 20k); raw lenient: into an "
                  "empty store without the parser's IRI validation, which the ingest skips too once it has checked "
                  "every IRI itself")

    queries = Table(title="Named queries: LUMA (Oxigraph, min / median ms) vs rdflib in-memory (ms, one run)")
    queries.add_column("records", justify="right")
    queries.add_column("query")
    queries.add_column("rows", justify="right")
    queries.add_column("min ms", justify="right")
    queries.add_column("median ms", justify="right")
    queries.add_column("rdflib ms", justify="right")
    for r in results:
        if "error" in r:
            continue
        rd = r.get("rdflib", {})
        for name, q in r["queries"].items():
            rq = rd.get("queries", {}).get(name)
            if rq is None:
                rtext = rd.get("skipped") or rd.get("error") or "not run"
            elif "error" in rq:
                rtext = f"failed: {rq['error'].split(':')[0]}"  # the whole message follows the tables
            elif "timeout_s" in rq:
                rtext = f"> {rq['timeout_s'] * 1000:,.0f} (timeout)"
            else:
                rtext = _ms(rq["s"])
            queries.add_row(f"{r['records']:,}", name, str(q["rows"]), _ms(q["min_s"]), _ms(q["median_s"]), rtext)
    console.print(queries)
    _print_paging(console, results)
    for note in dict.fromkeys(r["note"] for r in results if r.get("note")):
        console.print(note)  # the chains' class: measured only in the bench's own marked project
    for r in results:
        rd = r.get("rdflib", {})
        if "load_s" in rd:
            console.print(f"rdflib in-memory load of {r['quads']:,} quads: {rd['load_s']:.1f} s, peak RSS {rd['peak_rss_mb']:,.0f} MB")
        for name, q in rd.get("queries", {}).items():
            if "error" in q:
                console.print(f"rdflib refused {name} ({r['records']:,} records): {q['error']}", markup=False)


def _print_paging(console: Console, results: list[dict]) -> None:
    """qualified-boundaries paged and exported, beside its whole answer (the table above)."""
    rows = [r for r in results if "paging" in r and "error" not in r]
    if not rows:
        return
    name = rows[0]["paging"]["query"]
    table = Table(title=f"{name}: whole answer (JSON, as above), first page (--limit {rows[0]['paging']['page_rows']}) "
                        "and whole answer as CSV; in the store, and through `luma kb query` (isolated query process)")
    for col in ("records", "rules s", "rows", "whole answer ms", "first page ms", "CSV export ms", "CSV rows/s",
                "kb query: first page ms", "kb query: CSV export ms", "kb query: CSV rows/s"):
        table.add_column(col, justify="right")
    for r in rows:
        p, whole = r["paging"], r["queries"].get(name, {})
        table.add_row(f"{r['records']:,}", f"{r.get('rules_s', float('nan')):.1f}", f"{p['export_csv']['rows']:,}",
                      _ms(whole.get("median_s")), _ms(p["first_page"]["median_s"]), _ms(p["export_csv"]["median_s"]),
                      f"{p['export_csv']['rows_per_s']:,.0f}", _ms(p["cli_first_page"]["median_s"]),
                      _ms(p["cli_export_csv"]["median_s"]), f"{p['cli_export_csv']['rows_per_s']:,.0f}")
    console.print(table)
    console.print("medians of the runs; rows/s = rows / median seconds")
