"""Evaluate a partner's record as a use case (`luma partner evaluate` and `luma report partner` call
it; so may a program): find the record (a file, or the project's ledger by hash prefix or name),
the contract (a sprint contract or one of the model's own), the space that prices the state, and
project whether the intervention moves the accepted-service frontier after its own costs
(experiments/model/partner.py). Also what every model use case starts from: a contract by
reference and this host's calibration."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import ConfigError, ContractError, RecordError, UnknownContract, UnknownName
from luma.experiments.model import calibrate, llm_calibrate, partner, space
from luma.experiments.sprint import contract as contracts
from luma.kb.records.input_files import PARTNER_FILE
from luma.kb.store.ledger_fields import missing as ledger_missing
from luma.kb.trust.partners import read_ledger, read_partner_files


def model_contract(ref: str, settings):
    """A contract by path, shipped name, or one of the model's own contracts (e.g. llm-chat)."""
    own = _own_contracts()
    try:
        return contracts.load(ref, settings)
    except ConfigError as exc:
        if ref in own:
            return contracts.load(own[ref], settings)
        if Path(ref).exists() or "(shipped:" not in exc.message:
            raise  # a file that is there but wrong: its own error
        names = sorted({*contracts.shipped(), *own})
        raise UnknownContract(f"no contract file or shipped contract named {ref!r} (known: {', '.join(names)})",
                          source=ref) from None


def _own_contracts() -> dict[str, Path]:
    return {p.name[:-5]: Path(str(p)) for p in importlib.resources.files("luma.experiments.model.contracts").iterdir()
            if p.name.endswith(".toml")}


def evaluable(contract, ref: str) -> None:
    """ContractError (field "contract") unless the analytical model can project the contract's
    service: a generative service (`service = "decoder"`), whose clauses and load it applies to an
    LLM on accelerators. The sprint contracts of other services, and those that serve their model
    behind an endpoint, are measured by `luma sprint run` alone."""
    if contract.service == "decoder":
        return
    what = ("an engine behind an OpenAI-compatible endpoint" if contract.service == "openai-endpoint"
            else f"the {contract.service} service on this host")
    usable = sorted({*_own_contracts(), *(n for n, path in contracts.shipped().items()
                                           if contracts.load(path).service == "decoder")})
    raise ContractError(f"{ref} ({contract.name}) is a sprint contract of {what}, which the analytical model does "
                        "not serve: a partner evaluation projects an LLM on accelerators under a generative contract "
                        f"(service = \"decoder\"): {', '.join(usable)}", field="contract")


def sprint_note(contract, ref: str, model: str | None) -> str | None:
    """What an evaluation under a sprint contract projects: the contract's clauses and load, applied
    to the LLM of the space (or --llm) on the state's accelerators; not the contract's own host
    dimension, and not a matrix `luma sprint run` can run on this host."""
    if ref in _own_contracts() or contract.sprint is None:
        return None
    return (f"{ref} is a sprint contract ({contract.name}): its clauses and load are applied to "
            f"{model or 'the LLM given'} on the accelerators of the state; its own dimension ({contract.sprint.dimension}) "
            f"is not modelled, and the matrix runs on a machine with those accelerators, not as `luma sprint run {ref}` "
            "on this host")


def host_calibration(home: Path) -> dict | None:
    """This host's calibration, with the project's own LLM calibration when it has one."""
    cal = calibrate.load(home) or {}
    if llm_calibrate.path(home).is_file():
        cal = {**cal, "llm": llm_calibrate.current(home)}
    return cal or None


def partner_record(ref: str, settings):
    """(InterventionParameters, source) from a record file, or from the project's ledger by
    content-hash prefix or record name (a record `luma partner add` ingested)."""
    path = Path(ref)
    if path.is_file():
        loaded = read_partner_files([path], None, settings.home, PARTNER_FILE.under(settings))
        if len(loaded) != 1:
            raise RecordError(f"holds {len(loaded)} records; evaluate one at a time", source=str(path))
        return loaded[0].model, str(path)
    if ledger_missing(settings.db_url):
        raise UnknownName(f"no record file {ref!r}, and the project has no ledger to look it up in", field="RECORD")
    from luma.kb.store.ledger import Ledger  # reason: SQLAlchemy loads only when a record is looked up in the ledger

    ledger = Ledger(settings.db_url)
    try:
        entry = read_ledger(ledger).find(ref)
    finally:
        ledger.dispose()
    return entry.record, f"ledger:{entry.content_hash[:12]}"


def default_space(contract, levels: dict[str, str], llm_ref: str | None, settings) -> tuple[object | None, str | None]:
    """(the space an evaluation without a space file uses, a note saying so): the first shipped
    LLM space (by name) that fits the contract and prices the state's accelerator_type — its model
    (unless `llm_ref`), prices, quality per precision and accelerator counts. None for a contract
    that is not an LLM's, or with `llm_ref` when no shipped space prices the accelerator."""
    if contract.service != "decoder":
        return None, None  # the evaluation itself says what it needs
    wanted = levels.get("accelerator_type")
    for name, path in sorted(space.shipped().items()):
        try:
            candidate = space.load(path, contract, project=settings)
        except ConfigError:
            continue  # a space for another kind of contract
        if not candidate.is_llm or (wanted is not None and wanted not in candidate.cost):
            continue
        return candidate, (f"no --space given: the shipped space {name} supplies "
                           f"{'the prices' if llm_ref else 'the model (' + candidate.model.name + '), the prices'}, "
                           "quality per precision and accelerator counts")
    if llm_ref:
        return None, None
    raise ConfigError(f"no shipped space prices accelerator_type {wanted!r}: a space file with a [cost] entry for "
                      f"it is needed (shipped: {', '.join(sorted(space.shipped()))})", field="space")


@dataclass
class PartnerEvaluation:
    """An evaluation (`doc`, as `--format json` prints it), the record it evaluated, and what
    recording it needs (`context()`: the contract, the state's space and the record's source)."""

    doc: dict
    record: object
    contract: object
    source: str
    levels: dict[str, str]
    llm_ref: str | None
    base: object
    settings: object = field(repr=False, default=None)

    def context(self) -> dict:
        """What `--record` predicts the evaluation's states with."""
        state = space.from_state(self.levels, self.contract, self.llm_ref, self.base, self.settings)
        return {"contract": self.contract, "state": state, "source": self.source}


def evaluate_partner(settings, record_ref: str, contract_ref: str, levels: dict[str, str], llm_ref: str | None = None,
                     space_ref: str | None = None, repetitions: int | None = None,
                     on_note=lambda note: None) -> PartnerEvaluation:
    """Project the intervention of `record_ref` on `contract_ref` at the state `levels`;
    `on_note` hears what was chosen for the caller (a default space) as soon as it is."""
    record, source = partner_record(record_ref, settings)
    c = model_contract(contract_ref, settings)
    evaluable(c, contract_ref)
    if space_ref:
        base = space.load(space_ref, c, project=settings)
    else:
        base, note = default_space(c, levels, llm_ref, settings)
        if note:
            on_note(note)
    ev = partner.evaluate(record, c, levels, llm_ref=llm_ref, base=base, calibration=host_calibration(settings.home),
                          source=source, repetitions=repetitions, project=settings)
    doc = ev.as_dict()
    note = sprint_note(c, contract_ref, doc.get("model"))
    if note:
        doc["notes"].insert(0, note)
    return PartnerEvaluation(doc, record, c, source, levels, llm_ref, base, settings)
