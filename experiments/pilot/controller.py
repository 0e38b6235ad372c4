"""The control loop: each window observe → predict → select → apply → verify → retain or roll back.

Guardrails. Only library states are ever started (`Segment.apply` refuses any other key). A
switch when the state in force is predicted to fail (or has breached) is applied at once; a
switch to save cost waits until the same cheaper state has been predicted to pass for `patience`
windows, must save at least `hysteresis` of the cost per accepted output, and spends the switch
budget. A switch is verified on the live traffic the new state serves in the next window: PASS
retains it, FAIL rolls back at once, INCONCLUSIVE extends the verification by a window up to
`max_extensions` times, then rolls back. A breach of the state in force triggers a switch the
same way. A state that fails a window (verification or breach) is left at the end of that window
for the cheapest other state predicted to hold the rate (`Predictor.refuge`), whatever it costs:
the pilot never serves two windows in a row on a state that failed. States are ordered by
measured capacity, never by cost: "upscale" is a switch to more measured capacity, "downscale"
to less. Every finished decision becomes a signed record.

The journal (`journal.jsonl`, one fsynced line per window with the controller's state) and
`service.json` (the servers alive, replaced atomically) are what `--resume` continues from.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from luma.experiments.pilot import window as win
from luma.experiments.pilot.serving import Dispatcher, Instance, Tracker

GRACE_S = 0.3  # after a window ends: its last requests get this long to be answered before judgement


def write_atomic(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=1, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass
class Pending:
    """A switch under verification."""

    action: str
    from_key: str | None
    to_key: str
    decided_window: int
    reason: str
    observed: dict
    prediction: dict
    windows: list[dict] = field(default_factory=list)
    #: Why it was made: "saving" (a cheaper state), "safety" (the state in force predicted to
    #: miss) or "breach" (the state in force failed a window).
    purpose: str = "safety"


class Segment:
    """One replay of the trace against the running service: the pilot (a controller decides) or
    a baseline (one state throughout). Owns its servers, its tracker and its windows."""

    def __init__(self, ctx, name: str, folder: Path, arrivals, start_window: int = 0):
        self.ctx, self.name, self.folder = ctx, name, folder
        self.arrivals = arrivals
        self.tracker = Tracker()
        self.active: Instance | None = None
        self.others: list[Instance] = []  # draining, or starting
        self.windows: list[dict] = []
        #: Who served what when: [instance name, state key, start, end or None] (perf_counter).
        self.intervals: list[list] = []
        self.cpu_seen: dict[str, float] = {}
        self.start_window = start_window

    # -- servers ---------------------------------------------------------------------------
    def spec_of(self, key: str) -> dict:
        s = self.ctx.library_state(key)  # raises for a key outside the library: never applied
        return {"service": self.ctx.contract.service, "artifact": str(self.ctx.artifacts[s.variant]),
                "variant": s.variant, "state": s.enforced(), "threads": s.settings.get("threads"),
                "replicas": s.settings.get("replicas", 1), "max_batch": s.settings.get("max_batch", 8), "load": self.ctx.contract.load.model_dump(),
                "contexts": self.ctx.contexts, "seed": self.ctx.seed, "orphan_s": self.ctx.orphan_s,
                "deadline_s": self.ctx.timeout_s}

    def _track(self, inst: Instance) -> None:
        now = time.perf_counter()
        for iv in self.intervals:
            if iv[0] == inst.name and iv[3] is None:
                iv[3] = now
        self.intervals.append([inst.name, inst.key, now, None])
        self.cpu_seen.setdefault(inst.name, inst.cpu_seconds() or 0.0)

    def apply(self, key: str) -> Instance:
        """Apply a library state: in place when only cores, threads, replicas, batch or the memory
        limit change (instant: affinity, torch threads, engine replicas, RLIMIT_DATA, batch), else by a rolling restart
        — the new state's server starts beside the one serving, new arrivals go to it once it is
        ready, and the old one drains (no request is lost)."""
        spec = self.spec_of(key)
        if self.active is not None and self.active.apply_in_place(key, spec):
            self._track(self.active)
            self._save_service()
            return self.active
        inst = Instance(self.folder / "servers", key, self.spec_of(key), self.tracker)
        inst.start()
        self.others.append(inst)
        self._save_service()
        try:
            inst.wait_ready()
        except Exception:
            self.others.remove(inst)
            self._save_service()
            raise
        self._track(inst)
        self.others.remove(inst)
        old, self.active = self.active, inst
        if old is not None:
            self.others.append(old)
            old.stop()
        self._save_service()
        return inst

    def adopt(self, doc: dict) -> bool:
        """Reconnect to the server a killed pilot left serving (resume); False if it is gone."""
        a = doc.get("active")
        if not a:
            return False
        self.ctx.library_state(a["key"])
        inst = Instance(self.folder / "servers", a["key"], self.spec_of(a["key"]), self.tracker, name=a["name"])
        inst.pid = a.get("pid")
        if not inst.alive() or not inst.connect():
            return False
        self.active = inst
        self._track(inst)
        for o in doc.get("others", []):  # a switch the kill interrupted: its other server goes
            other = Instance(self.folder / "servers", o["key"], self.spec_of(o["key"]), self.tracker, name=o["name"])
            other.pid = o.get("pid")
            other.kill()
        self._save_service()
        return True

    def _save_service(self) -> None:
        def row(i: Instance) -> dict:
            return {"key": i.key, "name": i.name, "pid": i.pid}

        write_atomic(self.folder / f"service-{self.name}.json",
                     {"active": row(self.active) if self.active else None, "others": [row(i) for i in self.others]})

    def close(self) -> None:
        for inst in [self.active, *self.others]:
            if inst is not None:
                inst.stop()
        for inst in [self.active, *self.others]:
            if inst is not None and not inst.wait_gone(20):
                inst.kill()
        self.active, self.others = None, []
        self._save_service()

    # -- windows ---------------------------------------------------------------------------
    def _costs(self, w_start: float, w_end: float) -> tuple[float, float, float]:
        """(cost, energy J, cpu s) of every server alive in [w_start, w_end] (perf_counter): each
        state is paid for the seconds it was allotted, and a server's CPU time in the window is
        shared among its states by those seconds."""
        cost = energy = cpu = 0.0
        insts = {i.name: i for i in [self.active, *self.others] if i is not None}
        spans: dict[str, list[tuple[str, float]]] = {}
        for name, key, start, end in self.intervals:
            lo, hi = max(start, w_start), min(end if end is not None else w_end, w_end)
            if hi > lo:
                spans.setdefault(name, []).append((key, hi - lo))
        for name, parts in spans.items():
            inst = insts.get(name)
            now_cpu = inst.cpu_seconds() if inst is not None else None
            used = max(0.0, (now_cpu if now_cpu is not None else self.cpu_seen[name]) - self.cpu_seen[name])
            if now_cpu is not None:
                self.cpu_seen[name] = now_cpu
            cpu += used
            total = sum(sec for _, sec in parts)
            for key, seconds in parts:
                s = self.ctx.library_state(key)
                j = self.ctx.power.joules(used * seconds / total, s.cores, seconds)
                energy += j
                cost += (s.cost_per_hour or 0.0) * seconds / 3600.0 + self.ctx.kwh_price * j / 3.6e6
        for iv in self.intervals:  # a drained server is paid until the window it went in
            inst = insts.get(iv[0])
            if iv[3] is None and (inst is None or not inst.alive()):
                iv[3] = w_end
        return cost, energy, cpu

    def judge_window(self, w: int, origin: float, state_key: str, only_key: str | None = None) -> dict:
        ctx = self.ctx
        start_s, end_s = w * ctx.window_s, min((w + 1) * ctx.window_s, ctx.trace.duration)
        now = time.perf_counter()
        reqs = self.tracker.of_window(w)
        earlier = [r for r in reqs if only_key and r.state != only_key]
        if only_key:
            reqs = [r for r in reqs if r.state == only_key]
        s = ctx.library_state(state_key)
        cost, energy, cpu = self._costs(origin + start_s, origin + end_s)
        fig = win.judge(ctx.contract, reqs, now, s.quality, cost, energy, end_s - start_s, ctx.timeout_s, seed=w)
        if earlier:
            # A verification judges the new state on its own traffic; the requests the state
            # before it served early in the window still count in the run's totals.
            prev = ctx.library_state(earlier[0].state)
            efig = win.judge(ctx.contract, earlier, now, prev.quality, 0.0, 0.0, end_s - start_s, ctx.timeout_s,
                             seed=w)
            fig["before_switch"] = {k: efig[k] for k in ("requests", "completed", "errors", "accepted",
                                                          "outside_contract")}
        fig.update(index=w, start_s=start_s, end_s=end_s, rate_offered=ctx.trace.mean_rate(start_s, end_s),
                   rate_observed=len(self.tracker.of_window(w)) / max(1e-9, end_s - start_s), state=state_key,
                   slo=ctx.slo, cpu_s=cpu, verification=False, extension=0, event=None,
                   service=self.tracker.service(state_key, origin + start_s, origin + end_s))
        return fig

    def replay(self, key: str, progress=lambda w, fig: None) -> list[dict]:
        """A baseline: the whole trace on one state."""
        self.apply(key)
        origin = time.perf_counter() + 0.2
        n = self.ctx.n_windows
        disp = Dispatcher(self.arrivals, 0, origin, self.ctx.window_s, self.tracker, lambda: self.active)
        disp.start()
        try:
            for w in range(n):
                _sleep_until(origin + min((w + 1) * self.ctx.window_s, self.ctx.trace.duration) + GRACE_S)
                disp.wait_past(min((w + 1) * self.ctx.window_s, self.ctx.trace.duration))
                fig = self.judge_window(w, origin, key)
                fig.pop("clauses", None)
                self.windows.append(fig)
                progress(w, fig)
        finally:
            disp.stop()
            self.close()
        return self.windows


def _sleep_until(t: float) -> None:
    while True:
        left = t - time.perf_counter()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))
