"""Synthetic PEX-chain records for benchmarks and scale tests (deterministic for a seed).

The mix follows what a fleet of runners would submit: tens of workloads, a handful of
architectures, three to five dimensions per state, and a share of chains that fail
qualification (too few repetitions, no recovery, or a second dimension changed between PASS and
FAIL). Every record says it is synthetic in its provenance (`luma synthetic: generated, not a
measurement`).

Synthetic data is never measured (DESIGN §8, issue 28): the chains that would be measured are
generated as `synthetic`, an evidence class of their own that no rule qualifies, carrying the
trials a runner would have sent (judged as the sprint judges them, kb/records/judge.py). Benches and
tests that need qualified boundaries at scale opt in explicitly: they mark their own throwaway
project (`mark_bench_project`) and pass a runner key the project trusts (`signer`), and only then
are those chains generated as `measured` and signed; ingest (kb/ingest/evidence_gate.py) refuses a
measured record generated here in any project that is not marked. The random stream is the
same either way, so a marked project holds the same chains, measured.

Each chain also carries its outcomes (issue 16), consistent with its trials as ingest checks
them: a diagnosis (the crossed dimension, the binding resource and any co-binding one recover
PASS, another restoration FAILs or is not tested), a share of co-binding chains, and on a
recovered chain the frontier shift and next binding. They are drawn from a random stream of
their own (per record), so the chains themselves are the ones earlier versions generated.

With `software_share` > 0 that share of the chains also names the software it was measured with
(the workload's service, one of two library versions, the newer one more likely later in the
year) and when its trials started, so that the closed loop (rules/15-stale-boundary.rq) has
boundaries to compare; drawn from a stream of its own too, and off by default (tests that count
what the rules derive from these chains keep their figures).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from luma.kb.records import units

_ARCHS = [
    ("AMD EPYC 9654 (Zen 4)", "cpu", "AMD"), ("Intel Xeon 8480+ (Sapphire Rapids)", "cpu", "Intel"),
    ("AWS Graviton4 (Neoverse V2)", "cpu", "AWS"), ("NVIDIA H100 SXM", "gpu", "NVIDIA"),
    ("NVIDIA H200", "gpu", "NVIDIA"), ("AMD MI300X", "gpu", "AMD"),
    ("Tenstorrent Wormhole n300", "accelerator", "Tenstorrent"), ("DGX H100 (8x H100)", "system", "NVIDIA"),
]
_TASKS = ["embedding", "classification", "generation", "reranking", "speech-to-text"]
_INTERVENTIONS = [
    ("int8-weights", "software"), ("int8-dynamic-activations", "software"), ("int8-kv-cache", "software"),
    ("kv-cache-compression", "partner"), ("cxl-memory-expander", "hardware"), ("batch-size-tuning", "software"),
]
# dimension -> (unit, levels ordered small to large)
_LEVELS = {
    "compute": ("core", [1, 2, 4, 8, 16, 32, 64]),
    "host_memory": ("GiB", [1, 2, 4, 8, 16, 32, 64, 128]),
    "hbm_capacity": ("GiB", [16, 24, 40, 48, 80, 96, 141, 192]),
    "memory_bandwidth": ("GB/s", [50, 100, 200, 400, 800, 1600, 3350, 4800]),
    "kv_cache": ("block", [64, 128, 256, 512, 1024, 2048]),
    "accelerator_count": ("accelerator", [1, 2, 4, 8]),
    "interconnect": ("GB/s", [25, 50, 100, 450, 900]),
    "power": ("W", [150, 300, 450, 700, 1000]),
}
# "measured" is what a runner would have sent: `synthetic` unless a marked project signs it (records()).
_EVIDENCE = ["measured"] * 7 + ["simulated", "projected", "vendor-claim"]
#: What every synthetic record says of itself.
TOOL = "luma synthetic: generated for benchmarks and tests, not a measurement"
#: Requests a synthetic trial served: enough for a p99 interval (kb/judge.min_requests(0.99) is 368).
_REQUESTS = 1000
#: The file that marks a throwaway benchmark project, the one place synthetic chains may be measured.
BENCH_MARKER = "SYNTHETIC-BENCH"
#: What a bench over such a project says of its figures, in one line.
BENCH_NOTE = "synthetic chains counted as measured in this throwaway project"


def generated(tool: str | None) -> bool:
    """Whether a record's provenance tool says it was generated here (reports match the same prefix)."""
    return bool(tool) and tool.startswith("luma synthetic")


def mark_bench_project(home: Path) -> Path:
    """Mark the project at `home` as a throwaway benchmark project, in which ingest accepts
    synthetic chains signed as measured (benches that need qualified boundaries at scale); the
    marker says why, for whoever finds it. Never mark a project that holds real evidence."""
    home.mkdir(parents=True, exist_ok=True)
    marker = home / BENCH_MARKER
    marker.write_text(f"{BENCH_NOTE}.\nThis project was made by a benchmark or a test: kb/records/synthetic.py's chains are "
                      "signed here as measured so that the rules have qualified boundaries to derive from. "
                      "Its conclusions show the method, not hardware; do not add real evidence to it.\n")
    return marker


def is_bench_project(home: Path | None) -> bool:
    """Whether `home` was marked by `mark_bench_project`."""
    return home is not None and (Path(home) / BENCH_MARKER).is_file()


def records(n: int, seed: int = 7, signer=None, software_share: float = 0.0) -> Iterator[dict]:
    """Yield `n` distinct, valid PEX-chain records: the would-be measured ones `synthetic`, or
    `measured` and signed by `signer` for a project marked by `mark_bench_project` (ingest refuses
    them elsewhere); `software_share` of them naming their software: see the module docstring."""
    rnd = random.Random(seed)
    workloads = [(f"workload-{i:03d}", f"model-{i % 17:02d}", _TASKS[i % len(_TASKS)]) for i in range(60)]
    contracts = [
        {"name": f"contract-{i:02d}", "clauses": [
            {"metric": "p99_latency", "op": "<=", "value": rnd.choice([50, 100, 200, 500]), "unit": "ms"},
            {"metric": "quality", "op": ">=", "value": rnd.choice([0.98, 0.99, 0.995]), "unit": "dimensionless"},
        ]}
        for i in range(12)
    ]
    # Half the contracts hold the service at a stated concurrency (2 .. 64 concurrent requests), so
    # that the rule on KV growth and concurrency has chains to read; set without drawing from `rnd`,
    # so the rest of the stream (and every other field) is what it was before.
    for i, c in enumerate(contracts):
        if i % 2 == 0:
            c["concurrency"] = 2 ** (i // 2 + 1)
    dims = list(_LEVELS)
    for i in range(n):
        wl = rnd.choice(workloads)
        arch = rnd.choice(_ARCHS)
        chosen = rnd.sample(dims, rnd.randint(3, 5))
        crossed = chosen[0]
        unit, levels = _LEVELS[crossed]
        k = rnd.randrange(1, len(levels))
        pass_dims = {d: {"value": rnd.choice(_LEVELS[d][1]), "unit": _LEVELS[d][0]} for d in chosen}
        pass_dims[crossed] = {"value": levels[k], "unit": unit}
        fail_dims = {**pass_dims, crossed: {"value": levels[k - 1], "unit": unit}}
        if rnd.random() < 0.1:  # a confounded chain: a second dimension also moved
            other = chosen[1]
            fail_dims[other] = {"value": _LEVELS[other][1][0], "unit": _LEVELS[other][0]}
        binding = crossed if rnd.random() < 0.9 else rnd.choice(chosen)
        iv = rnd.choice(_INTERVENTIONS)
        contract = rnd.choice(contracts)
        evidence = rnd.choice(_EVIDENCE)
        if evidence == "measured" and signer is None:
            evidence = "synthetic"
        recovered = rnd.random() < 0.85
        repetitions = rnd.randint(2, 4)
        rec = {
            "record_type": "pex-chain",
            "evidence_class": evidence,
            "workload": {"name": wl[0], "model": wl[1], "task": wl[2]},
            "architecture": {"name": arch[0], "kind": arch[1], "vendor": arch[2]},
            "contract": contract,
            "pass_state": {"dimensions": pass_dims},
            "fail_state": {"dimensions": fail_dims},
            "crossed_dimension": crossed,
            "binding_resource": binding,
            "intervention": {"name": iv[0], "kind": iv[1]},
            "recovered": recovered,
            "repetitions": repetitions,
            # The run id makes every record distinct, as real runs are.
            "provenance": {"tool": TOOL, "git_revision": f"run-{seed}-{i}", "host": f"runner-{i % 16:02d}"},
        }
        rec.update(outcomes(random.Random(f"{seed}/{i}/outcomes"), rec, chosen, contract))
        if software_share:
            software(random.Random(f"{seed}/{i}/software"), rec, software_share)
        if evidence in ("measured", "synthetic"):  # the same draws either way: the same chains
            rec["trials"] = trials(rnd, contract, repetitions, recovered)
        if evidence == "measured":
            rec = signer.sign(rec, f"synthetic record {i}")
        yield rec


def outcomes(rnd: random.Random, rec: dict, chosen: list[str], contract: dict) -> dict:
    """Diagnosis, co-binding, frontier shift and next binding of a synthetic chain, consistent
    with its states and trials (kb/ingest/consistency_outcomes.py): every restoration that PASSes is the
    binding resource or a co-binding one; the shift's `after` is the FAIL level (the recovered
    trials PASS there) or one level lower with its own trials."""
    crossed, binding = rec["crossed_dimension"], rec["binding_resource"]
    passing = lambda state: trials(rnd, contract, 1, True)[0] | {"state": state}  # noqa: E731
    failing = {"state": "diagnosis", "repetition": 1, "verdict": "FAIL", "failure_cause": "oom"}
    co = [crossed] if binding != crossed else []
    spare = [d for d in chosen if d not in (crossed, binding)]
    if spare and rnd.random() < 0.05:  # a co-binding chain: another restoration also recovers
        co.append(spare.pop(0))
    fail_dims = rec["fail_state"]["dimensions"]
    rows = [{"dimension": crossed, "restored_level": rec["pass_state"]["dimensions"][crossed], "verdict": "PASS"}]
    for d in chosen:
        if d == crossed:
            continue
        unit, levels = _LEVELS[d]
        if fail_dims[d]["value"] == levels[-1] and d != binding and d not in co:
            rows.append({"dimension": d, "restored_level": fail_dims[d], "verdict": "not-tested",
                         "reason": "already at the runner's full level: nothing more to restore"})
            continue
        top = {"value": levels[-1] if fail_dims[d]["value"] != levels[-1] else levels[-2], "unit": unit}
        if d == binding or d in co:
            rows.append({"dimension": d, "restored_level": top, "verdict": "PASS", "trials": [passing("diagnosis")]})
        elif rnd.random() < 0.5:
            rows.append({"dimension": d, "restored_level": top, "verdict": "FAIL", "trials": [failing]})
        else:
            rows.append({"dimension": d, "restored_level": top, "verdict": "not-tested",
                         "reason": "the runner cannot set this dimension"})
    out = {"diagnosis": rows, "co_binding": co}
    if not rec["recovered"]:
        return out
    unit, levels = _LEVELS[crossed]
    before, fail = rec["pass_state"]["dimensions"][crossed], fail_dims[crossed]
    k = levels.index(fail["value"])
    shift_trials, below_range, after = [], False, fail
    if k > 0 and rnd.random() < 0.5:  # the intervention passes one level lower still
        after = {"value": levels[k - 1], "unit": unit}
        shift_trials.append(passing("after"))
        below_range = k - 1 == 0
    else:
        below_range = k == 0
    if not below_range:
        shift_trials.append({"state": "below", "repetition": 1, "verdict": "FAIL", "failure_cause": "oom"})
    (b, canonical), (a, _) = units.normalise(before["value"], unit), units.normalise(after["value"], unit)
    out["frontier_shift"] = {"dimension": crossed, "before": before, "after": after, "absolute_change": a - b,
                             "relative_change": (a - b) / b, "unit": canonical, "below_range": below_range,
                             "trials": shift_trials}
    out["next_binding"] = ({"resource": None, "note": "the intervention passes at every level given"}
                           if below_range else {"resource": crossed})
    return out


def software(rnd: random.Random, rec: dict, share: float) -> None:
    """With probability `share`, name the chain's software and its start time (in place)."""
    from datetime import datetime, timedelta, timezone

    if rnd.random() >= share:
        return
    day = rnd.uniform(0, 365)
    torch = "2.13.0" if rnd.random() < day / 365 else "2.12.0"
    rec["software"] = {"service": rec["workload"]["name"], "variant": "fp32",
                       "libraries": {"python": "3.11.7", "torch": torch}}
    started = datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(days=day)
    rec["provenance"]["started"] = started.replace(microsecond=0).isoformat()


def trials(rnd: random.Random, contract: dict, repetitions: int, recovered: bool) -> list[dict]:
    """Trials that agree with the chain: `repetitions` PASSes at the PASS state, one FAIL (out of
    memory) at the adjacent FAIL state, and `repetitions` recovered PASSes (or one FAIL)."""
    def passing(state: str, k: int) -> dict:
        obs = [{"metric": "completed_requests", "value": _REQUESTS, "unit": "request"}]
        for c in contract["clauses"]:
            if c["metric"] == "p99_latency":  # a p99 well inside the threshold, interval included
                v = c["value"] * rnd.uniform(0.3, 0.7)
                obs += [{"metric": "p99_latency", "value": round(v, 3), "unit": c["unit"]},
                        {"metric": "p99_latency.ci_low", "value": round(v * 0.9, 3), "unit": c["unit"]},
                        {"metric": "p99_latency.ci_high", "value": round(v * 1.1, 3), "unit": c["unit"]}]
            else:
                obs.append({"metric": c["metric"], "value": min(1.0, c["value"] + 0.004), "unit": c["unit"]})
        return {"state": state, "repetition": k, "verdict": "PASS", "observations": obs}

    def failing(state: str) -> dict:
        return {"state": state, "repetition": 1, "verdict": "FAIL", "failure_cause": "oom"}

    trials = [passing("pass", k) for k in range(1, repetitions + 1)] + [failing("fail")]
    trials += [passing("recovered", k) for k in range(1, repetitions + 1)] if recovered else [failing("recovered")]
    return trials


def write_jsonl(path: Path, n: int, seed: int = 7, signer=None, software_share: float = 0.0) -> Path:
    """Write `n` records as JSON Lines (the bulk interchange form)."""
    with open(path, "w") as fh:
        for rec in records(n, seed, signer, software_share):
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return path
