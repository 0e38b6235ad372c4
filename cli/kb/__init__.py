"""`luma kb`: the knowledge base — init, ingest, load, query, explain, export, stats, rebuild, schema, bench
(one module per command or small family, loaded when its command runs)."""

from __future__ import annotations

from luma.cli.lazy import LazyGroup


kb = LazyGroup("kb", help=(
    "The evidence ledger and the knowledge base projected from it."), lazy={
    "bench": ("luma.cli.kb.pipeline_bench:bench",
        "Benchmark ingest and named queries on synthetic records against raw Oxigraph and rdflib."),
    "explain": ("luma.cli.kb.explain:explain",
        "The derivation tree of IRI (full or prefixed, e.g. id:chain/…) down to the ingested records."),
    "export": ("luma.cli.kb.read:export",
        "Export every named graph (N-Quads lines are sorted, so two exports diff cleanly)."),
    "ingest": ("luma.cli.kb.records:ingest", "Validate record FILES (JSON, JSONL, YAML) and add them, all or nothing."),
    "init": ("luma.cli.kb.records:init", "Create the project's ledger and knowledge base (idempotent)."),
    "load": ("luma.cli.kb.records:load",
        "Add a plain RDF FILE (Turtle, N-Triples, N-Quads, TriG, JSON-LD) as one record."),
    "query": ("luma.cli.kb.query:query",
        "Run a read-only SPARQL query (argument, --file or --name) over all named graphs, or over what --scope "
        "partner:NAME may see (never another partner's records)."),
    "rebuild": ("luma.cli.kb.records:rebuild", "Recreate the knowledge base from the ledger alone."),
    "schema": ("luma.cli.kb.records:schema", "Print the JSON Schema of a record format."),
    "stats": ("luma.cli.kb.read:stats", "Counts: quads, record graphs, ledger records by kind and evidence class."),
})
