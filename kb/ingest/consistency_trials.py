"""The trials of a measured PEX chain, one by one (`luma.kb.ingest.consistency` checks the chain as
a whole, `luma.kb.ingest.consistency_outcomes` its outcomes; both check their trials here): an
embedded trial is re-judged against the chain's contract, a referenced one must be in the ledger
or the batch, cited once, measured, of this chain, in the state it claims and with its verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

from luma.errors import RecordError
from luma.kb.ingest.rejudge import check_verdict
from luma.kb.records import units
from luma.kb.records.pex_chain import Level, MachineState, PexChain, Trial
from luma.kb.records.pex_trial import PexTrial


def check_trial(chain: PexChain, trial: Trial, trials_by_hash: Mapping[str, object], source: str | None, where: str,
                cited: set[str], state: MachineState | None, state_name: str) -> None:
    """One trial of the chain (at `where`): an embedded one re-judged, a referenced one found,
    cited once, and checked against `state` (None: a state the record does not spell out)."""
    if trial.record is None or trial.observations or trial.failure_cause:
        check_verdict(chain.contract.clauses, trial.observations, trial.failure_cause, trial.verdict,
                      source=source, where=where)
    if trial.record is not None:
        if trial.record in cited:
            refuse(source, f"{where}.record", f"trial record {trial.record[:12]} is cited twice: "
                                               "each repetition is a trial of its own")
        cited.add(trial.record)
        _check_reference(chain, trial, trials_by_hash.get(trial.record), source, where, state, state_name)


def _check_reference(chain: PexChain, trial: Trial, found, source: str | None, where: str,
                     state: MachineState | None, state_name: str) -> None:
    """A referenced pex-trial record: present, measured, of this chain, in the trial's state."""
    ref = getattr(found, "model", found)
    name = f"trial record {trial.record[:12]}"
    field = f"{where}.record"
    if ref is None:
        refuse(source, field, f"{name} is neither in the ledger nor in this batch")
    if not isinstance(ref, PexTrial):
        refuse(source, field, f"{name} is a {getattr(ref, 'record_type', type(ref).__name__)} record, not a pex-trial")
    if ref.evidence_class != "measured":
        refuse(source, field, f"{name} is {ref.evidence_class} evidence: a measured chain rests on measured trials")
    for part in ("contract", "workload", "architecture"):
        if getattr(ref, part) != getattr(chain, part):
            refuse(source, field, f"{name} ran under another {part} ({getattr(ref, part).name!r}) than the chain's "
                                   f"({getattr(chain, part).name!r})")
    differs = None if state is None else state_difference(ref.state, state)
    if differs:
        refuse(source, field, f"{name} ran {differs}: a {trial.state}-state trial runs the chain's {state_name}")
    if ref.verdict != trial.verdict:
        refuse(source, f"{where}.verdict", f"verdict {trial.verdict} but {name} says {ref.verdict}")
    check_verdict(ref.contract.clauses, ref.observations, ref.failure_cause, ref.verdict, source=source,
                  where=field, label=f"{name}: ")


def state_difference(got: MachineState, wanted: MachineState) -> str | None:
    """How `got` differs from `wanted` (`with host_memory 8 MiB, not 6 MiB`), None if it does not."""
    for key in sorted(set(got.dimensions) | set(wanted.dimensions)):
        a, b = got.dimensions.get(key), wanted.dimensions.get(key)
        if a is None:
            return f"without the {key} level of that state"
        if b is None:
            return f"with a {key} level that state does not have"
        if level_key(a) != level_key(b):
            return f"with {key} {_text(a)}, not {_text(b)}"
    return None


def level_key(level: Level):
    """A level in comparable form: its category, or (value, unit) in canonical units."""
    return level.value if isinstance(level.value, str) else units.normalise(level.value, level.unit)


def _text(level: Level) -> str:
    return str(level.value) if level.unit is None else f"{level.value:g} {level.unit}"




def refuse(source: str | None, field: str, message: str) -> None:
    """A RecordError naming the record's source and field."""
    raise RecordError(message, source=source, field=field)
