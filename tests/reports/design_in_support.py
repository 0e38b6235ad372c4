"""Helpers of the Design-In report tests: measured trials at given rates, the report built over a
project, and one of its tables."""

from __future__ import annotations

import json
from pathlib import Path

from luma.kb.knowledge_base import KnowledgeBase
from luma.settings import Settings


def chain_with_rates(doc: dict, evidence, pass_rate: float, remedy_rate: float, remedy: bool) -> dict:
    """`doc` with measured trials whose throughput is `remedy_rate` on the recovered state (when the
    chain's remedy is the recurring one) and `pass_rate` elsewhere."""
    doc = json.loads(json.dumps(evidence.with_trials(doc)))  # its PASS trials share one observation list
    for t in doc["trials"]:
        for o in t.get("observations", []):
            if o["metric"] == "throughput":
                o["value"] = remedy_rate if t["state"] == "recovered" and remedy else pass_rate
    return doc


def build_design_in(home: Path, table=None):
    """The Design-In report over the project at `home` (with a price table, else the example one)."""
    from luma.reports import design_in

    with KnowledgeBase.open(Settings.from_env(home=home), read_only=True) as kb:
        return design_in.build(kb, prices=table)


def report_table(rep, tid):
    """The table `tid` of a built report."""
    return next(t for t in rep.tables() if t.id == tid)
