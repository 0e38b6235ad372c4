"""LUMA's public API: what a program calls to do what the `luma` command does, and the types it
gets back. Each use case here is the function the CLI command itself calls (named beside it), so a
program and the shell take the same path; everything else in the package is internal and may move.

    from pathlib import Path
    from luma.api import Settings, KnowledgeBase, contract_plan, run_sprint, run_rules, RunLimits, boundary_report

    settings = Settings.from_env(home="my-project")          # as `luma --home my-project`
    plan = contract_plan(settings, "matvec-memory")           # `luma sprint run matvec-memory`
    run = run_sprint(plan, settings)                          # trials and chain signed, written, ingested
    with KnowledgeBase.open(settings) as kb:                  # `luma rules run`
        run_rules(kb, RunLimits.of(settings))
    boundary_report(settings, Path("report"), sprint=run.summary["sprint"])   # `luma report boundary`

Importing this module imports neither torch nor ray (tests/test_api.py checks): a service's torch
comes in when a plan of a contract that needs it is made, ray when a campaign connects to its
cluster. It sits above every other layer (tests/test_import_graph.py) and `luma/__init__.py` does
not import it, so `import luma.kb` stays light.
"""

# The project, its settings and its errors.
from luma.errors import LumaError
from luma.settings import Settings

# The knowledge base: open (creating on first use), ingest record files, query
# (`luma kb init|ingest|query`).
from luma.kb.knowledge_base import IngestReport, KnowledgeBase, open_kb
from luma.kb.query.named import NamedQuery, get_named_query
from luma.kb.query.scope import Scope, scoped_query

# The record kinds a runner or partner submits (pydantic models; `luma kb schema` prints their
# JSON Schemas).
from luma.kb.records.intervention_params import InterventionParameters
from luma.kb.records.kernel_result import KernelResult
from luma.kb.records.machine import MachineRecord
from luma.kb.records.model_prediction import ExperimentMatrix, ModelPrediction
from luma.kb.records.optimize_result import OptimizeResult
from luma.kb.records.pex_chain import PexChain
from luma.kb.records.pex_trial import PexTrial
from luma.kb.records.pilot_decision import PilotDecision

# The rules (`luma rules run`).
from luma.rules.isolated_run import RunLimits, run_rules
from luma.rules.run_report import RunReport

# Sprints on this machine (`luma sprint plan|run|optimize|requalify`).
from luma.experiments.sprint.contract import Contract, load as load_contract
from luma.experiments.sprint.matrix import read as read_matrix
from luma.experiments.sprint.pex import Plan
from luma.experiments.sprint.requalify import (Requalification, Requalified, plan_requalification,
                                               run_requalification)
from luma.experiments.sprint.run import (OptimizeSetup, SprintRun, contract_plan, frozen_matrix, matrix_plan,
                                         optimize_setup, run_optimize, run_sprint)

# Campaigns on a Ray cluster (`luma campaign plan|run`): ray is imported when Head connects.
from luma.experiments.fleet.campaign import Campaign, load as load_campaign
from luma.experiments.fleet.head import Head
from luma.experiments.fleet.planner import plan as plan_campaign

# The Economic Control Pilot (`luma pilot run [--resume]`).
from luma.experiments.pilot.resume import prepare_resume as resume_pilot
from luma.experiments.pilot.run import prepare as prepare_pilot, run as run_pilot

# A partner's intervention, projected by the analytical model (`luma partner evaluate`).
from luma.experiments.model.partner_evaluation import PartnerEvaluation, evaluate_partner

# The reports (`luma report boundary|design-in|partner|pilot`).
from luma.reports.build import boundary_report, design_in_report, partner_report, pilot_report
from luma.reports.render import Written

__all__ = [
    "Campaign",
    "Contract",
    "ExperimentMatrix",
    "Head",
    "IngestReport",
    "InterventionParameters",
    "KernelResult",
    "KnowledgeBase",
    "LumaError",
    "MachineRecord",
    "ModelPrediction",
    "NamedQuery",
    "OptimizeResult",
    "OptimizeSetup",
    "PartnerEvaluation",
    "PexChain",
    "PexTrial",
    "PilotDecision",
    "Plan",
    "Requalification",
    "Requalified",
    "RunLimits",
    "RunReport",
    "Scope",
    "Settings",
    "SprintRun",
    "Written",
    "boundary_report",
    "contract_plan",
    "design_in_report",
    "evaluate_partner",
    "frozen_matrix",
    "get_named_query",
    "load_campaign",
    "load_contract",
    "matrix_plan",
    "open_kb",
    "optimize_setup",
    "partner_report",
    "pilot_report",
    "plan_campaign",
    "plan_requalification",
    "prepare_pilot",
    "read_matrix",
    "resume_pilot",
    "run_optimize",
    "run_pilot",
    "run_requalification",
    "run_rules",
    "run_sprint",
    "scoped_query",
]
