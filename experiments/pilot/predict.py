"""What the controller expects of a library state at an offered rate, calibrated on measurement.

Each state starts from its qualification trials: capacity = the lowest accepted throughput they
measured. Its p95 latency at Poisson rate λ is predicted as one full batch's service time plus a
queueing term k · ln(20) / (capacity − λ) (k = 1 is the M/M/1 sojourn quantile; a batching server
queues less, a shared host more). A state passes when λ stays below (1 − margin) of its capacity
and the predicted p95 below (1 − margin) of the threshold.

Calibration on the live service, after every window a state serves:
* a window that held rate λ proves capacity ≥ λ;
* a window that failed at λ ≥ half its capacity pulls capacity halfway towards λ (repeated
  failures converge on it; one noisy window does not condemn the state; a failure at a lower
  load is a backlog draining, not a limit);
* a window that held with enough load to queue (λ ≥ 30 % of capacity) refits k from its p95
  (half old, half new, within [0.05, 3]).
"""

from __future__ import annotations

import math

LN20 = math.log(20.0)
K_RANGE = (0.05, 3.0)


class Predictor:
    """Calibrated capacity and queueing factor per library state."""

    def __init__(self, library, slo_s: float | None, margin: float):
        self.states = {s.key: s for s in library}
        self.capacity = {s.key: s.capacity for s in library}
        self.k = {s.key: 1.0 for s in library}
        self.slo, self.margin = slo_s, margin

    def snapshot(self) -> dict:
        return {"capacity": dict(self.capacity), "k": dict(self.k)}

    def restore(self, snap: dict) -> None:
        for key in self.states:
            self.capacity[key] = snap.get("capacity", {}).get(key, self.capacity[key])
            self.k[key] = snap.get("k", {}).get(key, self.k[key])

    def base(self, key: str) -> float:
        s = self.states[key]
        return s.settings.get("max_batch", 1) / max(self.capacity[key], 1e-9)

    def p95(self, key: str, rate: float) -> float:
        cap = self.capacity[key]
        if rate >= cap:
            return math.inf
        return self.base(key) + self.k[key] * LN20 / (cap - rate)

    def passes(self, key: str, rate: float, margin: float | None = None) -> bool:
        m = self.margin if margin is None else margin
        if rate > (1 - m) * self.capacity[key]:
            return False
        return self.slo is None or self.p95(key, rate) <= (1 - m) * self.slo

    def cost_per_accepted(self, key: str, rate: float) -> float | None:
        s = self.states[key]
        if s.cost_per_hour is None or rate <= 0:
            return None
        return s.cost_per_hour / 3600.0 / rate

    def choose(self, rate: float, margin: float | None = None):
        """The cheapest state predicted to pass at `rate` (else the one with the most capacity)."""
        ok = [s for s in self.states.values() if self.passes(s.key, rate, margin)]
        if ok:
            return min(ok, key=lambda s: (s.cost_per_hour or 0.0, -self.capacity[s.key]))
        return self.most_capable()

    def most_capable(self):
        """The state with the most resources: highest cost per hour, then qualified capacity (not
        the calibrated one: a noisy window must not turn the order of the library upside down)."""
        return max(self.states.values(), key=lambda s: (s.cost_per_hour or 0.0, s.capacity))

    def observe(self, key: str, rate: float, p95: float | None, verdict: str) -> None:
        """Calibrate a state on one window it served at `rate` with observed `p95`."""
        cap = self.capacity[key]
        if verdict == "FAIL":
            # A failure at under half the capacity is a backlog or a transient (a burst's queue
            # draining), not the state's limit: it moves nothing.
            if 0.5 * cap <= rate < cap:
                self.capacity[key] = 0.5 * cap + 0.5 * rate
            return
        if verdict != "PASS" or p95 is None:
            return
        self.capacity[key] = cap = max(cap, rate)
        excess = p95 - self.base(key)
        if rate >= 0.3 * cap and excess > 0 and rate < cap:
            fitted = excess * (cap - rate) / LN20
            self.k[key] = min(max(0.5 * self.k[key] + 0.5 * fitted, K_RANGE[0]), K_RANGE[1])
