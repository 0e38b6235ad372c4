"""`luma chain assemble`: a pex-chain record built from pex-trial records already in the ledger
(imported by `luma import …`, or measured by sprints), cited by content hash.

The chain is what a sprint would have written from the same trials (experiments/sprint/records.py
`chain_record`): trials at the minimum PASS state, the adjacent FAIL and the intervention's
recovered state, the restorations at the FAIL state as its diagnosis, `repetitions` counted the
same way (`chain_repetitions`). It then passes exactly the checks ingest gives a sprint's chain
(kb/ingest/consistency.py: every cited trial re-judged, same contract, workload and architecture,
states and verdicts as cited), before it is signed, and again at ingest. Trials of any class are
checked so; the chain takes their class, so vendor-claim trials make a vendor-claim chain (never
measured), and a measured chain is signed with a runner key (`--key`, else the project's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from luma.errors import ContractError, RecordError
from luma.experiments.chains.boundary import Boundary, Service, find, verdicts_text
from luma.experiments.chains.document import chain_document
from luma.experiments.chains.selection import Selection, TrialRecord, select_trials
from luma.experiments import services
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint.states import describe
from luma.kb.ingest.consistency import check_measured
from luma.kb.ingest.evidence_gate import check_before_open
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.records.dimensions import record_dimensions
from luma.kb.records.loader import LoadedRecord, validate_document
from luma.kb.records.pex_chain import Level
from luma.kb.trust import attestation
from luma.kb.trust.runners import signer
from luma.rules import loader as rules

QUALIFYING_RULE = "qualified-boundary"


@dataclass(frozen=True)
class AssembleConfig:
    """What to assemble: the trials (`selection`), and what the contract would otherwise say —
    the crossed `dimension`, the `intervention` and its `variant`, the `baseline` variant — and
    the runner `key` that signs a measured chain (None: the project's signing key)."""

    selection: Selection
    dimension: str | None = None
    intervention: str | None = None
    variant: str | None = None
    baseline: str | None = None
    key: str | None = None


@dataclass
class Assembly:
    """What `assemble_chain` found and did: the states it read, what is missing (then no chain),
    notes on why a built chain will not qualify, and the chain as signed and ingested or written."""

    selection: str
    considered: int = 0
    states: list[dict] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    chain: dict | None = None
    content_hash: str | None = None
    ingested: bool = False
    duplicate: bool = False
    written: Path | None = None

    def summary(self) -> dict:
        """The chain's boundary in one row (empty without a chain)."""
        c = self.chain
        if c is None:
            return {}
        dim = c["crossed_dimension"]
        level = lambda s: describe(Level.model_validate(c[s]["dimensions"][dim]))  # noqa: E731 - two uses, one line
        return {"evidence_class": c["evidence_class"], "contract": c["contract"]["name"], "crossed_dimension": dim,
                "min_pass": level("pass_state"), "adjacent_fail": level("fail_state"),
                "binding_resource": c["binding_resource"], "co_binding": ", ".join(c.get("co_binding") or []),
                "intervention": c["intervention"]["name"], "recovered": c["recovered"],
                "repetitions": c["repetitions"], "trials": len(c["trials"]), "record": self.content_hash}


def assemble_chain(settings, config: AssembleConfig, ingest: bool = True, out: Path | None = None) -> Assembly:
    """Build the chain of `config`'s trials, check it as ingest checks a sprint's, sign it, and
    ingest it (all or nothing) unless not `ingest`; write it to `out` when given. An Assembly with
    `missing` lines (and nothing written) when the trials do not make a chain; RecordError when a
    cited trial does not bear out its own verdict, TrustError when the key cannot sign."""
    sel = config.selection
    trials = select_trials(settings, sel)
    a = Assembly(sel.describe(), considered=len(trials))
    if not trials:
        a.missing.append(f"no pex-trial record in the ledger matches {a.selection}")
        return a
    a.missing = _mixed(trials)
    if a.missing:
        return a
    service = _service(trials[0].model.contract.name, settings, config)
    dims = record_dimensions(settings.home)
    b = find(trials, service, config.dimension, config.intervention, config.variant,
             frozenset(k for k, d in dims.items() if d.categorical))
    a.states, a.missing = _states(b, service), list(b.missing)
    if a.missing:
        return a
    if config.dimension is not None and config.dimension not in dims:
        a.missing.append(f"unknown dimension {config.dimension!r}")
        return a
    doc = chain_document(b)
    rec = validate_document(doc, "assembled chain", settings.home, dims)
    _check(rec, trials)
    a.notes = _notes(doc, b, _min_repetitions(settings))
    key = config.key or attestation.default_key(settings.home, settings.runner_key)
    if doc["evidence_class"] == "measured" and key is None:
        a.missing.append("a measured chain is signed by a runner key: this project has none (`luma runner keygen`); "
                         "name one with --key")
        return a
    if key is not None:
        rec = signer(settings.home, key).attest(rec)
    if out is not None:
        rec = replace(rec, source=str(out))  # the ledger names the file the chain was written to
    a.chain, a.content_hash = json.loads(rec.payload), rec.content_hash
    if ingest:
        with KnowledgeBase.open(settings) as kb:
            report = kb.ingest_records([rec], submitter=None)
        a.ingested, a.duplicate = bool(report.added), bool(report.duplicates)
    else:
        check_before_open(settings, [rec])  # the gate ingest would apply: key trusted, trials consistent
    if out is not None:
        out.write_text(json.dumps(a.chain, indent=1))
        a.written = out
    return a


def _mixed(trials: list[TrialRecord]) -> list[str]:
    """One line per part the trials disagree on (a chain is of one contract, workload,
    architecture and evidence class)."""
    out = []
    for part in ("contract", "workload", "architecture", "evidence_class"):
        groups: dict[str, list] = {}
        for t in trials:
            value = getattr(t.model, part)
            groups.setdefault(value if isinstance(value, str) else value.model_dump_json(), []).append(value)
        if len(groups) > 1:
            names = [v[0] if isinstance(v[0], str) else v[0].name for v in groups.values()]
            what = (f"{len(groups)} versions of {part} {names[0]!r} (their clauses or load differ)"
                    if len(set(names)) == 1 else f"{len(groups)} {part.replace('_', ' ')}es"
                    if part.endswith("class") else f"{len(groups)} {part}s")
            counts = ", ".join(f"{n} ({len(v)})" for n, v in zip(names, groups.values()))
            out.append(f"trials of {what} mixed: {counts}; narrow the selection by {part.replace('_', ' ')}")
    return out


def _service(name: str, settings, config: AssembleConfig) -> Service:
    """The contract's baseline, interventions and sprint dimension (shipped, or a project file
    of that name), with what the user named over them."""
    try:
        contract = contracts.load(name, settings)
    except ContractError:
        contract = None
    base = Service()
    if contract is not None:
        spec = contract.sprint
        if contract.endpoint is not None:
            ep = contract.endpoint
            base = Service(ep.baseline, dict(ep.interventions), spec.dimension if spec else None)
        else:
            svc = services.get(contract.service)
            base = Service(getattr(svc, "baseline", "fp32"), dict(svc.interventions), spec.dimension if spec else None)
    return Service(config.baseline or base.baseline, base.interventions, base.dimension)


def _states(b: Boundary, service: Service) -> list[dict]:
    """The rows the command prints: each level tried, the restorations, the intervention's trials."""
    rows = [{"role": "", "state": f"{b.dimension} {text}", "variant": service.baseline,
             "verdicts": verdicts_text(v), "trials": len(v)} for text, v in b.levels]
    for role, group in (("pass", b.pass_trials), ("fail", b.fail_trials)):
        if group:
            text = describe(group[0].model.state.dimensions[b.dimension])
            next(r for r in rows if r["state"] == f"{b.dimension} {text}")["role"] = role
    for dim, level, group in b.restorations:
        rows.append({"role": "diagnosis", "state": f"FAIL state, {dim} {describe(level)}", "variant": service.baseline,
                     "verdicts": verdicts_text([t.model.verdict for t in group]), "trials": len(group)})
    if b.recovered_trials:
        v = [t.model.verdict for t in b.recovered_trials]
        # At the FAIL state (its other levels held, as in the rows above): the crossed level alone.
        level = b.recovered_trials[0].model.state.dimensions[b.dimension]
        rows.append({"role": "recovered", "state": f"{b.dimension} {describe(level)}",
                     "variant": b.variant, "verdicts": verdicts_text(v), "trials": len(v)})
    return rows


def _check(rec: LoadedRecord, trials: list[TrialRecord]) -> None:
    """Ingest's checks of a measured chain (kb/ingest/consistency.py), whatever the class: a
    vendor-claim chain is held to the same trials, re-judged, as a measured one would be."""
    chain = rec.model.model_copy(update={"evidence_class": "measured"})
    cited = {t.content_hash: t.model.model_copy(update={"evidence_class": "measured"}) for t in trials}
    try:
        check_measured(chain, trials_by_hash=cited, source=rec.source)
    except RecordError as exc:
        # Name the ledger's trial record, not only the chain's row: that record is what to look at.
        m = re.match(r"trials\[(\d+)\]", exc.field or "")
        row = chain.trials[int(m.group(1))] if m else None
        if row is None or row.record is None:
            raise
        t = next(t.model for t in trials if t.content_hash == row.record)
        raise RecordError(f"trial record {row.record[:12]} (sprint {t.sprint!r}, sequence {t.sequence}) does not bear "
                          f"out its verdict: {exc.message}", source=exc.source, field=exc.field) from None


def _notes(doc: dict, b: Boundary, needed: int) -> list[str]:
    """Why the chain, once ingested, will not qualify under the rules (nothing when it will)."""
    out = []
    if doc["evidence_class"] != "measured":
        out.append(f"the trials are {doc['evidence_class']} evidence, so the chain is too: only measured chains "
                   "qualify")
    if not doc["recovered"]:
        out.append(f"the intervention {b.intervention} did not recover PASS at the FAIL state: the chain is "
                   "evidence of that, not a qualified boundary")
    counts = {"PASS": len(b.pass_trials), "recovered": len(b.recovered_trials)}
    for state, n in counts.items():
        if n < needed and (state == "PASS" or doc["recovered"]):
            out.append(f"only {n} repetition{'s' * (n != 1)} at the {state} state; the qualification rule needs "
                       f"{needed} (min_repetitions)")
    return out


def _min_repetitions(settings) -> int:
    """The qualification rule's min_repetitions (its default; a rules run may ask for more)."""
    rule = next(r for r in rules.load_all(settings.home / "rules") if r.id == QUALIFYING_RULE)
    return int(rule.params["min_repetitions"].default)
