"""The pilot segment: the control loop over the trace (see `controller` for the guardrails)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

from luma.experiments.pilot.controller import GRACE_S, Pending, Segment, _sleep_until
from luma.experiments.pilot.serving import Dispatcher


def _append(path, obj: dict) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(obj, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_journal(path) -> list[dict]:
    """The journal's complete lines (a line torn by a kill is dropped: its window runs again)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


class Controller:
    """Decides, per window, what the service runs next."""

    def __init__(self, ctx, seg: Segment, record_decision):
        self.ctx, self.seg, self.record_decision = ctx, seg, record_decision
        self.active: str | None = None
        self.pending: Pending | None = None
        self.patience: dict[str, int] = {}
        self.switches = 0
        self.rates: list[float] = []
        self.decisions = 0

    # -- state for the journal -------------------------------------------------------------
    def snapshot(self) -> dict:
        return {"active": self.active, "pending": asdict(self.pending) if self.pending else None,
                "patience": self.patience, "switches": self.switches, "rates": self.rates[-4:],
                "decisions": self.decisions, "model": self.ctx.predictor.snapshot()}

    def restore(self, snap: dict) -> None:
        self.active = snap["active"]
        self.pending = Pending(**snap["pending"]) if snap.get("pending") else None
        self.patience, self.switches = dict(snap["patience"]), snap["switches"]
        self.rates, self.decisions = list(snap["rates"]), snap["decisions"]
        self.ctx.predictor.restore(snap.get("model", {}))  # the calibration survives a kill

    # -- the loop --------------------------------------------------------------------------
    def forecast(self) -> float:
        """Next window's rate: the last observed, plus its rise if it is rising (never less)."""
        if not self.rates:
            return 0.0
        last = self.rates[-1]
        rise = last - self.rates[-2] if len(self.rates) > 1 else 0.0
        return last + max(0.0, rise)

    def _switch(self, purpose: str, to_key: str, w: int, reason: str, fig: dict) -> None:
        """Apply `to_key` and verify it next window; its label follows measured capacity."""
        pred = self.ctx.predictor
        action = pred.direction(self.active, to_key)
        if purpose == "breach" and action == "upscale":
            action = "breach-upscale"
        rate = self.forecast()
        prediction = {"verdict": "PASS" if pred.passes(to_key, rate) else "FAIL", "rate": rate,
                      "p95_latency": pred.p95(to_key, rate), "capacity": pred.capacity[to_key],
                      "margin": pred.margins[to_key], "cost_per_accepted": pred.cost_per_accepted(to_key, rate)}
        observed = {k: fig.get(k) for k in ("rate_observed", "p95_latency", "error_rate", "cost_per_accepted",
                                            "energy_per_accepted", "verdict")}
        self.pending = Pending(action, self.active, to_key, w, reason, observed, prediction, purpose=purpose)
        self.seg.apply(to_key)
        self.active = to_key
        fig["event"] = f"{action} → {self.ctx.library_state(to_key).label()}"

    def _finish(self, outcome: str, w: int, fig: dict) -> None:
        p = self.pending
        self.pending = None
        self.decisions += 1
        self.record_decision(p, outcome, w, self.seg.windows)
        if outcome != "rolled-back":
            return
        # The state that failed its verification is left now. A switch made to save cost goes
        # back to the state that held, while that state still holds the rate; any other goes to
        # the cheapest other state whose measured capacity holds it, whatever it costs.
        pred, rate = self.ctx.predictor, self.forecast()
        held = p.from_key if p.purpose == "saving" and p.from_key and p.from_key != p.to_key else None
        if held is not None and pred.capacity[held] >= rate:
            back = pred.states[held]
        else:
            back = pred.refuge(p.to_key, rate)
        self.patience.clear()
        if back is None:
            fig["event"] = ((fig.get("event") or "") + " rolled back (no other state in the library)").strip()
            return
        self.seg.apply(back.key)
        self.active = back.key
        fig["event"] = ((fig.get("event") or "") + f" rollback → {self.ctx.library_state(back.key).label()}").strip()

    def step(self, w: int, fig: dict) -> None:
        """Decide after window w was judged (fig: its figures)."""
        ctx, pred = self.ctx, self.ctx.predictor
        if self.rates:
            pred.forecast_missed(fig["rate_observed"], self.forecast())
        self.rates.append(fig["rate_observed"])
        alone = self.pending is None and "before_switch" not in fig  # its CPU is this state's alone
        busy = fig["cpu_s"] / max(1e-9, fig["end_s"] - fig["start_s"]) if alone and "cpu_s" in fig else None
        pred.observe(fig["state"], fig["rate_observed"], fig.get("p95_latency"), fig["verdict"], busy=busy,
                     service=fig.get("service") if alone else None)
        if self.pending is not None:
            fig["verification"] = True
            fig["extension"] = len(self.pending.windows)
            self.pending.windows.append({k: fig[k] for k in ("index", "verdict", "p95_latency", "p95_ci", "requests",
                                                             "completed", "errors", "error_rate", "cost",
                                                             "energy_j", "accepted", "clauses") if k in fig})
            if fig["verdict"] == "PASS":
                self._finish("retained", w, fig)
            elif fig["verdict"] == "FAIL" or len(self.pending.windows) > ctx.guard.max_extensions:
                self._finish("rolled-back", w, fig)
            return  # an extended verification decides nothing else this window
        rate = self.forecast()
        if fig["verdict"] == "FAIL":
            # A breach: leave the state at once for the cheapest other state predicted to hold the
            # rate, whatever it costs (never a second window on a state that failed).
            target = pred.refuge(self.active, rate)
            if target is None:
                fig["event"] = "breach (no other state in the library)"
            else:
                self._switch("breach", target.key, w, f"breach at {fig['rate_observed']:.1f}/s", fig)
            return
        best = pred.choose(rate)
        if best.key == self.active:
            self.patience.clear()
            return
        cur = pred.states[self.active]
        if not pred.passes(self.active, rate):
            self._switch("safety", best.key, w, f"{cur.label()} predicted to miss at {rate:.1f}/s", fig)
            return
        saving = 1 - (best.cost_per_hour or 0) / (cur.cost_per_hour or 1)
        if saving < ctx.guard.hysteresis:
            return
        self.patience = {best.key: self.patience.get(best.key, 0) + 1}
        if self.patience[best.key] >= ctx.guard.patience and self.switches < ctx.guard.switch_budget:
            self.switches += 1
            self.patience.clear()
            self._switch("saving", best.key, w, f"predicted saving {saving:.0%} at {rate:.1f}/s "
                         f"(margin {pred.margins[best.key]:.0%})", fig)


def run_pilot(ctx, seg: Segment, journal_path, record_decision, progress=lambda w, fig: None,
              resume: list[dict] | None = None) -> list[dict]:
    """Run (or resume) the pilot segment; its windows."""
    ctl = Controller(ctx, seg, record_decision)
    start_w = 0
    if resume:
        seg.windows = [line["window"] for line in resume]
        ctl.restore(resume[-1]["ctl"])
        start_w = resume[-1]["window"]["index"] + 1
        doc = json.loads((seg.folder / f"service-{seg.name}.json").read_text()) \
            if (seg.folder / f"service-{seg.name}.json").exists() else {}
        if not seg.adopt(doc):
            seg.apply(ctl.active)  # the service had gone: start the state in force again
    else:
        first = ctx.predictor.choose(ctx.trace.mean_rate(0, ctx.window_s))
        seg.apply(first.key)
        ctl.active = first.key
    # Trace time start_w * window runs from `origin`: earlier arrivals belong to the killed run.
    offset = start_w * ctx.window_s
    origin = time.perf_counter() + 0.2 - offset
    i0 = next((i for i, (t, _) in enumerate(seg.arrivals) if t >= offset), len(seg.arrivals))
    disp = Dispatcher(seg.arrivals, i0, origin, ctx.window_s, seg.tracker, lambda: seg.active)
    disp.start()
    try:
        for w in range(start_w, ctx.n_windows):
            _sleep_until(origin + min((w + 1) * ctx.window_s, ctx.trace.duration) + GRACE_S)
            disp.wait_past(min((w + 1) * ctx.window_s, ctx.trace.duration))
            pend = ctl.pending
            fig = seg.judge_window(w, origin, ctl.active, only_key=pend.to_key if pend else None)
            ctl.step(w, fig)
            fig.pop("clauses", None)
            seg.windows.append(fig)
            _append(journal_path, {"window": fig, "ctl": ctl.snapshot()})
            progress(w, fig)
    finally:
        disp.stop()
    return seg.windows
