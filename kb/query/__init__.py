"""Queries: the read-only safety check, paging, named queries and partner scope."""
