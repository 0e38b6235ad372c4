"""What the controller expects of a library state at an offered rate, calibrated on measurement.

Each state starts from its qualification trials: capacity = the lowest accepted throughput they
measured. Its p95 latency at Poisson rate λ is predicted as one full batch's service time plus the
M/M/1 sojourn quantile ln(20) / (capacity − λ); a state passes when λ stays below (1 − margin) of
its capacity and the predicted p95 below (1 − margin) of the threshold. After every window a state
serves (with enough load to tell), its capacity is refit from the observed (λ, p95) by inverting
the same formula and blended with what it had (half each, bounded to a factor of two per step):
the model learns the live service, whose mix and neighbours differ from the qualification run.
"""

from __future__ import annotations

import math

LN20 = math.log(20.0)


class Predictor:
    """Calibrated capacity per library state."""

    def __init__(self, library, slo_s: float | None, margin: float):
        self.states = {s.key: s for s in library}
        self.capacity = {s.key: s.capacity for s in library}
        self.slo, self.margin = slo_s, margin

    def base(self, key: str) -> float:
        s = self.states[key]
        return s.settings.get("max_batch", 1) / max(self.capacity[key], 1e-9)

    def p95(self, key: str, rate: float) -> float:
        cap = self.capacity[key]
        if rate >= cap:
            return math.inf
        return self.base(key) + LN20 / (cap - rate)

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
        return max(self.states.values(), key=lambda s: (self.capacity[s.key], -(s.cost_per_hour or 0.0)))

    def observe(self, key: str, rate: float, p95: float | None, verdict: str) -> None:
        """Refit a state's capacity from one window it served at `rate` with observed `p95`."""
        cap = self.capacity[key]
        if p95 is None or (verdict != "FAIL" and rate < 0.5 * cap):
            return  # a light load that held says little about capacity
        if verdict == "FAIL":
            # It could not hold this rate (or a backlog made it look so): never more than that.
            fitted = min(cap, rate)
        else:
            excess = p95 - self.base(key)
            if excess <= 0:
                return  # faster than one full batch: no queueing to fit
            fitted = max(rate + LN20 / excess, rate)  # it held this rate
        fitted = min(max(fitted, cap / 2), cap * 2)
        self.capacity[key] = 0.5 * cap + 0.5 * fitted
