"""Contracts that only the model evaluates (LLM serving on accelerators this host does not have)."""
