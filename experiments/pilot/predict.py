"""What the controller expects of a library state at an offered rate, calibrated on measurement.

Each state starts from its qualification trials: capacity = the lowest accepted throughput they
measured. Its p95 latency at Poisson rate λ is predicted as one full batch's service time plus a
queueing term k · ln(20) / (capacity − λ) (k = 1 is the M/M/1 sojourn quantile; a batching server
queues less, a shared host more). A state passes when λ stays below (1 − margin) of its capacity
and the predicted p95 below (1 − margin) of the threshold.

The margin is the state's own, from what was measured (`measured_margin`), unless the run names
one: the capacity a fresh measurement of the state falls below with at most ~1 % probability —
the share of requests the acceptance allows outside the contract. With x̄ and s the mean and
standard deviation of its PASS trials' throughputs, and the Poisson noise of the rate one window
of T seconds observes at that capacity, σ = √((s/x̄)² + 1/(x̄·T)); the usable capacity is
x̄·(1 − z·σ), z = 2.33 (one-sided 99 %), and the margin is how far that lies below the state's
capacity (the lowest trial), within [0, 60 %]. A state whose trials agree gets a small margin,
a noisy one a large one.

Calibration on the live service, after every window a state serves:
* a window that held rate λ proves capacity ≥ λ;
* a window that failed at λ ≥ half its capacity pulls capacity halfway towards λ (repeated
  failures converge on it; one noisy window does not condemn the state; a failure at a lower
  load is a backlog draining, not a limit);
* a held window's p95 bounds the no-queueing term from above (the full batch at capacity is
  pessimistic at low load, where batches are small);
* a window that held with enough load to queue (λ ≥ 30 % of capacity) refits k from its p95
  (half old, half new, within [0.05, 3]);
* the live capacity law, from the windows the state served alone — the **service-time law**
  where its server says when each batch began (`service_law`: a batch of n requests takes
  d(n) = a + b·n seconds of wall time, fitted on every batch; at capacity every replica serves
  full batches back to back, so capacity = replicas · B / d(B)), else the **utilization law** on
  its CPU (`cpu_law`: busy = c·λ^p, where it reaches the state's cores; a batching server's CPU
  per request falls as its batches fill, and live this curve, fitted on windows at 24-56/s, read
  one core at ~103/s where it held 163/s — what the service-time law was built for). Once it can
  be fitted, that is the capacity — above the qualified one too (a closed loop of the
  contract's clients is not the live open-loop service), below it where the host serves less —
  never below a rate a window held, never above what a failed window allowed (the ceiling a
  failure sets, until a window holds more). Its margin is then the law's own uncertainty at
  that capacity (`law`), not the qualification's;
* a p95 a state measured holding rate λ live stands for every rate up to λ: the model's p95
  (whose batch term assumes full batches) is consulted only above the rates it has shown.
"""

from __future__ import annotations

import math

LN20 = math.log(20.0)
K_RANGE = (0.05, 3.0)
#: One-sided normal quantile of the 1 % of requests the acceptance allows outside the contract.
Z_OUTSIDE = 2.326
MAX_MARGIN = 0.6
#: The service-time law fits the batches of a state's last this many windows (a host that changes
#: shows within a couple of minutes) ...
SERVICE_WINDOWS = 20
#: ... once they hold this many batches ...
MIN_BATCHES = 30
#: ... with this much log-scale uncertainty per unit of batch size its fit extrapolates past the
#: largest size it has seen (MiniLM on one core of the 2-vCPU AVX-512 VNNI EPYC host: a fit on
#: sizes 1-3 read d(8) 14 % short, 5 sizes beyond; see `service_law`).
EXTRAPOLATION = 0.03


def measured_margin(throughputs: list[float], window_s: float, rate_noise: float = 0.0) -> float:
    """The share of a state's capacity (its lowest PASS throughput) kept in reserve: how far
    x̄·(1 − z·σ) lies below it, σ = √(cv² + r²) with r the rate's relative noise — the larger of
    a window's Poisson noise at x̄, 1/√(x̄·T), and `rate_noise`, the forecast's measured error
    (module docstring) —, within [0, MAX_MARGIN]."""
    xs = [float(x) for x in throughputs if x and x > 0]
    if not xs:
        return MAX_MARGIN
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    sigma = math.sqrt((sd / mean) ** 2 + max(1.0 / (mean * max(window_s, 1e-9)), rate_noise ** 2))
    usable = mean * (1 - Z_OUTSIDE * sigma)
    return min(MAX_MARGIN, max(0.0, 1 - usable / min(xs)))


class Predictor:
    """Calibrated capacity and queueing factor per library state."""

    def __init__(self, library, slo_s: float | None, margin: float | None, window_s: float = 6.0):
        """`margin`: one share for every state; None: each state's `measured_margin`."""
        self.states = {s.key: s for s in library}
        self.capacity = {s.key: s.capacity for s in library}  # what the controller uses
        self.bound = dict(self.capacity)  # calibrated by held and failed windows
        self.held = {s.key: 0.0 for s in library}  # the highest rate a window of the state held
        self.shown: dict[str, list[list[float]]] = {s.key: [] for s in library}  # [rate, p95] of held windows
        self.busy: dict[str, list[list[float]]] = {s.key: [] for s in library}  # [rate, CPU s per s]
        #: Per window the state served alone, its batches by size: rows [size, batches, Σ s, Σ s²].
        self.service: dict[str, list[list[list[float]]]] = {s.key: [] for s in library}
        self.k = {s.key: 1.0 for s in library}
        self.floor: dict[str, float] = {}  # the lowest p95 a held window of the state showed
        self.failed: dict[str, float] = {}  # the capacity a failed window allowed (until one holds more)
        self.window_s = window_s
        #: The forecast's errors in units of a window's Poisson noise: (observed − forecast) / √(forecast / T).
        self.misses: list[float] = []
        self.slo, self.margin = slo_s, margin
        #: Each state's margin from its qualification (`measured_margin`); `margin_of` is the one in use.
        self.margins = {s.key: margin if margin is not None else
                        measured_margin(getattr(s, "throughputs", None) or [s.capacity], window_s) for s in library}

    def snapshot(self) -> dict:
        return {"capacity": dict(self.capacity), "bound": dict(self.bound), "held": dict(self.held),
                "shown": {k: list(v) for k, v in self.shown.items()},
                "busy": {k: list(v) for k, v in self.busy.items()},
                "service": {k: list(v) for k, v in self.service.items()}, "k": dict(self.k), "floor": dict(self.floor),
                "failed": dict(self.failed), "misses": list(self.misses)}

    def restore(self, snap: dict) -> None:
        self.misses = list(snap.get("misses", []))
        for key in self.states:
            self.capacity[key] = snap.get("capacity", {}).get(key, self.capacity[key])
            self.bound[key] = snap.get("bound", {}).get(key, self.capacity[key])
            self.held[key] = snap.get("held", {}).get(key, self.held[key])
            self.busy[key] = [list(x) for x in snap.get("busy", {}).get(key, [])]
            self.service[key] = [[list(r) for r in w] for w in snap.get("service", {}).get(key, [])]
            self.shown[key] = [list(x) for x in snap.get("shown", {}).get(key, [])]
            self.k[key] = snap.get("k", {}).get(key, self.k[key])
            if key in snap.get("floor", {}):
                self.floor[key] = snap["floor"][key]
            if key in snap.get("failed", {}):
                self.failed[key] = snap["failed"][key]
            law = self.law(key)
            if law is not None:
                self.capacity[key] = max(self.held[key], min(self.failed.get(key, math.inf), law[0]))

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
        m = self.margin_of(key) if margin is None else margin
        if rate > (1 - m) * self.capacity[key]:
            return False
        if self.slo is None:
            return True
        if any(r >= rate and p <= (1 - m) * self.slo for r, p in self.shown[key]):
            return True
        return self.p95(key, rate) <= (1 - m) * self.slo

    def margin_of(self, key: str) -> float:
        """The margin in use for `key`: the run's, else the utilization law's while it sets the
        capacity (its fit's uncertainty, `law`), else the qualification's (`measured_margin`)."""
        if self.margin is not None:
            return self.margin
        law = self.law(key)
        if law is None or self.capacity[key] != law[0]:
            s = self.states[key]
            return measured_margin(getattr(s, "throughputs", None) or [s.capacity], self.window_s,
                                   self.rate_noise(s.capacity))
        sigma = math.sqrt(law[1] ** 2 + max(1.0 / (max(law[0], 1e-9) * self.window_s), self.rate_noise(law[0]) ** 2))
        return min(MAX_MARGIN, 1 - math.exp(-Z_OUTSIDE * sigma))

    def forecast_missed(self, observed: float, forecast: float) -> None:
        """Note how far a window's observed rate fell from the rate forecast for it, in units of
        the window's Poisson noise at the forecast (so a quiet night's misses and a busy noon's
        compare)."""
        if forecast > 0:
            self.misses = (self.misses + [(observed - forecast) / math.sqrt(forecast / self.window_s)])[-20:]

    def rate_noise(self, rate: float) -> float:
        """The forecast's measured relative error at `rate`: the root mean square of its last 20
        misses (Poisson units) over √(rate·T); 0 before three misses. Both signs count: a ramp
        that steepens comes in above a forecast that overshot the window before (counting only
        the windows above it let one jump breach a simulated host in 1 seed of 12)."""
        if len(self.misses) < 3 or rate <= 0:
            return 0.0
        return math.sqrt(sum(e * e for e in self.misses) / len(self.misses)) / math.sqrt(rate * self.window_s)

    def cost_per_accepted(self, key: str, rate: float) -> float | None:
        s = self.states[key]
        if s.cost_per_hour is None or rate <= 0:
            return None
        return s.cost_per_hour / 3600.0 / rate

    def choose(self, rate: float, margin: float | None = None, exclude: str | None = None):
        """The cheapest state predicted to pass at `rate` (else the one with the most capacity);
        `exclude`: a state that may not be chosen."""
        states = [s for s in self.states.values() if s.key != exclude]
        ok = [s for s in states if self.passes(s.key, rate, margin)]
        if ok:
            return min(ok, key=lambda s: (s.cost_per_hour or 0.0, -self.capacity[s.key]))
        return self.most_capable(exclude)

    def ordered(self) -> list:
        """The states from the least to the most capable: by measured capacity (the qualification
        trials' as calibrated on the live service), the cheaper first where two are equal. Cost
        says what a state is paid for, not what it serves."""
        return sorted(self.states.values(), key=lambda s: (self.capacity[s.key], -(s.cost_per_hour or 0.0)))

    def most_capable(self, exclude: str | None = None):
        """The state of the highest measured capacity (`ordered`), `exclude` left out (None when
        it is the only state)."""
        states = [s for s in self.ordered() if s.key != exclude]
        return states[-1] if states else None

    def refuge(self, failing: str, rate: float):
        """Where a state that failed at `rate` goes within the window: the cheapest other state
        predicted to pass at it, else the cheapest other whose measured capacity holds it, else
        the most capable other state — whatever each costs (None: the library has no other)."""
        others = [s for s in self.states.values() if s.key != failing]
        ok = ([s for s in others if self.passes(s.key, rate)]
              or [s for s in others if self.capacity[s.key] >= rate])
        if ok:
            return min(ok, key=lambda s: (s.cost_per_hour or 0.0, -self.capacity[s.key]))
        return self.most_capable(exclude=failing)

    def direction(self, from_key: str | None, to_key: str) -> str:
        """"upscale" when `to_key` has more measured capacity than `from_key`, else "downscale"."""
        if from_key is None:
            return "upscale"
        return "upscale" if self.capacity[to_key] > self.capacity[from_key] else "downscale"

    def observe(self, key: str, rate: float, p95: float | None, verdict: str, busy: float | None = None,
                service: list | None = None) -> None:
        """Calibrate a state on one window it served at `rate` with observed `p95`; `busy`: the
        CPU seconds per second its server used, `service`: its batches by size ([size, batches,
        Σ s, Σ s²] rows) — both only when it served the window alone."""
        cap = self.capacity[key]
        if verdict == "FAIL":
            # A failure at under half the capacity is a backlog or a transient (a burst's queue
            # draining), not the state's limit: it moves nothing.
            if 0.5 * cap <= rate < cap:
                pulled = 0.5 * cap + 0.5 * rate
                self.bound[key] = min(self.bound[key], pulled)
                self.failed[key] = min(self.failed.get(key, math.inf), pulled)
                self.shown[key] = [x for x in self.shown[key] if x[0] < rate]  # no longer stands
        elif verdict == "PASS" and p95 is not None:
            self.held[key] = max(self.held[key], rate)
            self.shown[key] = (self.shown[key] + [[rate, p95]])[-50:]
            self.floor[key] = min(self.floor.get(key, p95), p95)
            self.bound[key] = max(self.bound[key], rate)
            if key in self.failed and self.failed[key] < rate:
                self.failed[key] = rate
            cap = max(cap, rate)
            excess = p95 - self.base(key)
            if rate >= 0.3 * cap and excess > 0 and rate < cap:
                fitted = excess * (cap - rate) / LN20
                self.k[key] = min(max(0.5 * self.k[key] + 0.5 * fitted, K_RANGE[0]), K_RANGE[1])
        if busy is not None and rate > 0 and verdict != "FAIL":  # a failed window's CPU includes its backlog
            self.busy[key] = (self.busy[key] + [[rate, busy]])[-50:]
        if service:  # a failed window's batches are as telling as a held one's: full ones, even
            self.service[key] = (self.service[key] + [[list(r) for r in service]])[-SERVICE_WINDOWS:]
        law = self.law(key)
        self.capacity[key] = self.bound[key] if law is None else \
            max(self.held[key], min(self.failed.get(key, math.inf), law[0]))

    def demand_capacity(self, key: str) -> float | None:
        """The rate at which the fitted CPU curve reaches the state's cores (None while the
        windows are too few, too close in rate or too noisy to fit it)."""
        law = self.law(key)
        return None if law is None else law[0]

    def law(self, key: str) -> tuple[float, float] | None:
        """(the capacity the live service shows, the standard deviation of its logarithm): the
        service-time law where the state's server reports its batches (`service_law`), else the
        utilization law on its CPU (`cpu_law`); None while neither can be fitted."""
        return self.service_law(key) or self.cpu_law(key)

    def service_law(self, key: str) -> tuple[float, float] | None:
        """The capacity from the batches the state served live: a batch of n requests takes
        d(n) = a + b·n seconds of wall time (a forward pass's fixed cost, then each request's),
        fitted by least squares on every batch of its last SERVICE_WINDOWS windows; at capacity
        every replica serves full batches back to back, so capacity = replicas · B / d(B), B its
        batch size. Wall time counts what the host takes from the server (steal, a neighbour on
        its cores, its own socket work), which CPU seconds do not. The log-scale σ is the fit's
        prediction error at B plus EXTRAPOLATION per unit of batch size beyond the largest one
        seen (a batch pads to its longest input, so d grows faster than linearly: on the 2-vCPU
        AVX-512 VNNI EPYC host a fit on sizes 1-3 read d(8) 14 % short). None with fewer than MIN_BATCHES
        batches or fewer than two sizes seen at least 5 times, or where d does not grow with n."""
        s = self.states[key]
        top = int(s.settings.get("max_batch", 1) or 1)
        replicas = int(s.settings.get("replicas", 1) or 1)
        rows: dict[int, list[float]] = {}
        for window in self.service[key]:
            for size, count, total, squares in window:
                row = rows.setdefault(int(size), [0.0, 0.0, 0.0])
                row[0] += count
                row[1] += total
                row[2] += squares
        n = sum(r[0] for r in rows.values())
        if n < MIN_BATCHES or sum(1 for r in rows.values() if r[0] >= 5) < 2:
            return None
        sx = sum(size * r[0] for size, r in rows.items())
        sy = sum(r[1] for r in rows.values())
        sxx = sum(size * size * r[0] for size, r in rows.items()) - sx * sx / n
        sxy = sum(size * r[1] for size, r in rows.items()) - sx * sy / n
        syy = sum(r[2] for r in rows.values()) - sy * sy / n
        if sxx <= 0:
            return None
        slope = sxy / sxx
        full = sy / n + slope * (top - sx / n)
        if slope <= 0 or full <= 0:
            return None
        scatter = max(0.0, syy - slope * sxy) / max(1.0, n - 2)
        se = math.sqrt(scatter * (1.0 / n + (top - sx / n) ** 2 / sxx))
        seen = max((size for size, r in rows.items() if r[0] >= 3), default=1)
        sigma = math.hypot(se / full, EXTRAPOLATION * max(0, top - seen))
        return replicas * top / full, sigma

    def cpu_law(self, key: str) -> tuple[float, float] | None:
        """(the rate at which the fitted CPU curve reaches the state's cores, the standard
        deviation of its logarithm: the fit's residual scatter carried to that rate, as an
        inverse prediction — wide when the windows are few, scattered or far below it); None
        while the windows are too few, too close in rate or too noisy to fit it."""
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
        n = len(lx)
        mx, my = sum(lx) / n, sum(ly) / n
        sxx = sum((x - mx) ** 2 for x in lx)
        p = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sxx
        if not 0.2 <= p <= 2.0:  # no load-driven CPU to extrapolate: noise, or another tenant
            return None
        a = my - p * mx
        at = (math.log(cores) - a) / p
        res = math.sqrt(sum((y - a - p * x) ** 2 for x, y in zip(lx, ly)) / max(1, n - 2))
        sigma = res / p * math.sqrt(1.0 / n + (at - mx) ** 2 / sxx)
        return math.exp(at), sigma
