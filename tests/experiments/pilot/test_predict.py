"""The controller's calibrated model: choices and how evidence moves it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from luma.experiments.pilot.library import LibraryState
from luma.experiments.pilot.predict import Predictor


def _lib():
    small = LibraryState("a" * 12, {"compute": {"value": 1, "unit": "core"}}, "fp32", {"max_batch": 8, "threads": 1},
                         100.0, 0.05, 1.0, 2, cost_per_hour=0.04, currency="USD", cores=1)
    big = LibraryState("b" * 12, {"compute": {"value": 2, "unit": "core"}}, "fp32", {"max_batch": 8, "threads": 2},
                       180.0, 0.04, 1.0, 2, cost_per_hour=0.08, currency="USD", cores=2)
    return [small, big]


def test_cheapest_state_that_passes_with_the_margin():
    p = Predictor(_lib(), 0.25, 0.25)
    assert p.choose(30).key == "a" * 12
    assert p.choose(90).key == "b" * 12  # above 75 % of the small state's capacity
    assert p.choose(500).key == "b" * 12  # none passes: the most capable
    assert p.cost_per_accepted("a" * 12, 40) == 0.04 / 3600 / 40


@settings(max_examples=80, deadline=None)
@given(st.floats(1, 400), st.floats(0.001, 5), st.sampled_from(["PASS", "FAIL", "INCONCLUSIVE"]))
def test_evidence_moves_capacity_only_its_way(rate, p95, verdict):
    p = Predictor(_lib(), 0.15, 0.25)
    key = "a" * 12
    before = p.capacity[key]
    p.observe(key, rate, p95, verdict)
    after = p.capacity[key]
    if verdict == "FAIL":
        assert after <= before and (rate >= before or after >= rate)
    elif verdict == "PASS":
        assert after >= max(before, min(rate, after))
        assert after >= rate
    else:
        assert after == before
    assert 0.05 <= p.k[key] <= 3.0


def test_snapshot_restores_the_calibration():
    p = Predictor(_lib(), 0.15, 0.25)
    p.observe("a" * 12, 60, 0.3, "FAIL")
    q = Predictor(_lib(), 0.15, 0.25)
    q.restore(p.snapshot())
    assert q.capacity == p.capacity and q.k == p.k


def test_the_order_of_the_library_follows_measured_capacity():
    p = Predictor(_lib(), 0.15, 0.25)
    p.observe("b" * 12, 95, 2.0, "FAIL")  # one failure pulls the big state halfway: still the most capable
    assert p.most_capable().key == "b" * 12 and p.capacity["b" * 12] == 137.5
    for _ in range(10):
        p.observe("b" * 12, 95, 2.0, "FAIL")  # failing again and again at 95/s: it holds less than 100/s
    assert p.most_capable().key == "a" * 12 and p.direction("b" * 12, "a" * 12) == "upscale"
    p.observe("a" * 12, 20, 5.0, "FAIL")  # far below capacity: a backlog, not a limit
    assert p.capacity["a" * 12] == 100.0


def test_the_utilization_law_finds_the_live_capacity_before_a_breach():
    # The one-core state qualified at 100/s; live its server uses 0.03·λ^0.8 core (batches fill
    # as the rate grows): it saturates where that reaches one core, (1/0.03)^1.25 ≈ 80/s.
    p = Predictor(_lib(), None, 0.25)
    key = "a" * 12
    for rate in (20, 28, 36):
        p.observe(key, rate, 0.02, "PASS", busy=0.03 * rate ** 0.8)
    assert abs(p.demand_capacity(key) - (1 / 0.03) ** 1.25) < 1e-6
    assert abs(p.capacity[key] - (1 / 0.03) ** 1.25) < 1e-6
    assert p.passes(key, 58) and not p.passes(key, 62)  # 75 % of 80, not of the qualified 100
    q = Predictor(_lib(), None, 0.25)
    q.restore(p.snapshot())
    assert q.capacity == p.capacity and q.demand_capacity(key) == p.demand_capacity(key)


def test_the_utilization_law_waits_for_spread_and_never_goes_below_a_held_rate():
    p = Predictor(_lib(), 0.25, 0.25)
    key = "a" * 12
    for rate in (30, 31, 32, 33):  # 3 % of capacity apart: no fit
        p.observe(key, rate, 0.02, "PASS", busy=0.03 * rate ** 0.8)
    assert p.demand_capacity(key) is None and p.capacity[key] == 100
    p.observe(key, 90, 0.03, "PASS")  # a window held 90/s (no CPU figure: served beside another)
    for rate in (10, 20):
        p.observe(key, rate, 0.02, "PASS", busy=0.03 * rate ** 0.8)
    assert p.demand_capacity(key) < 90 <= p.capacity[key]
    p.observe(key, 10, 0.02, "FAIL", busy=5.0)  # a failed window's CPU is not a sample
    assert len(p.busy[key]) == 6


def test_a_p95_shown_live_stands_for_lower_rates():
    p = Predictor(_lib(), 0.15, 0.25)
    key = "a" * 12
    assert not p.passes(key, 50)  # the model: a full batch at capacity (80 ms) plus queueing
    p.observe(key, 60, 0.04, "PASS")
    assert p.passes(key, 50) and p.passes(key, 60) and not p.passes(key, 70)
    assert not p.passes(key, 50, margin=0.8)  # 40 ms is not within a margin of 80 %


def test_a_held_p95_lowers_the_no_queueing_term_and_k_refits_on_top():
    p = Predictor(_lib(), 0.15, 0.25)
    key = "a" * 12
    assert p.base(key) == 8 / 100
    p.observe(key, 10, 0.02, "PASS")
    assert p.base(key) == 0.02
    p.observe(key, 50, 0.03, "PASS")  # 10 ms of queueing at half the capacity
    assert p.k[key] < 1.0 and p.base(key) == 0.02
    q = Predictor(_lib(), 0.15, 0.25)
    q.restore(p.snapshot())
    assert q.base(key) == p.base(key) and q.k == p.k


def _rows(sizes, a=0.004, b=0.0038, count=20):
    """A window's batches by size, each of d(n) = a + b·n seconds."""
    return [[n, count, count * (a + b * n), count * (a + b * n) ** 2] for n in sizes]


def test_the_service_time_law_reads_capacity_from_the_batches():
    # MiniLM on one EPYC core: d(n) ≈ 4 + 3.8·n ms, so full batches of 8 give 8 / 34.4 ms ≈ 233/s,
    # although the windows so far held batches of 1-3 only (a power curve of CPU against the rate
    # read such a server at half its capacity live).
    from luma.experiments.pilot.predict import EXTRAPOLATION

    p = Predictor(_lib(), None, None)
    key = "a" * 12
    p.observe(key, 30, 0.02, "PASS", busy=0.2, service=_rows([1]))
    assert p.service_law(key) is None  # one size: no slope yet
    p.observe(key, 60, 0.02, "PASS", busy=0.3, service=_rows([1, 2, 3]))
    cap, sigma = p.service_law(key)
    assert abs(cap - 8 / (0.004 + 0.0038 * 8)) < 1e-6 and p.law(key) == p.service_law(key)
    assert abs(sigma - EXTRAPOLATION * 5) < 1e-9  # exact batches: only the extrapolation to 8 is uncertain
    assert abs(p.capacity[key] - cap) < 1e-6
    p.observe(key, 200, 0.2, "FAIL", service=_rows([6, 7, 8]))  # a failed window's full batches count
    assert p.service_law(key)[1] < 1e-6 and p.capacity[key] <= cap
    q = Predictor(_lib(), None, None)
    q.restore(p.snapshot())
    assert q.service_law(key) == p.service_law(key) and q.capacity == p.capacity


def test_the_service_time_law_counts_replicas_and_refuses_what_it_cannot_fit():
    lib = _lib()
    lib[1].settings["replicas"] = 2
    p = Predictor(lib, None, None)
    big = "b" * 12
    p.observe(big, 60, 0.02, "PASS", service=_rows([1, 2]))
    assert abs(p.service_law(big)[0] - 2 * 8 / (0.004 + 0.0038 * 8)) < 1e-6  # two replicas serve two batches
    p = Predictor(lib, None, None)
    p.observe(big, 60, 0.02, "PASS", service=_rows([1, 2], b=-0.001))  # larger batches faster: no law
    p.observe(big, 60, 0.02, "PASS", service=_rows([1, 2], count=2))
    assert p.service_law(big) is None
    p = Predictor(lib, None, None)
    p.observe(big, 60, 0.02, "PASS", service=_rows([1, 2], count=10))  # 20 batches: too few
    assert p.service_law(big) is None
