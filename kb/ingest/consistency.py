"""Is a record that claims `measured` self-consistent? Ingest asks this of every measured record
(besides verifying its signature) and refuses, naming the field, what its own evidence does not
bear out. Records of other evidence classes say what they are and are not checked here;
kernel-result and machine records carry no verdict to recompute.

A **pex-trial** record: its verdict is recomputed from its observations against its contract
(`luma.kb.ingest.rejudge`, the sprint's own rules) and must be the stated one.

A **pex-chain** record, trial by trial (`trials[i]`):

* an embedded trial (one with observations, a failure cause, or no `record`) is re-judged
  against the chain's contract;
* a referenced trial (`record`: the content hash of a pex-trial record) must be in
  `trials_by_hash` (the ledger or the same batch), cited once, measured, under the chain's
  contract, workload and architecture, state for state the chain's `pass_state` (a `pass`
  trial) or `fail_state` (a `fail` or `recovered` trial: the intervention runs at the FAIL
  state, as in the sprint), with the chain's verdict for it; and it is re-judged too.

and as a whole (the sprint's own rules, `luma.experiments.sprint.search` / `sprint`):

* it carries trials at all;
* the pass state: every trial PASS (a PASS that does not reproduce is not a PASS), at least
  `repetitions` of them;
* the fail state: at least one FAIL (a PASS among them is the contradiction the search
  records; INCONCLUSIVE alone is no adjacent FAIL);
* `recovered` is true exactly when at least `repetitions` recovered-state trials PASS and every
  one of them does (INCONCLUSIVE is no recovery either), and `recovered: false` rests on a
  measured recovered-state trial that did not PASS.

Its trials one by one are checked by `luma.kb.ingest.consistency_trials`, and its outcomes
(diagnosis, co-binding, frontier shift, next binding, decision) against those trials and its own by
`luma.kb.ingest.consistency_outcomes`.

An **optimize-result** record (`luma sprint optimize`): every configuration ran at the record's
`load` concurrency (a search may not pass by changing the accepted service); every embedded
trial is re-judged against the contract; and `best` / `throughput` are what the trials give: the
accepted configuration (at least `CONFIRMATIONS` trials, all PASS) with the highest throughput,
counted as the lowest of its trials' (none when no configuration was accepted).

A **pilot-decision** record: its verification trials re-judged on the clauses they observe, and
its verification verdict their combination (`luma.kb.ingest.consistency_pilot`).
"""

from __future__ import annotations

from collections.abc import Mapping

from luma.errors import RecordError
from luma.kb.records import units
from luma.kb.records.pex_chain import PexChain
from luma.kb.records.optimize_result import CONFIRMATIONS, OptimizeResult
from luma.kb.records.pex_trial import PexTrial
from luma.kb.records.pilot_decision import PilotDecision
from luma.kb.ingest.consistency_outcomes import check_outcomes
from luma.kb.ingest.consistency_pilot import check_pilot_decision
from luma.kb.ingest.consistency_trials import check_trial
from luma.kb.ingest.rejudge import check_verdict


def check_measured(record, *, trials_by_hash: Mapping[str, object] | None = None, source: str | None = None) -> None:
    """RecordError unless `record` (a `LoadedRecord` or a record model) is self-consistent or
    does not claim `measured`. `trials_by_hash`: content hash -> pex-trial record (model or
    `LoadedRecord`) of the ledger and the batch, for the trials a chain references."""
    model = getattr(record, "model", record)
    source = source if source is not None else getattr(record, "source", None)
    if getattr(model, "evidence_class", None) != "measured":
        return
    if isinstance(model, PexTrial):
        check_verdict(model.contract.clauses, model.observations, model.failure_cause, model.verdict, source=source)
    elif isinstance(model, PexChain):
        # `is None`, not falsiness: the gate's mapping reads the ledger on demand, and its length
        # counts only the batch's trials (empty when every cited trial is in the ledger already).
        _check_chain(model, trials_by_hash if trials_by_hash is not None else {}, source)
    elif isinstance(model, OptimizeResult):
        _check_optimum(model, source)
    elif isinstance(model, PilotDecision):
        check_pilot_decision(model, source)


def _check_chain(chain: PexChain, trials_by_hash: Mapping[str, object], source: str | None) -> None:
    """Every trial, the counts and the outcomes, each checked whatever the others find; one
    RecordError carrying all their problems."""
    problems: list[RecordError] = []
    cited: set[str] = set()
    for i, trial in enumerate(chain.trials):
        wanted = "pass_state" if trial.state == "pass" else "fail_state"
        try:
            check_trial(chain, trial, trials_by_hash, source, f"trials[{i}]", cited, getattr(chain, wanted), wanted)
        except RecordError as exc:
            problems.append(exc)
    _check_counts(chain, source, problems)
    try:
        check_outcomes(chain, trials_by_hash, source, cited)
    except RecordError as exc:
        problems.append(exc)
    if problems:
        raise RecordError.of(problems, source)


def _check_counts(chain: PexChain, source: str | None, problems: list[RecordError]) -> None:
    """Enough trials, in the right states, for what the chain claims (module docstring); each
    shortfall added to `problems`."""
    def refuse(field: str, message: str) -> None:
        problems.append(RecordError(message, source=source, field=field))

    if not chain.trials:
        return refuse("trials", "a measured chain carries its trials (embedded or referenced by record hash); "
                                "this one has none")
    by_state: dict[str, list[tuple[int, str]]] = {"pass": [], "fail": [], "recovered": []}
    for i, t in enumerate(chain.trials):
        by_state[t.state].append((i, t.verdict))
    reps = chain.repetitions
    for i, verdict in by_state["pass"]:
        if verdict != "PASS":
            refuse(f"trials[{i}].verdict", f"a pass-state trial is {verdict}: the minimum PASS must "
                                           "reproduce in every repetition")
    if len(by_state["pass"]) < reps:
        refuse("trials", f"{len(by_state['pass'])} PASS trial(s) in the pass state, fewer than "
                         f"repetitions ({reps})")
    if not any(v == "FAIL" for _, v in by_state["fail"]):
        refuse("trials", "no FAIL trial in the fail state: the adjacent FAIL was not measured")
    passed = sum(v == "PASS" for _, v in by_state["recovered"])
    others = [(i, v) for i, v in by_state["recovered"] if v != "PASS"]
    if chain.recovered and others:
        i, v = others[0]
        refuse("recovered", f"recovered is true but trials[{i}] (recovered state) is {v}")
    if chain.recovered and passed < reps:
        refuse("recovered", f"recovered is true but {passed} recovered-state trial(s) PASS, fewer than "
                            f"repetitions ({reps})")
    if not chain.recovered and not others:
        detail = f"all {passed} recovered-state trials PASS" if passed else "it has no recovered-state trial"
        refuse("recovered", f"recovered is false but {detail}: a failed recovery is a measured "
                            "recovered-state trial that did not PASS")


def _check_optimum(result: OptimizeResult, source: str | None) -> None:
    """An optimize result agrees with its trials (module docstring)."""
    best, best_at = None, None
    for i, cfg in enumerate(result.configurations):
        where = f"configurations[{i}]"
        if cfg.concurrency != result.load.concurrency:
            _refuse(source, f"{where}.concurrency", f"ran at concurrency {cfg.concurrency}, not the contract's "
                                                    f"{result.load.concurrency}: a search may not pass by changing "
                                                    "the accepted service")
        if cfg.software.service != result.configurations[0].software.service:
            _refuse(source, f"{where}.software.service", "every configuration serves the same service")
        rates = []
        for j, trial in enumerate(cfg.trials):
            check_verdict(result.contract.clauses, trial.observations, trial.failure_cause, trial.verdict,
                          source=source, where=f"{where}.trials[{j}]")
            rates.append(_throughput(trial))
        accepted = len(cfg.trials) >= CONFIRMATIONS and all(t.verdict == "PASS" for t in cfg.trials)
        if accepted and None in rates:
            _refuse(source, f"{where}.trials", "an accepted configuration's trials each observe its throughput")
        if accepted and (best is None or min(rates) > best):
            best, best_at = min(rates), i
    if best_at is None:
        if result.best is not None or result.throughput is not None:
            _refuse(source, "best", f"no configuration was accepted (at least {CONFIRMATIONS} trials, all PASS), "
                                    "so there is no best")
        return
    wanted = result.configurations[best_at].software
    ties = [c.software for c in result.configurations
            if len(c.trials) >= CONFIRMATIONS and all(t.verdict == "PASS" for t in c.trials)
            and min(_throughput(t) for t in c.trials) == best]
    if result.best is None or result.best not in ties:
        _refuse(source, "best", f"the trials make {wanted.variant} {_settings(wanted)} the best accepted "
                                f"configuration ({best:g} requests/s), not "
                                + ("none" if result.best is None else f"{result.best.variant} {_settings(result.best)}"))
    if result.throughput is None:
        _refuse(source, "throughput", "a best configuration states its throughput")
    stated = units.normalise(result.throughput.value, result.throughput.unit)[0]
    if abs(stated - best) > 1e-9 * max(1.0, abs(best)):
        _refuse(source, "throughput.value", f"{stated:g} requests/s, but the lowest of the best configuration's "
                                            f"trials is {best:g}")


def _throughput(trial) -> float | None:
    """The trial's observed throughput in requests per second, None when it has none."""
    for obs in trial.observations:
        if obs.metric == "throughput":
            return units.normalise(obs.value, obs.unit)[0]
    return None


def _settings(cfg) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in sorted(cfg.settings.items())) + ")"


def _refuse(source: str | None, field: str, message: str) -> None:
    raise RecordError(message, source=source, field=field)
