"""Ingest: the measured-evidence gate, consistency and re-judging of records, shape checks and the projection of records into quads."""
