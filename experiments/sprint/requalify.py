"""`luma sprint requalify` as a use case (the closed loop, issue 16 item 4): bring the rules up to
date, list the stale qualified boundaries and the optimize runs a hardware change calls for, plan
one sprint per sprint set-up to measure the chosen boundaries again (the trial budget first), run
them, and bring the rules up to date again. `plan_requalification` decides and opens the KB;
`run_requalification` measures (experiments/sprint/stale.py says what is stale)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from luma.errors import ConfigError
from luma.experiments.sprint import records, stale
from luma.experiments.sprint.pex import Plan, plan
from luma.experiments.sprint.run import import_service, run_sprint, sprint_trials
from luma.kb.knowledge_base import KnowledgeBase
from luma.rules.engine import Engine


@dataclass
class Requalification:
    """What is stale, what a hardware change calls for, and the sprints that measure the chosen
    boundaries again (each with the targets it requalifies)."""

    stale_rows: list[dict]
    proposals: list[dict]
    targets: list[stale.Target]
    plans: list[tuple[Plan, list[stale.Target]]]

    @property
    def budget(self) -> int:
        """At most how many physical trials the sprints run."""
        return sum(sprint_trials(p) for p, _ in self.plans)


@dataclass
class Requalified:
    """The sprints that ran (`summaries`, each a SprintRun's summary) and the chains still stale
    after the rules ran again (empty without `record`)."""

    runs: list[tuple[dict, list[stale.Target]]] = field(default_factory=list)
    still_stale: list[str] = field(default_factory=list)


def plan_requalification(settings, chains: list[str], all_stale: bool) -> Requalification:
    """Run the rules, then plan the sprints that measure `chains` (chain IRIs or 8+ hex digits of
    their key) again, and with `all_stale` every open stale boundary; ConfigError for a chain that
    is no qualified boundary."""
    with KnowledgeBase.open(settings) as kb:
        picked = stale.chains_named(kb, list(chains)) if chains else []  # before anything changes
        Engine(kb).run()
        left = stale.unqualified(kb, picked)
        if left:
            raise ConfigError(f"chain {left[0]} is no qualified boundary (`luma kb query --name "
                              "qualified-boundaries` lists them): nothing to measure again")
        rows = stale.stale_rows(kb)
        if all_stale:
            picked += [r["chain"] for r in rows if r["chain"] not in picked]
        hashes = stale.chain_hashes(kb, picked)
        folders = stale.sprint_folders(settings.home) if picked else {}
        targets = [stale.target(settings, c, hashes[c], folders, kb.ledger) for c in picked]
        proposals = stale.proposed_optimizations(kb, records.architecture(), records.environment())
    for t in targets:
        t.stale = [r for r in rows if r["chain"] == t.chain]
    runs: dict[tuple, list[stale.Target]] = {}
    for t in targets:  # boundaries of one sprint set-up are measured again by one sprint
        runs.setdefault(t.key(), []).append(t)
    plans = []
    for group in runs.values():
        t = group[0]
        import_service(t.contract)
        plans.append((plan(t.contract, t.dimension, t.levels, t.intervention, t.repetitions), group))
    return Requalification(rows, proposals, targets, plans)


def run_requalification(req: Requalification, settings, record: bool = True,
                        progress: Callable[[Plan], AbstractContextManager] | None = None) -> Requalified:
    """Run the planned sprints (each inside `progress(plan)`, a context giving the sprint's
    progress callable), then, when `record`, the rules again: which targets are still stale."""
    done = Requalified()
    for p, group in req.plans:
        with (progress(p) if progress else nullcontext(None)) as on_step:
            run = run_sprint(p, settings, record, on_step)
        done.runs.append((run.summary, group))
    if record:
        with KnowledgeBase.open(settings) as kb:
            Engine(kb).run()
            open_now = {r["chain"] for r in stale.stale_rows(kb)}
        done.still_stale = [t.chain for t in req.targets if t.chain in open_now]
    return done
