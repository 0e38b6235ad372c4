"""Is a pilot-decision record (kb/records/pilot_decision.py) borne out by its verification trials?
`luma.kb.ingest.consistency.check_measured` asks this of every pilot decision (they are all measured,
and signed: the gate checks the signature first, as for every measured record).

* Each verification trial is re-judged against the record's contract with the sprint's own judge
  (`luma.kb.ingest.rejudge`, as for pex-trial and optimize-result trials), on the clauses it can be:
  those whose metric the trial observes (a percentile clause: its value, bounds or samples).
  Clauses the pilot judges on its figures — power, energy and cost per accepted output (a power
  model and a price table: simulated, projected or user-supplied, never measured) and error rate
  and availability (judged over its windows) — are not re-judged even when observed: only
  measured evidence re-judges, and a trial's verdict may rest on those figures. Nor are clauses
  the trial has no observation of.
* When every clause is re-judged, the trial's verdict (and a slo-miss / quality-miss cause) must
  be exactly the recomputed one. When some are not, the verdict may be worse than the re-judged
  clauses give (a skipped clause may have failed) but never better: a clause the trial observes
  failing is a FAIL whatever the figures say. A PASS must rest on at least one re-judged clause.
* The verification verdict is its trials' sequential verdict (`luma.kb.records.judge.sequential`):
  an INCONCLUSIVE window extends the verification, the first PASS or FAIL decides and ends it, so
  no trial follows a deciding one.
"""

from __future__ import annotations

from luma.errors import RecordError
from luma.kb.records import judge
from luma.kb.records.pilot_decision import PilotDecision, figure_judged
from luma.kb.ingest.rejudge import check_verdict, rejudge

#: Verdicts from best to worst: a trial with unjudged clauses may be worse than its judged ones.
_RANK = {"PASS": 0, "INCONCLUSIVE": 1, "FAIL": 2}


def check_pilot_decision(rec: PilotDecision, source: str | None) -> None:
    """RecordError (naming the field) unless the decision's verification bears it out."""
    trials = rec.verification.trials
    for i, trial in enumerate(trials):
        _check_trial(rec.contract.clauses, trial, source, f"verification.trials[{i}]")
    verdicts = [t.verdict for t in trials]
    decided = next((i for i, v in enumerate(verdicts) if v != "INCONCLUSIVE"), len(verdicts) - 1)
    if decided < len(verdicts) - 1:
        raise RecordError(f"trial {decided + 1} follows the verification's deciding {verdicts[decided]} trial "
                          f"{decided}: a verification ends at its first PASS or FAIL window",
                          source=source, field=f"verification.trials[{decided + 1}]")
    combined = judge.sequential(verdicts)
    if combined != rec.verification.verdict:
        raise RecordError(f"verdict {rec.verification.verdict} but its trials ({', '.join(verdicts)}) decide "
                          f"{combined} (INCONCLUSIVE windows extend a verification, the first PASS or FAIL "
                          "decides it)", source=source, field="verification.verdict")


def _check_trial(clauses, trial, source: str | None, where: str) -> None:
    observed = {o.metric for o in trial.observations}
    judged = [c for c in clauses if not figure_judged(c.metric) and _observes(observed, c.metric)]
    if len(judged) == len(clauses):
        check_verdict(clauses, trial.observations, trial.failure_cause, trial.verdict, source=source, where=where)
        return
    cause = trial.failure_cause
    if cause and not judge.is_clause_cause(cause):
        # A physical failure (oom, timeout, crash) is a FAIL whatever was observed.
        check_verdict(judged, trial.observations, cause, trial.verdict, source=source, where=where)
        return

    def refuse(field: str, message: str) -> None:
        raise RecordError(message, source=source, field=f"{where}.{field}")

    if cause and trial.verdict != "FAIL":
        refuse("verdict", f"verdict {trial.verdict} but failure_cause {cause!r}: a failed trial is a FAIL")
    if not judged and trial.verdict == "PASS":
        names = ", ".join(sorted({c.metric for c in clauses if not figure_judged(c.metric)})) or "none"
        refuse("observations", f"a PASS rests on no observation ingest can judge: the trial observes none of the "
                               f"contract's clauses judged on measurements ({names})")
    got = rejudge(judged, trial.observations, None, source=source, where=where)
    if _RANK[trial.verdict] < _RANK[got.verdict]:
        tail = "" if got.verdict == "FAIL" else f": {got.verdict}"
        refuse("verdict", f"verdict {trial.verdict} but {got.reasons[0]}{tail}")
    if cause and got.cause and not set(got.cause.split("+")) <= set(cause.split("+")):
        refuse("failure_cause", f"failure_cause {cause!r} but the failing clauses give {got.cause!r} "
                                f"({'; '.join(got.reasons)})")


def _observes(observed: set[str], metric: str) -> bool:
    """Whether the trial observes what a clause on `metric` is judged on (a percentile: its
    value, its confidence bounds or its sample count; rejudge then asks for the rest)."""
    if judge.quantile_of(metric) is None:
        return metric in observed
    return any(metric + suffix in observed for suffix in ("", ".ci_low", ".ci_high", ".samples"))
