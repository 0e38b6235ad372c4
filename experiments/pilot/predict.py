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
* a held window's p95 bounds the no-queueing term from above (the full batch at capacity is
  pessimistic at low load, where batches are small);
* a window that held with enough load to queue (λ ≥ 30 % of capacity) refits k from its p95
  (half old, half new, within [0.05, 3]);
* the utilization law: the CPU the state's server used in each window it served alone, against
  the rate, fitted as busy = c·λ^p (a batching server's CPU per request falls as its batches
  fill, so the curve is concave: p < 1; a straight line through low-load windows would
  understate the capacity); where it reaches the state's cores is the capacity the live host
  gives it. Once three windows span at least 15 % of the qualified capacity, capacity is the
  lower of the two calibrations — never below a rate a window held. Closed-loop qualification
  trials overstate what the same state serves open loop beside other processes; this finds out
  before a breach does;
* a p95 a state measured holding rate λ live stands for every rate up to λ: the model's p95
  (whose batch term assumes full batches) is consulted only above the rates it has shown.
"""

from __future__ import annotations

import math

LN20 = math.log(20.0)
K_RANGE = (0.05, 3.0)


class Predictor:
    """Calibrated capacity and queueing factor per library state."""

    def __init__(self, library, slo_s: float | None, margin: float):
        self.states = {s.key: s for s in library}
        self.capacity = {s.key: s.capacity for s in library}  # what the controller uses
        self.bound = dict(self.capacity)  # calibrated by held and failed windows
        self.held = {s.key: 0.0 for s in library}  # the highest rate a window of the state held
        self.shown: dict[str, list[list[float]]] = {s.key: [] for s in library}  # [rate, p95] of held windows
        self.busy: dict[str, list[list[float]]] = {s.key: [] for s in library}  # [rate, CPU s per s]
        self.k = {s.key: 1.0 for s in library}
        self.floor: dict[str, float] = {}  # the lowest p95 a held window of the state showed
        self.slo, self.margin = slo_s, margin

    def snapshot(self) -> dict:
        return {"capacity": dict(self.capacity), "bound": dict(self.bound), "held": dict(self.held),
                "shown": {k: list(v) for k, v in self.shown.items()},
                "busy": {k: list(v) for k, v in self.busy.items()}, "k": dict(self.k), "floor": dict(self.floor)}

    def restore(self, snap: dict) -> None:
        for key in self.states:
            self.capacity[key] = snap.get("capacity", {}).get(key, self.capacity[key])
            self.bound[key] = snap.get("bound", {}).get(key, self.capacity[key])
            self.held[key] = snap.get("held", {}).get(key, self.held[key])
            self.busy[key] = [list(x) for x in snap.get("busy", {}).get(key, [])]
            self.shown[key] = [list(x) for x in snap.get("shown", {}).get(key, [])]
            self.k[key] = snap.get("k", {}).get(key, self.k[key])
            if key in snap.get("floor", {}):
                self.floor[key] = snap["floor"][key]

    def base(self, key: str) -> float:
        """The p95 without queueing: one full batch's service time at capacity, or less where a
        window showed a lower p95 (queueing only adds to it; at low load batches are small)."""
        s = self.states[key]
        full = s.settings.get("max_batch", 1) / max(self.capacity[key], 1e-9)
        shown = self.floor.get(key)
        return full if shown is None else min(full, shown)

    def p95(self, key: str, rate: float) -> float:
        cap = self.capacity[key]
        if rate >= cap:
            return math.inf
        return self.base(key) + self.k[key] * LN20 / (cap - rate)

    def passes(self, key: str, rate: float, margin: float | None = None) -> bool:
        """Within the margin of capacity, and with a p95 within the margin of the threshold: one
        the state measured holding at least this rate live, else the model's."""
        m = self.margin if margin is None else margin
        if rate > (1 - m) * self.capacity[key]:
            return False
        if self.slo is None:
            return True
        if any(r >= rate and p <= (1 - m) * self.slo for r, p in self.shown[key]):
            return True
        return self.p95(key, rate) <= (1 - m) * self.slo

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

    def observe(self, key: str, rate: float, p95: float | None, verdict: str, busy: float | None = None) -> None:
        """Calibrate a state on one window it served at `rate` with observed `p95`; `busy`: the
        CPU seconds per second its server used, when it served the window alone."""
        cap = self.bound[key]
        if verdict == "FAIL":
            # A failure at under half the capacity is a backlog or a transient (a burst's queue
            # draining), not the state's limit: it moves nothing.
            if 0.5 * cap <= rate < cap:
                self.bound[key] = 0.5 * cap + 0.5 * rate
                self.shown[key] = [x for x in self.shown[key] if x[0] < rate]  # no longer stands
        elif verdict == "PASS" and p95 is not None:
            self.held[key] = max(self.held[key], rate)
            self.shown[key] = (self.shown[key] + [[rate, p95]])[-50:]
            self.floor[key] = min(self.floor.get(key, p95), p95)
            self.bound[key] = cap = max(cap, rate)
            excess = p95 - self.base(key)
            if rate >= 0.3 * cap and excess > 0 and rate < cap:
                fitted = excess * (cap - rate) / LN20
                self.k[key] = min(max(0.5 * self.k[key] + 0.5 * fitted, K_RANGE[0]), K_RANGE[1])
        if busy is not None and rate > 0 and verdict != "FAIL":  # a failed window's CPU includes its backlog
            self.busy[key] = (self.busy[key] + [[rate, busy]])[-50:]
        law = self.demand_capacity(key)
        self.capacity[key] = self.bound[key] if law is None else max(self.held[key], min(self.bound[key], law))

    def demand_capacity(self, key: str) -> float | None:
        """The rate at which the fitted CPU curve reaches the state's cores (None while the
        windows are too few, too close in rate or too noisy to fit it)."""
        pts = self.busy[key]
        s = self.states[key]
        cores = getattr(s, "cores", None) or 1
        if len(pts) < 3:
            return None
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        if max(xs) - min(xs) < 0.15 * s.capacity:
            return None
        if min(xs) <= 0 or min(ys) <= 0:
            return None
        lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
        mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
        sxx = sum((x - mx) ** 2 for x in lx)
        p = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx
        if not 0.2 <= p <= 2.0:  # no load-driven CPU to extrapolate: noise, or another tenant
            return None
        return math.exp((math.log(cores) - (my - p * mx)) / p)
