"""A `ToolRun` judged by LUMA's own rules at a stated machine state: the pex-trial record.

With per-request samples of every percentile a contract judges, the clause statistics, their
bootstrap intervals and sample counts come from exactly the sprint's code
(`luma.experiments.sprint.trial.judge` over the same telemetry shape a sprint's worker writes),
and the observations are what `Trial.observations` writes: the record is `measured` once a runner
key signs it, and ingest re-judges it. Without them (summary only) the record is `vendor-claim`:
the tool's own figures as point observations, the reason stated in `provenance.source.reason`,
never signed. A run with failed requests is a FAIL with cause `error`, as a sprint's is: no
percentile is taken over the survivors.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from luma.errors import ContractError
from luma.experiments.imports.run import ToolRun
from luma.experiments.sprint import trial as sprint_trial
from luma.experiments.sprint.contract import Contract
from luma.experiments.sprint.states import State
from luma.kb.records import judge as rules

TOOL = "luma import"
#: What a tool's file can give a clause: percentiles of these kinds, and these single figures.
SAMPLED = ("ttft", "tpot", "latency")
FIGURES = ("throughput", "token_throughput")


@dataclass(frozen=True)
class Target:
    """Where the imported trials are placed: contract, state, variant, workload, architecture."""

    contract: Contract
    state: State
    variant: str
    workload: dict
    architecture: dict
    environment: dict | None = None
    host: str | None = None


@dataclass
class Judged:
    """One run judged: its record (unsigned), evidence class and the clause rows."""

    run: ToolRun
    record: dict
    evidence_class: str
    verdict: str
    rows: list[dict]
    reason: str | None


def check_contract(contract: Contract, source: str) -> None:
    """ContractError unless every clause is something a tool's file can give."""
    for c in contract.service_clauses():
        kind = c.metric.split("_", 1)[-1]
        if c.metric not in FIGURES and not (rules.quantile_of(c.metric) is not None and kind in SAMPLED):
            raise ContractError(f"clause {c.metric} cannot be judged from a benchmark tool's file (it measures "
                                f"percentiles of {', '.join(SAMPLED)} and {', '.join(FIGURES)})",
                                source=source, field="clauses")


def missing(run: ToolRun, contract: Contract) -> list[str]:
    """The contract's percentile clauses the run has no per-request samples for."""
    return [c.metric for c, _ in contract.percentile_clauses() if not run.has_samples(c.metric.split("_", 1)[1])]


def load_mismatch(run: ToolRun, contract: Contract) -> str | None:
    """Why `run` was not at the contract's load (its concurrency or requested output length, as
    its file records them), else None: a trial at another load is no evidence for the contract."""
    load, said = contract.load, []
    if isinstance(run.concurrency, int) and run.concurrency != load.concurrency:
        said.append(f"concurrency {run.concurrency}, the contract's {load.concurrency} (--concurrency "
                    f"{run.concurrency} judges it at its own)")
    if run.output_len is not None and load.max_new_tokens is not None and run.output_len != load.max_new_tokens:
        said.append(f"output length {run.output_len} tokens, the contract's {load.max_new_tokens} "
                    f"(--max-new-tokens {run.output_len} judges it at its own)")
    if not said:
        return None
    return "the run's load is not the contract's: " + "; ".join(said) + \
        ": a trial not at the contract's load is no evidence for that contract (file refused)"


#: How far under the contract's output length a stream's token count may be and still count as
#: whole: the tools count a stream's tokens by re-tokenizing its text when the server reports no
#: usage (AIPerf, vLLM and SGLang against llama.cpp's server), which is a few tokens off either way
#: (AIPerf counted 62–66 for 64-token streams here); a shortened stream is far shorter.
SHORT_SLACK = 0.05


def short_streams(run: ToolRun, contract: Contract) -> tuple[int, int] | None:
    """(streams shorter than the contract's output length, the shortest) when the contract holds
    every stream to its length (`exact_tokens`, as a sprint's client does), else None."""
    ep, want = contract.endpoint, contract.load.max_new_tokens
    if ep is None or not ep.exact_tokens or want is None or not run.output_lens:
        return None
    short = [n for n in run.output_lens if n < want * (1 - SHORT_SLACK)]
    return (len(short), min(short)) if short else None


def _short_cause(contract: Contract) -> str:
    """The contract's failure cause of a shortened stream (`[service.causes]`), else `error`."""
    causes = contract.endpoint.causes if contract.endpoint is not None else {}
    return next((cause for cause, words in causes.items() if "short-output" in words), "error")


def telemetry(run: ToolRun, contract: Contract | None = None) -> dict:
    """The run as a sprint worker's telemetry (samples in seconds), which `judge` reads."""
    tel = {k: list(v) for k, v in run.samples.items() if k in SAMPLED}
    tel["completed"] = run.completed
    for key, value in (("throughput", run.throughput), ("token_throughput", run.token_throughput),
                       ("wall_s", run.duration_s)):
        if value is not None:
            tel[key] = value
    if run.failed:
        # As a sprint does: a trial whose requests failed is a FAIL with cause `error`.
        tel.update(failure_cause="error", error=f"{run.failed} request(s) failed: " + "; ".join(run.errors[:3])[:400])
    elif contract is not None and (short := short_streams(run, contract)):
        # As a sprint's client: a stream shorter than max_tokens is a failed request (short-output).
        tel.update(failure_cause=_short_cause(contract),
                   error=f"short-output: {short[0]} of {len(run.output_lens)} streams shorter than the contract's "
                         f"{contract.load.max_new_tokens} tokens (shortest {short[1]})")
    return tel


def judge(run: ToolRun, target: Target, sprint: str, sequence: int, seed: int = 0) -> Judged:
    """The pex-trial record of `run` at `target` (unsigned)."""
    gaps = missing(run, target.contract)
    tel = telemetry(run, target.contract)
    if not gaps:
        verdict, cause, rows = sprint_trial.judge(target.contract, tel, seed)
        t = sprint_trial.Trial(target.state, target.variant, "boundary", verdict, cause, rows, tel, run.completed)
        observations, evidence, reason = t.observations(), "measured", None
    else:
        reason = (run.summary_reason or "no per-request samples") + f": {', '.join(gaps)} taken from the tool's " \
                 "own summary, never measured"
        verdict, cause, rows, observations = _claimed(run, target.contract, tel)
        evidence = "vendor-claim"
    source = {"tool": run.tool, "command": [c[:4096] for c in run.command[:256]],
              "files": [f.record() for f in run.files]}
    if run.version:
        source["version"] = run.version[:256]
    why = reason or (None if run.version else run.version_reason)
    if why:
        source["reason"] = why[:256]
    prov = {"tool": TOOL, "started": datetime.now(timezone.utc).replace(microsecond=0).isoformat(), "source": source}
    if target.host:
        prov["host"] = target.host
    if target.environment:
        prov["environment"] = target.environment
    rec = {"record_type": "pex-trial", "evidence_class": evidence, "sprint": sprint, "sequence": sequence,
           "phase": "boundary", "workload": target.workload, "architecture": target.architecture,
           "contract": target.contract.record_contract(), "state": target.state.record(), "variant": target.variant,
           "verdict": verdict, "attempts": 1, "observations": observations, "provenance": prov}
    if cause:
        rec["failure_cause"] = cause
    return Judged(run, rec, evidence, verdict, rows, reason)


def _claimed(run: ToolRun, contract: Contract, tel: dict):
    """(verdict, cause, rows, observations) from the tool's own figures taken as points: a
    percentile the tool did not print is INCONCLUSIVE (nothing to judge it on)."""
    obs = [{"metric": "completed_requests", "value": run.completed, "unit": "request"}]
    for key, unit in (("throughput", "1/s"), ("token_throughput", "token/s")):
        if key in tel:
            obs.append({"metric": key, "value": float(tel[key]), "unit": unit})
    if tel.get("failure_cause"):
        return "FAIL", tel["failure_cause"], [], obs
    rows, causes = [], []
    for c in contract.service_clauses():
        threshold, q = contract.threshold(c), rules.quantile_of(c.metric)
        if q is None:
            value = tel.get(c.metric)
        else:
            kind = c.metric.split("_", 1)[1]
            fig = (run.printed.get(f"{kind}_ms") or {}).get(f"p{q * 100:g}")
            value = None if fig is None else fig / 1000
            if value is not None:
                obs.append({"metric": c.metric, "value": value, "unit": "s"})
        verdict = "INCONCLUSIVE" if value is None else rules.interval_verdict(value, value, c.op, threshold)
        rows.append({"metric": c.metric, "value": value, "threshold": threshold, "op": c.op, "verdict": verdict})
        if verdict == "FAIL":
            causes.append(rules.clause_cause(c.metric))
    verdict = rules.combine(r["verdict"] for r in rows)
    return verdict, rules.failure_cause(causes) if verdict == "FAIL" else None, rows, obs
