"""A trial's verdict recomputed from what it observed: the clauses of its contract judged, by
the sprint's own rules (`luma.kb.records.judge`), on the observations the record carries.

* A percentile clause (`p95_latency`) is judged on its interval (`p95_latency.ci_low`,
  `.ci_high`) and the number of samples behind it (`p95_latency.samples`, which sprints write,
  else `completed_requests`): no samples FAIL, fewer than `min_requests(q)` INCONCLUSIVE.
* Any other clause is judged on the observation of its metric (a single measurement).
* A failure cause the judge does not derive from the clauses (`oom`, `timeout`, `crash`, …) is
  a FAIL whatever was observed; `slo-miss` / `quality-miss` must be what the clauses give.

Values are compared in their canonical units, so `61 ms` and `0.061 s` are one value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from luma.errors import RecordError
from luma.kb.records import judge, units
from luma.kb.records.pex_chain import Clause, Observation


@dataclass(frozen=True)
class Judgement:
    """The recomputed verdict, its failure cause, and why (the clauses that decided it)."""

    verdict: str
    cause: str | None
    #: The reasons, as functions that word them: wording costs more than judging, and a batch of
    #: 100k chains needs the words only for the records it refuses.
    why: tuple = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(w() if callable(w) else w for w in self.why)


def rejudge(clauses: Sequence[Clause], observations: Sequence[Observation], failure_cause: str | None, *,
            source: str | None = None, where: str = "") -> Judgement:
    """The verdict `clauses` give on `observations`; RecordError (field `where.observations`)
    when a clause has nothing to be judged on."""
    if failure_cause and not judge.is_clause_cause(failure_cause):
        return Judgement("FAIL", failure_cause, (f"failure_cause {failure_cause!r}",))
    seen = _Observed(observations, source, where)
    results, problems = [], []
    for c in clauses:
        # Every clause is judged whatever another lacks, so a record learns all it lacks at once.
        try:
            results.append(_clause(c, seen))
        except RecordError as exc:
            problems.append(exc)
    if problems:
        raise RecordError.of(problems, source)
    verdict = judge.combine(v for v, _ in results)
    cause = judge.failure_cause(judge.clause_cause(c.metric) for c, (v, _) in zip(clauses, results) if v == "FAIL")
    return Judgement(verdict, cause if verdict == "FAIL" else None, tuple(why for v, why in results if v == verdict))


def check_verdict(clauses: Sequence[Clause], observations: Sequence[Observation], failure_cause: str | None,
                  verdict: str, *, source: str | None = None, where: str = "", label: str = "") -> None:
    """RecordError unless `verdict` (and a stated clause cause) is what `rejudge` recomputes.
    `where`: the trial's field path (`trials[3]`); `label`: a prefix for the message."""
    def refuse(field: str, message: str) -> None:
        raise RecordError(label + message, source=source, field=f"{where}.{field}" if where else field)

    if failure_cause == judge.CONTENDED:
        # INCONCLUSIVE because the host was contended: the contention the trial observed must say so
        # (by the sprint's own rule); the clauses are not re-judged, since an INCONCLUSIVE can neither
        # qualify a state nor move a boundary whatever they give.
        if verdict != "INCONCLUSIVE":
            refuse("verdict", f"verdict {verdict} but failure_cause {failure_cause!r}: a contended trial is "
                              "INCONCLUSIVE")
        if not contention_reasons(observations, source, where):
            refuse("failure_cause", f"failure_cause {failure_cause!r} but the trial's host_steal / host_cotenant "
                                    "observations show no contention over the limits "
                                    f"({', '.join(f'{k} {v:g} %' for k, v in judge.CONTENTION_LIMITS.items())})")
        return
    if failure_cause and verdict != "FAIL":
        refuse("verdict", f"verdict {verdict} but failure_cause {failure_cause!r}: a failed trial is a FAIL")
    got = rejudge(clauses, observations, failure_cause, source=source, where=where)
    if got.verdict != verdict:
        if got.verdict == "PASS":
            refuse("verdict", f"verdict {verdict} but every clause holds: {'; '.join(got.reasons)}")
        tail = "" if got.verdict == "FAIL" else f": {got.verdict}"
        refuse("verdict", f"verdict {verdict} but {got.reasons[0]}{tail}")
    if failure_cause and judge.is_clause_cause(failure_cause) and got.cause != failure_cause:
        refuse("failure_cause", f"failure_cause {failure_cause!r} but the failing clauses give {got.cause!r} "
                                f"({'; '.join(got.reasons)})")


def contention_reasons(observations: Sequence[Observation], source: str | None = None, where: str = "") -> list[str]:
    """Why the trial's serve phase counts as contended, by `judge.contention_reasons` on its
    `host_steal`, `host_cotenant` (shares) and `host_cotenant_cpu_time` observations."""
    seen = _Observed(observations, source, where)
    steal, cotenant, cpu_s = (seen.get(m) for m in ("host_steal", "host_cotenant", "host_cotenant_cpu_time"))
    return judge.contention_reasons(None if steal is None else 100 * steal,
                                    None if cotenant is None else 100 * cotenant, cpu_s)


class _Observed:
    """A trial's observations by metric, in canonical units; a metric observed twice is refused
    when a clause needs it (which of the two would the verdict rest on?)."""

    def __init__(self, observations: Sequence[Observation], source: str | None, where: str):
        self.first: dict[str, Observation] = {}
        self.twice: set[str] = set()
        for o in observations:
            if o.metric in self.first:
                self.twice.add(o.metric)
            else:
                self.first[o.metric] = o
        self.source, self.field = source, f"{where}.observations" if where else "observations"

    def get(self, metric: str) -> float | None:
        if metric in self.twice:
            raise RecordError(f"{metric} is observed twice: a clause is judged on one observation",
                              source=self.source, field=self.field)
        o = self.first.get(metric)
        return None if o is None else units.normalise(o.value, o.unit)[0]

    def need(self, metric: str, clause: Clause, what: str = "") -> float:
        value = self.get(metric)
        if value is None:
            raise self.missing(metric, clause, what)
        return value

    def missing(self, metric: str, clause: Clause, what: str = "") -> RecordError | None:
        """The error for an observation a clause needs and the trial lacks; None when it has it."""
        if metric in self.first:
            return None
        return RecordError(f"no observation {metric!r} to judge the clause {_text(clause)}{what}",
                           source=self.source, field=self.field)


def _clause(c: Clause, seen: _Observed):
    """(verdict, a function that words the reason) of one clause."""
    threshold = units.normalise(c.value, c.unit)[0]
    q = judge.quantile_of(c.metric)
    if q is None:
        v = seen.need(c.metric, c)
        verdict = judge.interval_verdict(v, v, c.op, threshold)
        return verdict, lambda: f"{c.metric} {_shown(v, c)} {_side(verdict, c.op)} {_shown(threshold, c)}"
    n = _samples(c, seen)
    if n is None:
        # Without a count the bounds are asked for too: a percentile clause needs both.
        missing = [seen.missing(c.metric + b, c, " (its confidence bounds)") for b in (".ci_low", ".ci_high")]
        raise RecordError.of([_uncounted(c, seen), *filter(None, missing)], seen.source)
    if n < judge.min_requests(q):
        verdict = judge.sampled_verdict(None, None, n, q, c.op, threshold)
        if n == 0:
            return verdict, lambda: f"{c.metric} has no samples"
        return verdict, lambda: (f"{c.metric} rests on {n} samples, fewer than the {judge.min_requests(q)} its "
                                 "interval needs")
    lo, hi = (seen.get(c.metric + b) for b in (".ci_low", ".ci_high"))
    if lo is None or hi is None:
        missing = [seen.missing(c.metric + b, c, " (its confidence bounds)") for b in (".ci_low", ".ci_high")]
        raise RecordError.of(list(filter(None, missing)), seen.source)
    if lo > hi:
        raise RecordError(f"{c.metric}.ci_low {_shown(lo, c)} is above {c.metric}.ci_high {_shown(hi, c)}",
                          source=seen.source, field=seen.field)
    verdict = judge.sampled_verdict(lo, hi, n, q, c.op, threshold)

    def interval() -> str:
        return f"[{_number(lo, c)}, {_number(hi, c)}]{_unit(c)}"

    if verdict == "INCONCLUSIVE":
        return verdict, lambda: f"{c.metric} interval {interval()} straddles {_shown(threshold, c)}"
    point = seen.get(c.metric)
    if point is None or judge.holds(point, c.op, threshold) != (verdict == "PASS"):  # the interval decides
        return verdict, lambda: f"{c.metric} interval {interval()} {_side(verdict, c.op)} {_shown(threshold, c)}"
    return verdict, lambda: (f"{c.metric} {_shown(point, c)} {_side(verdict, c.op)} {_shown(threshold, c)} "
                             f"(interval {interval()})")


def _samples(c: Clause, seen: _Observed) -> int | None:
    """The number of samples behind a percentile: its own count, else the completed requests;
    None when the trial observes neither."""
    for metric in (c.metric + ".samples", "completed_requests"):
        n = seen.get(metric)
        if n is not None:
            if n < 0 or n != int(n):
                raise RecordError(f"{metric} must be a whole number of samples, got {n:g}",
                                  source=seen.source, field=seen.field)
            return int(n)
    return None


def _uncounted(c: Clause, seen: _Observed) -> RecordError:
    return RecordError(f"no observation {c.metric + '.samples'!r} or 'completed_requests': the samples behind "
                       f"{c.metric} cannot be counted", source=seen.source, field=seen.field)


def _side(verdict: str, op: str) -> str:
    return op if verdict == "PASS" else judge.NEGATION[op]


def _text(c: Clause) -> str:
    return f"{c.metric} {c.op} {c.value:g}{_unit(c)}"


def _number(canonical: float, c: Clause) -> str:
    """A canonical value in the clause's own unit (0.061 s -> `61` for a clause in ms)."""
    return f"{canonical / units.normalise(1, c.unit)[0]:.4g}"


def _shown(canonical: float, c: Clause) -> str:
    return _number(canonical, c) + _unit(c)


def _unit(c: Clause) -> str:
    return "" if c.unit == "dimensionless" else f" {c.unit}"
