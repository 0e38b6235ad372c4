"""What a rule run did, rule by rule: the engine's answer (rules/engine.py), which a run in a
child process (rules/isolated_run.py) hands to its parent as JSON. A module of its own so that
the parent reads it without importing the engine (rdflib's SPARQL algebra, networkx)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class RuleRun:
    """One rule's part of a run: its results (the nodes of its class, rules/results.py) and those
    new, changed and removed; the quads of its graph (bookkeeping included) and those new and
    removed; rounds, time and how it was evaluated."""

    rule: str
    stratum: int
    facts: int = 0  # quads in the rule's graph: several per result, and the derivation's own
    new: int = 0  # quads
    removed: int = 0  # quads
    rounds: int = 0
    seconds: float = 0.0
    #: "full", "delta" (new record graphs only), "partition" (the keys upstream changes touch:
    #: rules/partition.py) or "skip" (nothing it reads changed)
    mode: str = "full"
    result_class: str | None = None  # what a result is (rules/analysis.py Analysed.result_class)
    derived: int = 0  # results in the rule's graph after the run
    derived_new: int = 0
    derived_changed: int = 0  # results whose statements changed
    derived_removed: int = 0


@dataclass
class RunReport:
    """What a rule run did: one RuleRun per rule, the new and removed quads and results in all, and its seconds."""

    runs: list[RuleRun] = field(default_factory=list)
    seconds: float = 0.0
    #: How the run found the graphs that came and went: "ledger" (the ledger's records since the
    #: last run, the store's graph count agreeing) or "listing" (every graph listed: rules/state.py).
    changes_from: str = "listing"

    @property
    def new(self) -> int:
        return sum(r.new for r in self.runs)

    @property
    def removed(self) -> int:
        return sum(r.removed for r in self.runs)

    @property
    def derived_new(self) -> int:
        return sum(r.derived_new for r in self.runs)

    @property
    def derived_changed(self) -> int:
        return sum(r.derived_changed for r in self.runs)

    @property
    def derived_removed(self) -> int:
        return sum(r.derived_removed for r in self.runs)

    def to_json(self) -> dict:
        return {"runs": [asdict(run) for run in self.runs], "seconds": self.seconds, "changes_from": self.changes_from}

    @classmethod
    def from_json(cls, data: dict) -> "RunReport":
        return cls([RuleRun(**run) for run in data["runs"]], data["seconds"], data.get("changes_from", "listing"))
