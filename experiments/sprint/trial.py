"""Run one physical trial in a subprocess and judge it against the contract.

A trial that crashes, runs out of memory or out of time is a FAIL with its cause, never an
exception here. An INCONCLUSIVE trial (a percentile's interval straddles its threshold) is run
again with twice the requests, up to `max_retries` times, before its verdict is taken.

Contention is measured and judged (`contention`, `luma.kb.records.judge.contention_verdict`): a
trial whose serve phase was contended and whose verdict a slower host could have produced (a
timing FAIL, an INCONCLUSIVE) is run again once the host is quiet, up to `CONTENDED_RETRIES` times;
still contended, it is INCONCLUSIVE `host-contended` — never a FAIL that moves a boundary.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from luma.experiments.endpoint import launch
from luma.experiments.sprint import contention, states, stats
from luma.experiments.sprint.contract import Contract
from luma.experiments.sprint.states import State
from luma.kb.records import judge as verdict_rules

#: Seconds a worker may spend beyond its load test's own time-out (imports, loading, quality).
GRACE_S = 60
#: Re-runs of a trial the host's contention left undecided, each after waiting for a quiet window.
CONTENDED_RETRIES = 2


@dataclass
class Trial:
    """One judged trial (telemetry kept whole; `observations` is what records carry)."""

    state: State
    variant: str
    phase: str
    verdict: str
    cause: str | None
    clauses: list[dict]
    telemetry: dict
    requests: int
    attempts: int = 1
    index: int = 0  # position in the sprint, filled by the sprint
    extra: dict = field(default_factory=dict)

    def observations(self) -> list[dict]:
        tel, out = self.telemetry, []
        for metric, unit, key in (("throughput", "1/s", "throughput"), ("quality", "dimensionless", "quality"),
                                  ("peak_rss", "B", "peak_rss_bytes"), ("weight_memory", "B", "weight_bytes"),
                                  ("runtime_footprint", "B", "runtime_footprint_bytes"),
                                  ("token_throughput", "token/s", "token_throughput"),
                                  ("completed_requests", "request", "completed"), ("wall_time", "s", "wall_s"),
                                  ("energy", "J", "energy_j")):
            if isinstance(tel.get(key), (int, float)):
                out.append({"metric": metric, "value": float(tel[key]), "unit": unit})
        out += contention.observations(tel.get("contention") or {})
        for c in self.clauses:
            if "ci_low" in c:
                out += [{"metric": c["metric"], "value": c["value"], "unit": "s"},
                        {"metric": c["metric"] + ".ci_low", "value": c["ci_low"], "unit": "s"},
                        {"metric": c["metric"] + ".ci_high", "value": c["ci_high"], "unit": "s"}]
            if "samples" in c:
                # The sample count the request-count rule judged (TTFT / TPOT samples need not
                # number the completed requests): ingest re-judges the clause from it.
                out.append({"metric": c["metric"] + ".samples", "value": c["samples"], "unit": "request"})
        return out


def judge(contract: Contract, tel: dict, seed: int = 0) -> tuple[str, str | None, list[dict]]:
    """(verdict, failure cause, per-clause results) of one trial's telemetry, by the rules of
    `luma.kb.records.judge` (ingest re-judges the trial's record with the same rules)."""
    verdict, cause, rows = _judge_clauses(contract, tel, seed)
    return (*_with_contention(verdict, cause, tel), rows)


def _with_contention(verdict: str, cause: str | None, tel: dict) -> tuple[str, str | None]:
    """The clauses' verdict once the contention of the trial's serve phase is judged."""
    return verdict_rules.contention_verdict(verdict, cause, contention.reasons(tel.get("contention") or {}))


def _judge_clauses(contract: Contract, tel: dict, seed: int) -> tuple[str, str | None, list[dict]]:
    if tel.get("failure_cause"):
        return "FAIL", tel["failure_cause"], []
    rows, verdicts, causes = [], [], []
    for clause in contract.service_clauses():
        threshold = contract.threshold(clause)
        q = verdict_rules.quantile_of(clause.metric)
        if q is not None:
            samples = tel.get(clause.metric.split("_", 1)[1], [])
            if not samples:
                verdict = verdict_rules.sampled_verdict(None, None, 0, q, clause.op, threshold)  # FAIL
                row = {"metric": clause.metric, "verdict": verdict, "samples": 0}
                rows.append(row)
                verdicts.append(row["verdict"])
                causes.append(verdict_rules.clause_cause(clause.metric))
                continue
            row = {"metric": clause.metric, **stats.percentile_verdict(samples, q, clause.op, threshold, seed)}
        else:
            value = float(tel.get(clause.metric, 0.0))
            row = {"metric": clause.metric, "value": value,
                   "verdict": verdict_rules.interval_verdict(value, value, clause.op, threshold)}
        row["threshold"] = threshold
        row["op"] = clause.op
        rows.append(row)
        verdicts.append(row["verdict"])
        if row["verdict"] == "FAIL":
            causes.append(verdict_rules.clause_cause(clause.metric))
    verdict = verdict_rules.combine(verdicts)
    return verdict, verdict_rules.failure_cause(causes) if verdict == "FAIL" else None, rows


def trial_cores(state: dict) -> list[int]:
    """The CPUs a trial runs on: the first `compute` usable ones (the rule the worker and an
    endpoint's server pin by, `launch.server_cores`), every usable one without a compute level."""
    return launch.server_cores(state) or sorted(os.sched_getaffinity(0))


#: One trial at a time on a host, whoever runs it: runners of a local cluster (or two sprints) on one
#: machine would otherwise pin their trials to the same first cores and judge each other's load.
HOST_LOCK = Path(tempfile.gettempdir()) / f"luma-trial-{os.getuid()}.lock"


def spawn(spec: dict, timeout_s: float) -> dict:
    """Run the worker on `spec`; the telemetry it wrote, or a failure telemetry if it did not.
    The host's contention over the worker's serve phase is in `telemetry["contention"]`; trials of
    this user on this host run one at a time (HOST_LOCK), the wait in `telemetry["host_lock_wait_s"]`."""
    t = time.monotonic()
    with open(HOST_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if we are killed
        waited = time.monotonic() - t
        watch = contention.Watch(trial_cores(spec["state"]))
        tel = _spawn(spec, timeout_s, watch)
        tel["contention"] = watch.stop(tel.get("serve_t0"), tel.get("serve_t1"), tel.pop("serve_snapshots", None))
    tel["host_lock_wait_s"] = round(waited, 3)
    return tel


def _spawn(spec: dict, timeout_s: float, watch: contention.Watch) -> dict:
    env = dict(os.environ)
    isa = spec["state"].get("runtime")
    if isa:
        env["ATEN_CPU_CAPABILITY"] = isa
    env.setdefault("MALLOC_ARENA_MAX", "2")  # fewer malloc arenas: less address space noise per thread
    with tempfile.TemporaryDirectory(prefix="luma-trial-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        proc = subprocess.Popen([sys.executable, "-m", "luma.experiments.sprint.worker", str(spec_path), str(out_path)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        watch.follow(proc.pid)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"failure_cause": "timeout", "error": f"worker killed after {timeout_s:.0f} s", "state": spec["state"]}
        if out_path.exists():
            return json.loads(out_path.read_text())
        text = err.decode(errors="replace")[-1500:]
        memory_limited = bool(spec["state"].get("host_memory"))
        oom = memory_limited and any(s in text.lower() for s in ("memory", "bad_alloc", "cannot allocate"))
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        return {"failure_cause": "oom" if oom or (memory_limited and proc.returncode < 0) else "crash",
                "error": f"worker ended with {how}: {text.strip().splitlines()[-1] if text.strip() else ''}"[:500],
                "state": spec["state"]}


def run_trial(contract: Contract, state: State, artifact: Path, variant: str, phase: str, *, seed: int = 0,
              max_retries: int = 2, threads: int | None = None, replicas: int | None = None,
              service_spec: dict | None = None) -> Trial:
    """One judged trial of `state`; INCONCLUSIVE ones re-run with doubled requests first.
    `service_spec`: what the service adds to the worker's spec (an endpoint's [service] table)."""
    requests = contract.requests_needed()
    load = contract.load.model_dump()
    attempts, contended = 0, []  # the contention each contended attempt saw
    while True:
        attempts += 1
        spec = {"service": contract.service, "artifact": str(artifact), "variant": variant, "state": state.enforced(),
                "load": load, "requests": requests, "seed": seed, "timeout_s": float(contract.load.timeout_s),
                "threads": threads, **({"replicas": replicas} if replicas and replicas > 1 else {}),
                "units": {dim: states.unit_kind(dim, lv) for dim, lv in state.levels},
                **(service_spec or {})}
        tel = spawn(spec, contract.load.timeout_s + GRACE_S)
        clause_verdict, clause_cause, rows = _judge_clauses(contract, tel, seed)
        verdict, cause = _with_contention(clause_verdict, clause_cause, tel)
        if contended:
            tel["contended_attempts"] = contended
        if cause == verdict_rules.CONTENDED:
            if len(contended) < CONTENDED_RETRIES:
                contended = [*contended, {**tel["contention"], "verdict_before": f"{clause_verdict} {clause_cause or ''}".strip(),
                                          "quiet_wait": contention.quiet_wait(trial_cores(spec["state"]))}]
                continue  # the same trial again, once the host is quiet (or has waited long enough)
            tel.setdefault("error", f"contended through {attempts} attempts: "
                                    + "; ".join(contention.reasons(tel.get("contention") or {})))
            return Trial(state, variant, phase, verdict, cause, rows, tel, requests, attempts)
        if verdict != "INCONCLUSIVE" or attempts > max_retries:
            return Trial(state, variant, phase, verdict, cause, rows, tel, requests, attempts)
        requests *= 2
