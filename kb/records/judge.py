"""The verdict rules of a PEX trial, in one place: the sprint judges its trials with them
(`luma.experiments.sprint.trial`) and ingest re-judges measured records with them
(`luma.kb.ingest.consistency`), so the two can never disagree. Pure arithmetic: no NumPy, no
sampling (the bootstrap that produces an interval stays in `luma.experiments.sprint.stats`).

**The request-count rule.** A (1 − α) confidence interval for the q-quantile that makes no
assumption about the latency distribution (an order-statistic interval) only exists once the
largest of n samples lies above the q-quantile with probability at least 1 − α/2, i.e.
q**n ≤ α/2, so n ≥ ln(α/2) / ln(q). At 95 % confidence: p50 needs 6 requests, p95 72, p99 368,
p99.9 3,688. Fewer samples than that make a percentile clause INCONCLUSIVE, whatever its
interval says; no samples at all make it FAIL.

**The verdict.** A clause's interval either lies wholly on the passing side of the threshold
(PASS), wholly on the failing side (FAIL), or straddles it (INCONCLUSIVE). A single
measurement (quality, throughput) is the interval [v, v]. A trial FAILs when any clause FAILs,
is INCONCLUSIVE when none FAILs and one is INCONCLUSIVE, and PASSes otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from luma.errors import ContractError

#: Confidence of every interval a verdict rests on.
CONFIDENCE = 0.95
#: Failure causes the judge derives from the clauses themselves (any other cause, `oom`,
#: `timeout`, `crash`, …, is a physical failure: FAIL whatever was observed).
CLAUSE_CAUSES = ("quality-miss", "slo-miss")
#: The failing side of each operator, for messages.
NEGATION = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)_")


def quantile_of(metric: str) -> float | None:
    """0.99 for `p99_latency` / `p99_ttft`, None for a metric that is not a percentile."""
    m = _PERCENTILE.match(metric)
    if not m:
        return None
    q = float(m.group(1)) / 100
    if not 0 < q < 1:
        raise ContractError(f"percentile {m.group(1)} is not between 0 and 100", field=metric)
    return q


def min_requests(q: float, confidence: float = CONFIDENCE) -> int:
    """Fewest samples for which a distribution-free (confidence) interval of the q-quantile exists."""
    if not 0 < q < 1:
        raise ContractError(f"quantile must be in (0, 1), got {q}", field="quantile")
    alpha = 1 - confidence
    return max(1, math.ceil(math.log(alpha / 2) / math.log(q)))


def holds(value: float, op: str, threshold: float) -> bool:
    """Whether `value op threshold`."""
    return {"<=": value <= threshold, "<": value < threshold, ">=": value >= threshold, ">": value > threshold}[op]


def interval_verdict(lo: float, hi: float, op: str, threshold: float) -> str:
    """PASS if the whole interval satisfies `op threshold`, FAIL if none of it does, else INCONCLUSIVE."""
    ok_lo, ok_hi = holds(lo, op, threshold), holds(hi, op, threshold)
    if ok_lo and ok_hi:
        return "PASS"
    if not ok_lo and not ok_hi:
        return "FAIL"
    return "INCONCLUSIVE"


def sampled_verdict(lo: float | None, hi: float | None, samples: int, q: float, op: str, threshold: float) -> str:
    """Verdict of a percentile clause from its interval and the number of samples behind it:
    FAIL without samples, INCONCLUSIVE below `min_requests(q)`, else the interval's verdict."""
    if samples <= 0:
        return "FAIL"
    if samples < min_requests(q):
        return "INCONCLUSIVE"
    return interval_verdict(lo, hi, op, threshold)


def combine(verdicts: Iterable[str]) -> str:
    """A trial's verdict from its clauses' verdicts."""
    seen = set(verdicts)
    if "FAIL" in seen:
        return "FAIL"
    return "INCONCLUSIVE" if "INCONCLUSIVE" in seen else "PASS"


def sequential(verdicts: Iterable[str]) -> str:
    """A verification's verdict over its windows: an INCONCLUSIVE window only extends it, the first
    PASS or FAIL decides (and ends) it; INCONCLUSIVE when no window decided."""
    return next((v for v in verdicts if v != "INCONCLUSIVE"), "INCONCLUSIVE")


def clause_cause(metric: str) -> str:
    """The failure cause a failing clause on `metric` gives its trial."""
    return "quality-miss" if metric == "quality" else "slo-miss"


def failure_cause(causes: Iterable[str]) -> str | None:
    """The trial's cause from its failing clauses' causes (`quality-miss+slo-miss` for both)."""
    distinct = sorted(set(causes))
    return "+".join(distinct) if distinct else None


def is_clause_cause(cause: str) -> bool:
    """True for a cause the judge derives from the clauses (`slo-miss`, `quality-miss+slo-miss`)."""
    return all(part in CLAUSE_CAUSES for part in cause.split("+"))


# -- contention --------------------------------------------------------------------------------
#: The failure cause of a trial a contended host made fail (or left undecided): INCONCLUSIVE, never
#: a FAIL that could move a boundary.
CONTENDED = "host-contended"
#: A trial is contended when, over its serve phase, the hypervisor stole at least `steal` % of the
#: trial's cores' time, or other tenants used at least `cotenant` % of it (and at least
#: CONTENTION_FLOOR_S of CPU time: below that the tick counters cannot tell a neighbour from noise).
CONTENTION_LIMITS = {"steal": 10.0, "cotenant": 10.0}
CONTENTION_FLOOR_S = 0.05
#: Failure causes of time: missed latency/throughput clauses, a load test that ran out of time
#: (what the interleaved A/B of a sprint re-checks).
TIMING_CAUSES = ("slo-miss", "timeout")
#: Failure causes a slower host can produce: the timing ones, and the memory ones that depend on
#: how many requests are in flight at once — a slower host queues more of them, so a batching
#: service batches more and a KV pool holds more sequences (measured: minilm-memory's 112 MiB level,
#: 3/3 PASS idle, failed `oom` beside two busy loops). A quality miss, a crash, a server that could
#: not launch are the state's own whatever the neighbours do.
CONTENTION_CAUSES = (*TIMING_CAUSES, "oom", "kv-capacity")


def contention_reasons(steal_pct: float | None, cotenant_pct: float | None,
                       cotenant_cpu_s: float | None = None) -> list[str]:
    """Why a serve phase counts as contended (empty: it does not, or nothing was measured)."""
    out = []
    if steal_pct is not None and steal_pct >= CONTENTION_LIMITS["steal"]:
        out.append(f"CPU steal {steal_pct:.1f} % >= {CONTENTION_LIMITS['steal']:g} %")
    if (cotenant_pct is not None and cotenant_pct >= CONTENTION_LIMITS["cotenant"]
            and (cotenant_cpu_s is None or cotenant_cpu_s >= CONTENTION_FLOOR_S)):
        out.append(f"other tenants used {cotenant_pct:.1f} % of the trial's cores "
                   f">= {CONTENTION_LIMITS['cotenant']:g} %")
    return out


def timing_only(cause: str | None) -> bool:
    """True when every part of a failure cause is a timing one (TIMING_CAUSES)."""
    return bool(cause) and all(part in TIMING_CAUSES for part in cause.split("+"))


def contention_sensitive(cause: str | None) -> bool:
    """True when every part of a failure cause is one a slower host can produce (CONTENTION_CAUSES)."""
    return bool(cause) and all(part in CONTENTION_CAUSES for part in cause.split("+"))


def contention_verdict(verdict: str, cause: str | None, reasons: list[str]) -> tuple[str, str | None]:
    """The verdict once contention is judged: a FAIL whose causes a slower host can produce, or an
    INCONCLUSIVE, on a contended serve phase becomes INCONCLUSIVE `host-contended`; a PASS stands
    (a neighbour never makes a state pass) and so does a FAIL the state caused itself."""
    if not reasons or verdict == "PASS":
        return verdict, cause
    if verdict == "INCONCLUSIVE" or (verdict == "FAIL" and contention_sensitive(cause)):
        return "INCONCLUSIVE", CONTENDED
    return verdict, cause
