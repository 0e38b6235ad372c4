"""What a contract clause needs observed before ingest can re-judge it, derived from the metric
registry (`luma.kb.records.metrics`) and the verdict rules (`luma.kb.records.judge`), so the schema,
the record templates (`luma record template`) and the docs say exactly what `luma.kb.ingest.rejudge`
asks for:

* a **percentile** clause (`p95_ttft <= 500 ms`): the statistic itself (`p95_ttft`), its
  confidence bounds (`p95_ttft.ci_low`, `p95_ttft.ci_high`, in a unit of the metric's kind) and
  the number of samples behind it (`p95_ttft.samples`, else `completed_requests`, in `request`);
  no samples FAIL, fewer than the request-count rule's minimum INCONCLUSIVE;
* any **other** clause (`quality >= 0.9`): one observation of its metric (a single measurement,
  the interval [v, v]).
"""

from __future__ import annotations

from dataclasses import dataclass

from luma.kb.records import judge, metrics

#: Percentiles the table spells out (any `pNN` or `pNN.N` between 0 and 100 is accepted).
SHOWN_QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)


@dataclass(frozen=True)
class Need:
    """One observation a clause is judged on: its metric name, unit kind and role."""

    metric: str
    unit: str  # the kind's example unit ("ms", "request")
    role: str


def needs(metric: str) -> tuple[Need, ...]:
    """The observations a clause on `metric` needs (empty for a metric the registry does not know)."""
    kind = metrics.kind_of(metric)
    if kind is None:
        return ()
    q = judge.quantile_of(metric)
    if q is None:
        return (Need(metric, kind.example, f"the measured value ({kind.description})"),)
    n = judge.min_requests(q)
    pct = f"{judge.CONFIDENCE:.0%}"
    return (
        Need(metric, kind.example, f"the measured {_pct(q)}th percentile ({kind.description}; shown, the "
                                   "bounds decide)"),
        Need(metric + ".ci_low", kind.example, f"lower bound of the {pct} confidence interval of {metric}"),
        Need(metric + ".ci_high", kind.example, f"upper bound of the {pct} confidence interval of {metric}"),
        Need(metric + ".samples", "request", f"requests {metric} was computed from (else `completed_requests`): "
                                             f"at least {n} for a PASS or FAIL, fewer is INCONCLUSIVE, none FAIL"),
    )


def role(metric: str) -> str | None:
    """What an observation named `metric` is for a clause (`p95_ttft.samples` -> its sample count);
    None for telemetry no clause reads."""
    base = metric
    for suffix in (".ci_low", ".ci_high", ".samples"):
        base = base.removesuffix(suffix)
    for need in needs(base):
        if need.metric == metric:
            return f"{need.role}; unit {need.unit} (or another of its kind)"
    if metric == "completed_requests":
        return "requests that completed: the sample count of a percentile with no `.samples` of its own"
    return None


def clause_text(metric: str) -> str:
    """One sentence: what a clause on `metric` needs observed in each trial."""
    names = [n.metric for n in needs(metric)]
    if not names:
        return f"{metric} is not a registered metric ({metrics.known()})"
    q = judge.quantile_of(metric)
    if q is None:
        return f"judged on one observation `{metric}`"
    return (f"judged on `{names[1]}`/`{names[2]}` (the {judge.CONFIDENCE:.0%} interval) and `{names[3]}` "
            f"(at least {judge.min_requests(q)} requests); `{metric}` itself is shown")


def table() -> list[dict]:
    """Rows metric, kind, unit, observations, judged: one per registered metric and per percentile
    pattern, for `luma kb schema --observations` and the schema's description."""
    rows = []
    for phase in metrics.PERCENTILE_OF:
        for q in SHOWN_QUANTILES:
            metric = f"p{_pct(q)}_{phase}"
            rows.append(_row(metric, f"{judge.CONFIDENCE:.0%} interval; ≥ {judge.min_requests(q)} samples"))
    for metric in sorted(metrics.METRICS):
        rows.append(_row(metric, "one value"))
    return rows


def _row(metric: str, judged: str) -> dict:
    kind = metrics.kind_of(metric)
    names = [n.metric for n in needs(metric)]
    shown = names[0] + "".join(f" {n.removeprefix(metric)}" for n in names[1:])  # p95_ttft .ci_low .ci_high …
    return {"metric": metric, "kind": kind.description, "unit": kind.example, "observations": shown,
            "judged": judged}


def summary() -> str:
    """The rules in a paragraph, for the JSON Schema's description of Observation."""
    counts = ", ".join(f"p{_pct(q)} {judge.min_requests(q)}" for q in SHOWN_QUANTILES)
    return (
        "One observed metric of a trial: `metric`, `value`, `unit` (a unit of the metric's kind, "
        "kb/records/metrics.py). What each contract clause needs observed in every trial (ingest re-judges "
        "measured trials with the sprints' own rules, kb/records/judge.py): a percentile clause "
        "(`pNN_latency|ttft|tpot`, e.g. p95_ttft) needs `<metric>.ci_low` and `<metric>.ci_high` (its "
        f"{judge.CONFIDENCE:.0%} confidence bounds, in a time unit) and `<metric>.samples` (the requests it "
        "was computed from, unit `request`; else `completed_requests`), and shows `<metric>` itself; fewer "
        f"samples than the request-count rule's minimum ({counts} at {judge.CONFIDENCE:.0%}) make the "
        "clause INCONCLUSIVE, none FAIL. Any other clause needs one observation of its metric. "
        "`luma kb schema --observations` prints the table per metric."
    )


def _pct(q: float) -> str:
    return f"{q * 100:g}"
