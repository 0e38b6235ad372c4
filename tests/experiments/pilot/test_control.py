"""The control loop on a simulated host: each library state has a true live capacity (what the
host gives it now, which its qualification may over- or understate), a window's p95 follows
from it with a batching server's queueing, and its server's CPU grows with the rate up to its
cores. The controller sees only what it would see live (rate, p95, verdict, CPU), so these
tests check its decisions — never sitting on a state that failed, labels by capacity, and the
economics of the measured margin on the shipped diurnal trace — without a server."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from luma.experiments.pilot import library as lib, trace as trace_mod
from luma.experiments.pilot.control import Controller
from luma.experiments.pilot.library import LibraryState
from luma.experiments.pilot.predict import LN20, Predictor, measured_margin
from luma.experiments.pilot.run import Guard

WINDOW = 6.0
SLO = 0.150
GUARD = Guard(None, 0.1, 12, 2, 2)  # the shipped contract's guardrails, the margin measured


def _state(key: str, cores: int, cost: float, throughputs) -> LibraryState:
    settings = {"max_batch": 8, "threads": 1, **({"replicas": cores} if cores > 1 else {})}
    return LibraryState(key * 12, {"compute": {"value": cores, "unit": "core"}}, "fp32", settings, min(throughputs),
                        0.08, 1.0, len(throughputs), cost_per_hour=cost, currency="USD", cores=cores,
                        throughputs=list(throughputs))


def _shipped_library(one=(162.7, 149.7), two=(315.7, 247.8)):
    """The docs' library: one core and two cores as two replicas, with their trials' throughputs."""
    return [_state("a", 1, 0.040 + 0.005 / 2, one), _state("b", 2, 0.080 + 0.005 / 2, two)]


class Host:
    """What each state serves live. p95 = 30 ms + 0.5·ln 20 / (capacity − λ), FAIL above the SLO.
    The window's Poisson arrivals are served as a batching server does: each replica (one per
    core), when free, takes up to 8 of the requests waiting and serves them in d(n) = b·(1 + n)
    seconds (a forward pass's fixed cost equal to one request's, as MiniLM's 4 + 3.8·n ms on one
    EPYC core), b set so full batches give the capacity; durations carry 5 % noise. The server's
    CPU is its replicas' busy time, so it grows slower than the rate, as live; 3 % noise."""

    def __init__(self, capacity: dict[str, float], seed: int = 0):
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)

    def serve(self, state: LibraryState, rate: float) -> tuple[float, str, float, list]:
        cap, top = self.capacity[state.key], 8
        p95 = 0.03 + 0.5 * LN20 / (cap - rate) if rate < cap else 5.0
        rows = self._batches(rate, state.cores, state.cores * top / (cap * (1 + top)), top)
        busy = min(state.cores, sum(r[2] for r in rows) / WINDOW) * float(self.rng.normal(1.0, 0.03))
        return p95, "PASS" if p95 <= SLO else "FAIL", busy, rows

    def _batches(self, rate: float, replicas: int, b: float, top: int) -> list:
        arrivals = np.sort(self.rng.uniform(0.0, WINDOW, self.rng.poisson(rate * WINDOW)))
        free, rows, i = [0.0] * replicas, {}, 0
        while i < len(arrivals):
            r = min(range(replicas), key=free.__getitem__)
            start = max(free[r], arrivals[i])
            size = min(top, int(np.searchsorted(arrivals, start, side="right")) - i)
            d = b * (1 + size) * float(self.rng.normal(1.0, 0.05))
            free[r] = start + d
            row = rows.setdefault(size, [size, 0, 0.0, 0.0])
            row[1] += 1
            row[2] += d
            row[3] += d * d
            i += size
        return [rows[n] for n in sorted(rows)]


def _rates(seed: int = 0) -> list[float]:
    """The shipped diurnal trace, one observed rate per window (Poisson counts)."""
    tr = trace_mod.load("diurnal")
    rng = np.random.default_rng(seed)
    n = int(math.ceil(tr.duration / WINDOW))
    return [rng.poisson(tr.mean_rate(w * WINDOW, min((w + 1) * WINDOW, tr.duration)) * WINDOW) / WINDOW
            for w in range(n)]


def simulate(library, host: Host, rates, start: str | None = None, margin: float | None = None, cpu: bool = True,
             batches: bool = True):
    """Run the controller over `rates`; (windows, decisions as (action, from, to, outcome,
    verification window verdicts)). `cpu`, `batches`: whether the windows report the server's
    CPU and its batches."""
    pred = Predictor(library, SLO, margin, WINDOW)
    ctx = SimpleNamespace(predictor=pred, guard=Guard(margin, *list(vars(GUARD).values())[1:]), window_s=WINDOW,
                          library_state=lambda k: lib.find(library, k))
    seg = SimpleNamespace(windows=[], apply=lambda key: lib.find(library, key))
    decisions = []
    ctl = Controller(ctx, seg, lambda p, outcome, w, ws: decisions.append(
        (p.action, p.from_key, p.to_key, outcome, [x["verdict"] for x in p.windows])))
    ctl.active = start or pred.choose(rates[0]).key
    for w, rate in enumerate(rates):
        state = lib.find(library, ctl.active)
        p95, verdict, busy, rows = host.serve(state, rate)
        fig = {"index": w, "start_s": w * WINDOW, "end_s": (w + 1) * WINDOW, "rate_observed": rate,
               "p95_latency": p95, "verdict": verdict, "state": state.key, **({"cpu_s": busy * WINDOW} if cpu else {}),
               **({"service": rows} if batches else {}),
               "requests": round(rate * WINDOW), "cost": state.cost_per_hour * WINDOW / 3600}
        ctl.step(w, fig)
        seg.windows.append(fig)
    return seg.windows, decisions


def _economics(windows) -> tuple[float, float]:
    """(cost per accepted request, share of requests outside the contract)."""
    accepted = sum(w["requests"] for w in windows if w["verdict"] != "FAIL")
    outside = sum(w["requests"] for w in windows if w["verdict"] == "FAIL")
    return sum(w["cost"] for w in windows) / max(1, accepted), outside / sum(w["requests"] for w in windows)


def _hindsight(library, host, rates) -> tuple[str, float]:
    """The cheapest single state that keeps at most 1 % outside on these rates, and its cost per accepted."""
    best = None
    for s in sorted(library, key=lambda s: s.cost_per_hour):
        ws = [{"requests": round(r * WINDOW), "cost": s.cost_per_hour * WINDOW / 3600,
               "verdict": host.serve(s, r)[1]} for r in rates]
        cpa, out = _economics(ws)
        if out <= 0.01:
            return s.key, cpa
        best = best or (s.key, cpa)
    return best


def _never_twice_on_a_failed_state(windows) -> None:
    for before, after in zip(windows, windows[1:]):
        assert not (before["verdict"] == "FAIL" and after["state"] == before["state"]), \
            f"window {after['index']} still on {after['state']} after it failed window {before['index']}"


# -- never sits on a failing state (issue 32: 11 windows on a state that failed verification) --


def test_a_state_that_fails_is_left_within_one_window_for_the_more_capable_one():
    # The library: S1 (1 core) measured 195.9/s, S2 (2 cores x 2 replicas) 193.1/s —
    # the dearer state is the less capable one. A neighbour leaves S2 80/s live.
    s1, s2 = _state("a", 1, 0.04, (195.9, 201.0)), _state("b", 2, 0.08, (193.1, 199.0))
    host = Host({s1.key: 200.0, s2.key: 80.0})
    windows, decisions = simulate([s1, s2], host, [94.8] * 6, start=s2.key)
    assert windows[0]["verdict"] == "FAIL" and windows[1]["state"] == s1.key
    # Labels follow measured capacity: leaving S2 for S1 is an upscale, although S1 is cheaper.
    assert decisions[0][:3] == ("breach-upscale", s2.key, s1.key)
    assert all(w["state"] == s1.key for w in windows[1:])


def test_a_switch_that_fails_verification_is_left_at_once_whatever_the_cost():
    # S1 qualified low (120/s) and is predicted to miss on the ramp; S2 qualified 250/s but a
    # neighbour leaves it 80/s: its verification fails, and the controller leaves it at once for
    # the cheapest state whose capacity holds the rate — S1, the cheaper one (no CPU or batch
    # figures: the capacities stay the qualified ones).
    s1, s2 = _state("a", 1, 0.04, (120.0, 122.0)), _state("b", 2, 0.08, (250.0, 255.0))
    host = Host({s1.key: 200.0, s2.key: 80.0})
    windows, decisions = simulate([s1, s2], host, [60, 80, 100, 115, 115, 115, 115], start=s1.key, cpu=False,
                                  batches=False)
    failed = [i for i, w in enumerate(windows) if w["verdict"] == "FAIL"]
    assert failed and all(windows[i]["state"] == s2.key for i in failed)
    assert any(d[2] == s2.key and d[3] == "rolled-back" for d in decisions)
    _never_twice_on_a_failed_state(windows)


@pytest.mark.parametrize("seed", range(6))
def test_under_a_busy_neighbour_never_two_windows_on_a_failed_state(seed):
    # The whole diurnal trace with the two-core state crippled by a neighbour (90/s live) and the
    # one-core state at 150/s: whatever the controller tries, a state that failed a window does
    # not serve the next one.
    library = _shipped_library()
    host = Host({library[0].key: 150.0, library[1].key: 90.0}, seed=seed)
    windows, _ = simulate(library, host, _rates(seed))
    _never_twice_on_a_failed_state(windows)


def test_the_old_order_by_cost_is_gone():
    s1, s2 = _state("a", 1, 0.04, (195.9, 201.0)), _state("b", 2, 0.08, (193.1, 199.0))
    p = Predictor([s1, s2], SLO, None, WINDOW)
    assert p.most_capable().key == s1.key and [s.key for s in p.ordered()] == [s2.key, s1.key]
    assert p.direction(s2.key, s1.key) == "upscale" and p.direction(s1.key, s2.key) == "downscale"
    assert p.refuge(s2.key, 94.8).key == s1.key and p.refuge(s1.key, 94.8).key == s2.key


# -- the margin, from what was measured (issue 32: a fixed 30 % cost 34.5 % over hindsight) --


def test_the_measured_margin_follows_the_spread_of_the_trials():
    tight, docs_one, docs_two = measured_margin([150, 150, 150], WINDOW), measured_margin([162.7, 149.7], WINDOW), \
        measured_margin([315.7, 247.8], WINDOW)
    assert tight == pytest.approx(1 - (1 - 2.326 * math.sqrt(1 / (150 * WINDOW))), rel=1e-6)  # the window's noise
    assert tight < docs_one < docs_two <= 0.6
    assert 0.10 < docs_one < 0.14 and 0.28 < docs_two < 0.36
    assert Predictor(_shipped_library(), SLO, 0.3, WINDOW).margin_of("a" * 12) == 0.3  # a run's margin wins


@pytest.mark.parametrize("seed", range(4))
def test_quiet_host_where_one_core_holds_the_peak_stays_near_the_hindsight_best(seed):
    # The quiet run: one core held the diurnal peak (p95 <= 89 ms), so one core all day
    # is the hindsight-best. The pilot must cost within 10 % of it with <= 1 % outside.
    library = _shipped_library()
    host = Host({library[0].key: 190.0, library[1].key: 330.0}, seed=seed)
    rates = _rates(seed)
    best, best_cpa = _hindsight(library, host, rates)
    assert best == library[0].key
    windows, _ = simulate(library, host, rates)
    cpa, outside = _economics(windows)
    assert outside <= 0.01 and cpa <= 1.10 * best_cpa, (cpa / best_cpa - 1, outside)


@pytest.mark.parametrize("seed", range(4))
def test_quiet_host_where_one_core_cannot_hold_the_peak_upscales_in_time(seed):
    # One core holds 135/s live, below the peak: the pilot upscales for the peak, keeps <= 1 %
    # outside and costs at least 25 % less than the static two-core state (the hindsight-best).
    library = _shipped_library()
    host = Host({library[0].key: 135.0, library[1].key: 330.0}, seed=seed)
    rates = _rates(seed)
    best, best_cpa = _hindsight(library, host, rates)
    assert best == library[1].key
    windows, _ = simulate(library, host, rates)
    cpa, outside = _economics(windows)
    assert outside <= 0.01 and cpa <= 0.75 * best_cpa, (cpa / best_cpa - 1, outside)


def test_the_fixed_30_percent_margin_was_what_cost_too_much():
    # The same quiet host under the old fixed margin: the pilot pays more than 10 % over the
    # hindsight-best — the measured margin is what brings it within.
    library = _shipped_library()
    host = Host({library[0].key: 190.0, library[1].key: 330.0})
    rates = _rates(0)
    _, best_cpa = _hindsight(library, host, rates)
    fixed, _ = _economics(simulate(library, host, rates, margin=0.3)[0])
    measured, _ = _economics(simulate(library, Host(host.capacity), rates)[0])
    assert fixed > 1.10 * best_cpa >= measured


def test_a_batching_server_read_by_its_cpu_alone_cost_too_much():
    # The live run 222522-29ce: one core held the peak, but the pilot upscaled at 56/s, because a
    # power curve of the server's CPU, fitted on windows at 24-56/s, read one core at ~103/s (a
    # batching server's CPU per request falls as its batches fill). Without its batches the
    # simulated server is read the same way and costs more than 10 % over the hindsight-best;
    # with them the service-time law reads its capacity and the pilot stays within.
    library = _shipped_library()
    host = Host({library[0].key: 190.0, library[1].key: 330.0})
    rates = _rates(0)
    _, best_cpa = _hindsight(library, host, rates)
    cpu_only, _ = _economics(simulate(library, host, rates, batches=False)[0])
    with_batches, _ = _economics(simulate(library, Host(host.capacity), rates)[0])
    assert cpu_only > 1.10 * best_cpa >= with_batches


class FlakyHost(Host):
    """A host whose p95 interval straddles the SLO in some windows: those are INCONCLUSIVE."""

    def __init__(self, capacity, seed: int = 0, share: float = 0.3):
        super().__init__(capacity, seed)
        self.share = share

    def serve(self, state, rate):
        p95, verdict, busy, rows = super().serve(state, rate)
        return p95, "INCONCLUSIVE" if self.rng.random() < self.share else verdict, busy, rows


def _flaky_decisions(seed: int) -> list[tuple[str, list[str]]]:
    """(outcome, verification window verdicts) of each decision over the diurnal trace on a FlakyHost."""
    library = _shipped_library()
    host = FlakyHost({library[0].key: 150.0, library[1].key: 240.0}, seed=seed)
    _, decisions = simulate(library, host, _rates(seed), start=library[0].key)
    return [(d[3], d[4]) for d in decisions]


def test_a_decision_is_retained_exactly_when_its_verification_decides_pass():
    # Seen live beside busy loops: a verification window INCONCLUSIVE, the next PASS; the state
    # was retained and the record said INCONCLUSIVE (windows combined like a trial's clauses),
    # which the record model refuses. The verdict is the first deciding window's.
    from luma.kb.records.judge import sequential

    seen = [d for seed in range(6) for d in _flaky_decisions(seed)]
    for outcome, verdicts in seen:
        assert (outcome == "retained") == (sequential(verdicts) == "PASS"), (outcome, verdicts)
        # A verification ends at its deciding window, or after max_extensions + 1 undecided ones.
        assert all(v == "INCONCLUSIVE" for v in verdicts[:-1]) and len(verdicts) <= GUARD.max_extensions + 1
    # The case seen live is among them: retained after an extension.
    assert any(outcome == "retained" and len(verdicts) > 1 for outcome, verdicts in seen)
