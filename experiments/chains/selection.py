"""Which pex-trial records of the ledger a chain is assembled from: those of one sprint, or of one
contract (narrowed by workload, architecture, evidence class), each with its content hash — the
identity a chain cites it by — in ledger order."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from luma.errors import ConfigError, RecordError
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.loader import first_error
from luma.kb.records.pex_trial import PexTrial
from luma.kb.store.ledger_read import payloads_of_kind


@dataclass(frozen=True)
class Selection:
    """The trial records to consider: a sprint's, or a contract's (by name), optionally narrowed."""

    sprint: str | None = None
    contract: str | None = None
    workload: str | None = None
    architecture: str | None = None
    evidence_class: str | None = None

    def __post_init__(self):
        if self.sprint is None and self.contract is None:
            raise ConfigError("name the trials' sprint or their contract", field="sprint")

    def describe(self) -> str:
        """`sprint S, contract C, …`: the selection in words, for messages."""
        parts = [("sprint", self.sprint), ("contract", self.contract), ("workload", self.workload),
                 ("architecture", self.architecture), ("evidence class", self.evidence_class)]
        return ", ".join(f"{name} {value!r}" for name, value in parts if value is not None)

    def matches(self, doc: dict) -> bool:
        """True when a trial record (its parsed JSON) is one of the selection."""
        named = {"sprint": doc.get("sprint"), "contract": _name(doc.get("contract")),
                 "workload": _name(doc.get("workload")), "architecture": _name(doc.get("architecture")),
                 "evidence_class": doc.get("evidence_class")}
        return all(getattr(self, key) in (None, value) for key, value in named.items())


@dataclass(frozen=True)
class TrialRecord:
    """A pex-trial record of the ledger: its content hash (what a chain's `record` cites), its
    model, and its place in the ledger (trials are cited in the order they were ingested)."""

    content_hash: str
    model: PexTrial
    order: int


def select_trials(settings, selection: Selection) -> list[TrialRecord]:
    """The ledger's pex-trial records of `selection`, oldest first (none when the project has no
    ledger yet)."""
    context = {"dimensions": record_dimensions(settings.home), "home": settings.home}
    out = []
    for order, (content_hash, payload) in enumerate(payloads_of_kind(settings, "pex-trial")):
        if not selection.matches(json.loads(payload)):
            continue
        try:
            model = PexTrial.model_validate_json(payload, context=context)
        except ValidationError as exc:  # a record the ledger took under an older schema or ontology
            field, message = first_error(exc)
            raise RecordError(f"trial record {content_hash[:12]} no longer validates: {message}",
                              source="ledger", field=field) from None
        out.append(TrialRecord(content_hash, model, order))
    return out


def _name(block) -> str | None:
    return block.get("name") if isinstance(block, dict) else None
