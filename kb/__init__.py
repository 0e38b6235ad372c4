"""The knowledge base. `knowledge_base.KnowledgeBase` is the front door; its parts sit below it and never
import it: records/ (formats, loading, validation), ingest/ (the evidence gate, consistency, shapes,
projection), store/ (ledger, quad-store backends, sessions, pending graphs), query/ (safety, paging,
named queries, scope) and trust/ (attestations, runner keys, partner records). operations/ sits
above it: what writes through an open KnowledgeBase (runner keys, partner records)."""
