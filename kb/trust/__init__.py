"""Trust: runner attestations and keys, and partner records (the checks ingest needs; operations that open a KB live in `luma.kb.operations`)."""
