"""The qualified-state library of a contract: the only states a pilot may apply.

A state enters when the ledger holds measured evidence that it serves the contract on this
machine, under the software running now:

* a sprint's pex-trial records (any phase but optimize) of the contract — same name and the same service
  clauses — at one (machine state, variant): at least `MIN_PASS` PASS trials and no FAIL or
  INCONCLUSIVE one; its settings are the contract's batch and the state's cores as threads;
* an optimize-result record's best configuration (already confirmed by two PASS trials), with its
  batch, threads and engine replicas.

Every record must be `measured`, signed by a runner key the ledger trusts and has not revoked,
of this host's architecture (CPU model), and not stale: its environment (Python, NumPy, torch,
CPU ISA) equals the one running now — a state measured under other software is evidence about
that software, not this service. Capacity is the lowest throughput of the state's PASS trials (a
closed loop at the contract's concurrency: the rate it served with every clause holding).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from luma.errors import NotPriced, StateError
from luma.experiments.sprint import stats
from luma.experiments.sprint.records import architecture, environment
from luma.experiments.sprint.states import State, describe, resolve
from luma.kb.records import units
from luma.kb.store.ledger import Ledger
from luma.experiments.pricing import Amount, state_cost
from luma.kb.records import pilot_decision
from luma.kb.records.pex_chain import Level
from luma.kb.trust.runners import trusted_keys

MIN_PASS = 2
#: The two record kinds a library reads.
TRIALS = "pex-trial"
OPTIMA = "optimize-result"
#: Environment keys that make a record stale when they differ from this host's now.
SOFTWARE_KEYS = ("python", "numpy", "torch", "cpu_model", "isa")


@dataclass
class LibraryState:
    """One qualified state: levels, software, measured capacity and economics."""

    key: str
    levels: dict[str, dict]  # record form: {"compute": {"value": 1, "unit": "core"}, ...}
    variant: str
    settings: dict[str, int]
    capacity: float  # accepted requests per second (lowest of its PASS trials)
    p95_latency: float | None  # seconds, highest of its trials
    quality: float | None
    trials: int
    sources: list[str] = field(default_factory=list)
    cost_per_hour: float | None = None
    currency: str | None = None
    cores: int = 1
    memory_bytes: float | None = None

    def label(self) -> str:
        parts = [describe(Level.model_validate(self.levels[d])) for d in sorted(self.levels) if d != "runtime"]
        reps = self.settings.get("replicas", 1)
        return " · ".join(parts + [self.variant, *([f"{reps} replicas"] if reps > 1 else []),
                                   f"batch {self.settings.get('max_batch')}"])

    def record_state(self) -> dict:
        return {"key": self.key, "state": {"dimensions": self.levels}, "variant": self.variant,
                "settings": dict(self.settings)}

    def enforced(self) -> dict:
        return State.of(resolve(self.levels)).enforced()


def state_key(levels: dict, variant: str, settings: dict) -> str:
    """The stable key of a state (the record helper's, so records and library agree)."""
    return pilot_decision.state_key(levels, variant, settings)


def _software(rec: dict) -> dict:
    env = (rec.get("provenance") or {}).get("environment") or {}
    return {k: env.get(k) for k in SOFTWARE_KEYS}


def current_software() -> dict:
    env = environment()
    return {k: env.get(k) for k in SOFTWARE_KEYS}


def _p95(observations: list[dict]) -> float | None:
    for o in observations:
        if stats.quantile_of(o["metric"]) and o["metric"].endswith("latency") and "." not in o["metric"]:
            return units.normalise(o["value"], o["unit"])[0]
    return None


def _obs(observations: list[dict], metric: str) -> float | None:
    for o in observations:
        if o["metric"] == metric:
            return float(o["value"])
    return None


def build(project, contract, prices=None) -> tuple[list[LibraryState], list[str]]:
    """(the library, why records were left out: one line per reason with its count)."""
    from collections import Counter

    wanted = contract.record_contract()
    arch = architecture()["name"]
    software = current_software()
    ledger = Ledger(project.db_url)
    try:
        if project.db_url.startswith("sqlite:///"):
            from pathlib import Path

            if not Path(project.db_url[len("sqlite:///"):]).is_file():
                return [], ["the project has no ledger yet: run `luma sprint run` / `luma sprint optimize` first"]
        keys = trusted_keys(ledger)
        rows = ledger.rows_of_kinds([TRIALS, OPTIMA], "kind", "content_hash", "payload")
    finally:
        ledger.dispose()
    skipped: Counter = Counter()
    groups: dict[str, dict] = {}

    def admit(rec: dict) -> bool:
        if rec.get("evidence_class") != "measured":
            skipped["not measured"] += 1
            return False
        att = rec.get("attestation") or {}
        k = keys.get(att.get("key"))
        if k is None or k.revoked:
            skipped["not signed by a trusted, unrevoked runner key"] += 1
            return False
        if rec["contract"].get("name") != wanted["name"] or rec["contract"].get("clauses") != wanted["clauses"]:
            return False  # another contract: not counted as left out
        if rec["architecture"].get("name") != arch:
            skipped[f"measured on another architecture than this host's ({arch})"] += 1
            return False
        if _software(rec) != software:
            skipped["stale: measured under other software (Python, NumPy, torch or ISA differ)"] += 1
            return False
        return True

    for kind, digest, payload in rows:
        rec = json.loads(payload)
        if not admit(rec):
            continue
        if kind == TRIALS:
            if rec.get("phase") == "optimize":
                continue  # its configuration (batch, threads) is in the optimize-result record, not here
            levels = rec["state"]["dimensions"]
            cores = int(levels.get("compute", {}).get("value", 1))
            settings = {"max_batch": contract.load.max_batch, "threads": cores}
            key = state_key(levels, rec["variant"], settings)
            g = groups.setdefault(key, {"levels": levels, "variant": rec["variant"], "settings": settings, "trials": []})
            g["trials"].append((rec["verdict"], rec.get("observations", []), f"pex-trial {digest[:12]}"))
        else:
            best = rec.get("best")
            if not best:
                continue
            levels = rec["state"]["dimensions"]
            cores = int(levels.get("compute", {}).get("value", 1))
            chosen = best.get("settings", {})
            settings = {"max_batch": chosen.get("max_batch", contract.load.max_batch),
                        "threads": chosen.get("threads", cores)}
            if int(chosen.get("replicas", 1)) > 1:
                settings["replicas"] = int(chosen["replicas"])
            key = state_key(levels, best["variant"], settings)
            g = groups.setdefault(key, {"levels": levels, "variant": best["variant"], "settings": settings, "trials": []})
            for conf in rec["configurations"]:
                if conf["software"] == best:
                    for t in conf["trials"]:
                        g["trials"].append((t["verdict"], t.get("observations", []), f"optimize-result {digest[:12]}"))
    library = []
    for key, g in groups.items():
        verdicts = [v for v, _, _ in g["trials"]]
        if verdicts.count("PASS") < MIN_PASS or any(v != "PASS" for v in verdicts):
            skipped["states with fewer than two PASS trials, or a FAIL or INCONCLUSIVE one"] += 1
            continue
        rates = [_obs(o, "throughput") for _, o, _ in g["trials"]]
        if any(r is None for r in rates):
            skipped["PASS trials without a throughput observation"] += 1
            continue
        p95s = [p for _, o, _ in g["trials"] if (p := _p95(o)) is not None]
        quals = [q for _, o, _ in g["trials"] if (q := _obs(o, "quality")) is not None]
        s = LibraryState(key, g["levels"], g["variant"], g["settings"], min(rates), max(p95s) if p95s else None,
                         min(quals) if quals else None, len(verdicts), sorted({src for _, _, src in g["trials"]}))
        s.cores = int(g["levels"].get("compute", {}).get("value", 1))
        mem = g["levels"].get("host_memory")
        s.memory_bytes = units.normalise(mem["value"], mem["unit"])[0] if mem else None
        library.append(s)
    if prices is not None:
        price_all(library, prices)
    library.sort(key=lambda s: (s.cost_per_hour if s.cost_per_hour is not None else float("inf"), -s.capacity))
    return library, [f"{n} record(s) or state(s) left out: {why}" for why, n in sorted(skipped.items())]


def price_all(library: list[LibraryState], prices) -> None:
    """Each state's cost per hour from the price table (ConfigError if it cannot be priced)."""
    for s in library:
        levels = {"compute": Amount(float(s.cores), "core")}
        if s.memory_bytes is not None:
            levels["host_memory"] = Amount(float(s.memory_bytes), "byte")
        try:
            got = state_cost(levels, prices)
        except NotPriced as exc:
            raise StateError(f"state {s.label()} cannot be priced: {exc}", source=prices.source) from None
        s.cost_per_hour, s.currency = got.per_hour, got.currency


def find(library: list[LibraryState], key: str) -> LibraryState:
    """The library state with `key`; ConfigError for a state outside the library (never applied)."""
    for s in library:
        if s.key == key:
            return s
    raise StateError(f"state {key!r} is not in the qualified-state library of this contract "
                      f"({', '.join(s.key for s in library) or 'empty'}); a pilot applies library states only",
                      field="state")
