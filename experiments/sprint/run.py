"""The sprint core's use cases, as a program calls them (`luma sprint run|plan|optimize` call the
same functions; so does a fleet node): plan a sprint from a contract or a frozen matrix, run it
with its records written (and ingested), find the best accepted throughput on a fixed state.
Each returns plain data or a small result object; progress goes to a callable the caller gives."""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from luma.experiments.model import calibrate, guide
from luma.experiments.model import record as model_record
from luma.experiments.services import SERVICES
from luma.experiments.services import get as get_service
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint import matrix as matrix_mod
from luma.experiments.sprint import optimize, states, summary
from luma.experiments.sprint.pex import Plan, Result, Sprint, max_trials, plan
from luma.experiments.sprint.records import Recorder
from luma.experiments.sprint.states import State, describe

Progress = Callable[[str], None]


def import_service(contract) -> None:
    """Import the contract's service before anything runs: its trials run in child processes,
    where a missing extra (torch for the MiniLM, digits and decoder services) would otherwise
    surface as failed trials, not as one line naming what to install."""
    if contract.service in SERVICES:  # an unknown service is the contract loader's error
        importlib.import_module(SERVICES[contract.service].partition(":")[0])


def sprint_trials(plan: Plan) -> int:
    """At most how many trials the sprint of `plan` runs (`pex.max_trials`)."""
    return max_trials(len(plan.levels), plan.repetitions, max(len(plan.state(0).levels) - 1, 0),
                      plan.variant is not None)


def contract_plan(settings, contract_ref: str, dimension: str | None = None, levels: list[str] | None = None,
                  intervention: str | None = None, repetitions: int | None = None, start_level=None) -> Plan:
    """The Plan of a sprint of contract `contract_ref` (a shipped name or a TOML file), its
    service imported."""
    c = contracts.load(contract_ref, settings)
    import_service(c)
    return plan(c, dimension, levels, intervention, repetitions, start_level)


def matrix_plan(settings, matrix: dict, source: str, record: bool) -> Plan:
    """The Plan of a frozen experiment matrix (read by `matrix.read`), its service imported; with
    `record`, the matrix goes to the ledger and KB as an experiment-matrix record (after the plan
    is checked: a matrix that does not fit writes nothing)."""
    p = matrix_mod.to_plan(matrix, settings, source)
    if record:
        model_record.save_and_ingest(settings, [model_record.matrix_record(matrix, "luma sprint run --matrix")],
                                     "matrix", "luma sprint run --matrix")
    import_service(p.contract)
    return p


def frozen_matrix(settings, contract_ref: str, dimension: str | None, levels: list[str] | None,
                  intervention: str | None, repetitions: int | None) -> tuple[Plan, dict]:
    """The experiment matrix of a sprint, frozen before any trial runs, with the analytical
    model's verdict at each level (`luma sprint plan`)."""
    p = contract_plan(settings, contract_ref, dimension, levels, intervention, repetitions)
    predicted = guide.predicted_levels(p, calibrate.load(settings.home))
    return p, matrix_mod.freeze(p, predicted)


@dataclass
class ModelStart:
    """Where the model says bisection should start (an index into the plan's levels, or None),
    and a line saying why (None: nothing to say; `endpoint`: the model has no engine to describe)."""

    start: int | None
    note: str | None
    endpoint: bool = False


def model_start(plan: Plan, home: Path, use_model: bool | None) -> ModelStart:
    """The model's predicted minimum PASS level, when asked for (`use_model`) or when a
    calibration exists; none otherwise."""
    if plan.contract.endpoint is not None:
        return ModelStart(None, "model: the analytical model has no description of an endpoint's engine: plain "
                                "bisection" if use_model else None, endpoint=True)
    calibration = calibrate.load(home)
    if use_model is False or (use_model is None and calibration is None):
        return ModelStart(None, None)
    start = guide.predicted_start(plan, calibration)
    what = "calibrated" if calibration else "uncalibrated"
    return ModelStart(start, f"model ({what}): " + ("no level predicted to pass, plain bisection" if start is None
                                                    else f"predicted minimum PASS {describe(plan.levels[start])}"))


@dataclass
class SprintRun:
    """A sprint that ran: its result, its summary (what `luma sprint run --format json` prints,
    with `chain_recorded` and `records_folder`), its records' folder and its chain record."""

    result: Result
    summary: dict
    folder: Path
    chain: dict | None


def run_sprint(plan: Plan, settings, record: bool = True, progress: Progress | None = None,
               sprint_id: str | None = None, fleet: dict | None = None, fresh: bool = False) -> SprintRun:
    """Run one sprint of `plan` and write its records under the project (ingested when `record`);
    `fleet` marks a campaign unit's records, `fresh` clears what an earlier attempt of the same
    sprint left in its folder."""
    sprint_id = sprint_id or plan.new_id()
    recorder = Recorder(settings, plan, sprint_id, ingest=record, fleet=fleet)
    if fresh:
        shutil.rmtree(recorder.folder, ignore_errors=True)
    with recorder:  # a recording sprint holds one KB from its start to its chain (Recorder says why)
        result = Sprint(plan, settings.home / "artifacts", recorder.trial, progress, sprint_id).run()
        out = summary.summarize(result)
        chain = recorder.finish(result, out)
    out["chain_recorded"] = chain is not None and record
    out["records_folder"] = str(recorder.folder)
    return SprintRun(result, out, recorder.folder, chain)


@dataclass
class OptimizeSetup:
    """What `luma sprint optimize` tries: the contract, its state, the service and the thread x
    replica layouts (empty when none fits: `why` says why), batch sizes and variants."""

    contract: contracts.Contract
    state: State
    service: object
    layouts: list
    threads: list[int] | None
    replicas: list[int] | None
    batches: list[int] | tuple[int, ...]
    variants: list[str] | None
    why: str = ""

    def max_trials(self) -> int:
        """At most how many trials `optimize` runs: every batch size of every variant and thread and
        replica layout (the walk stops early once throughput stops rising), and two confirmations."""
        known = self.variants or ["fp32", *dict.fromkeys(self.service.interventions.values())]
        return len(known) * max(sum(len(optimize.batches_for(self.contract, self.batches, r))
                                    for _, r in self.layouts), 1) + 2


def optimize_setup(settings, contract_ref: str, state_levels: dict[str, str], threads: list[int] | None,
                   replicas: list[int] | None, batches: list[int] | None, variants: list[str] | None) -> OptimizeSetup:
    """Resolve what an optimize run tries on the fixed state `state_levels` (over the contract's)."""
    c = contracts.load(contract_ref, settings)
    import_service(c)
    state = states.State.of(states.resolve({**dict(c.state), **state_levels}))
    service, cores = get_service(c.service), state.enforced().get("compute") or 1
    layouts = optimize.layouts(service, cores, threads, replicas)
    why = ""
    if not layouts:
        why = (f"the {c.service} service's engine cannot be replicated" if not getattr(service, "replicable", False)
               and any(r > 1 for r in replicas or []) else f"threads x replicas exceeds the state's {cores} core(s)")
    return OptimizeSetup(c, state, service, layouts, threads, replicas, batches or optimize.BATCHES, variants, why)


def run_optimize(setup: OptimizeSetup, settings, record: bool = True, progress: Progress | None = None) -> dict:
    """The best accepted throughput on the setup's state (`optimize.run`), every trial recorded
    (ingested when `record`); the public result with `result_recorded` and `records_folder`."""
    c, state = setup.contract, setup.state
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    recorder = Recorder(settings, optimize.plan_for(c, state.as_dict()), f"{c.name}-optimize-{stamp}", ingest=record)
    with recorder:  # one KB for the search's records, held from its start to its result
        out = optimize.run(c, state, settings.home / "artifacts", setup.threads, setup.batches, recorder.trial,
                           progress, setup.variants, setup.replicas)
        public = {k: v for k, v in out.items() if not k.startswith("_")}
        recorded = recorder.optimum(c, state, out, public) if out["_trials"] else None
    return {**public, "result_recorded": recorded is not None and record, "records_folder": str(recorder.folder)}
