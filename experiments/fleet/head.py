"""The campaign head: places a campaign's units on a Ray cluster and takes their signed records
into the project's ledger and KB.

Placement is Ray's: each unit is one task with the label selector of its machine class plus
`luma-runner-key in (the keys this project trusts)`, and one `luma-runner` resource, of which
every runner offers exactly one — so a machine runs one sprint (one trial) at a time and a
machine whose key is not trusted gets no work. A node that dies mid-unit: Ray re-runs the task
on another node of the class (`max_retries`); its first attempt's records never left that node,
so nothing half is recorded. A unit's records are ingested all at once or not at all (verified
as any ingest: signatures, trusted keys, verdicts re-judged), submitted as `luma campaign ID`;
a head that restarts reads those back from the ledger and runs only what is missing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from luma import names
from luma.errors import ConfigError, LumaError
from luma.experiments.fleet import attempts, labels as node_labels, loopback
from luma.experiments.fleet.campaign import Campaign, Unit
from luma.experiments.fleet.node import run_unit
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.store.ledger import Ledger
from luma.kb.trust.runners import trusted_keys

#: Re-runs of a unit whose node died (Ray's system-failure retries).
MAX_RETRIES = 3
_FILE = re.compile(r"^(trial-\d{3,6}|chain|sprint)\.json$")


def submitter(campaign_id: str) -> str:
    return f"luma campaign {campaign_id}"


def folder(home: Path, campaign_id: str) -> Path:
    """The campaign's folder, campaigns/ID/; ConfigError when ID could lead outside the project
    (an ID read back from a state file, or given on the command line)."""
    return names.child(home, Path(home) / "campaigns", campaign_id, field="campaign", longest=names.MAX_ID)


def sprint_folder(home: Path, sprint_id: str) -> tuple[Path, Path]:
    """A campaign sprint's folder under sprints/ and the `.incoming` folder its files arrive in,
    both checked to lie inside the project: the head removes them before it writes."""
    target = names.child(home, Path(home) / "sprints", sprint_id, field="sprint", longest=names.MAX_ID)
    return target, names.inside(home, target.with_name(target.name + ".incoming"), field="sprint")


def connect(address: str) -> None:
    """Join the Ray cluster at `address` as a driver (Ray's authentication is in this process's
    environment: auth.resolve); a ConfigError naming it when it cannot."""
    import ray

    if ray.is_initialized():
        return
    if loopback.is_loopback(address):  # a cluster on 127.0.0.1 (luma runner join): reach it there
        loopback.keep_loopback()
    try:
        ray.init(address=address, namespace="luma", log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError ...
        raise ConfigError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0][:300]} (is it up, "
                          "and is this the token it was started with?)", field="cluster") from None


def disconnect() -> None:
    """Leave the cluster (a no-op when this process never joined it)."""
    import sys

    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()


def saved_states(home: Path) -> list[dict]:
    """Every campaign state this project's heads wrote (campaigns/*/state.json), by ID; an
    unreadable one is left out."""
    out = []
    for path in sorted((home / "campaigns").glob("*/state.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


@dataclass(frozen=True)
class Node:
    """A live runner node as the cluster reports it."""

    id: str
    host: str
    labels: dict
    key: str | None
    trusted: bool


def nodes(trusted: set[str]) -> list[Node]:
    """The live nodes that offer a runner slot (`luma runner join`)."""
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive") or node_labels.SLOT not in (n.get("Resources") or {}):
            continue
        lab = dict(n.get("Labels") or {})
        key = lab.get(node_labels.KEY_LABEL)
        out.append(Node(n["NodeID"], n.get("NodeManagerHostname") or n.get("NodeManagerAddress", "?"), lab, key,
                        key in trusted))
    return out


def eligible(required: dict[str, str], fleet: list[Node]) -> list[Node]:
    """The trusted nodes that carry every label of a machine class."""
    return [n for n in fleet if n.trusted and all(n.labels.get(k) == v for k, v in required.items())]


def trusted_fingerprints(settings) -> set[str]:
    ledger = Ledger(settings.db_url)
    try:
        return {fp for fp, k in trusted_keys(ledger).items() if not k.revoked}
    finally:
        ledger.dispose()


def done_units(settings, campaign: Campaign) -> set[str]:
    """The units whose records the ledger already holds (ingested by this campaign's head)."""
    ledger = Ledger(settings.db_url)
    try:
        rows = ledger.rows_of_kinds(["pex-trial"], "source", submitter=submitter(campaign.id))
    finally:
        ledger.dispose()
    sprints = {Path(source).parent.name for (source,) in rows}
    return {u.key for u in campaign.units if u.sprint_id(campaign.id) in sprints}


class Head:
    """One run of a campaign on a cluster (`run`), with its state file under
    $LUMA_HOME/campaigns/ID/ and the cancel marker `luma campaign cancel` leaves there."""

    def __init__(self, campaign: Campaign, settings, address: str, note: Callable[[str], None] = lambda m: None):
        self.campaign, self.settings, self.address, self.note = campaign, settings, address, note
        self.dir = folder(settings.home, campaign.id)
        self.units: dict[str, dict] = {u.key: {"unit": u.key, "contract": u.contract.name, "dimension": u.dimension,
                                               "machine_class": u.machine_class, "status": "pending"}
                                       for u in campaign.units}
        self.started = time.monotonic()
        self.since = datetime.now(timezone.utc).replace(microsecond=0).isoformat()

    # -- state ------------------------------------------------------------------------------
    def save(self, status: str) -> dict:
        done = [u for u in self.units.values() if u.get("wall_s") is not None and u["status"] == "done"]
        wall = time.monotonic() - self.started
        parts = sum(u["wall_s"] for u in done)
        state = {"id": self.campaign.id, "name": self.campaign.spec.name, "file": self.campaign.source,
                 "cluster": self.address, "host": socket.gethostname(), "pid": os.getpid(), "started": self.since,
                 "updated": datetime.now(timezone.utc).replace(microsecond=0).isoformat(), "status": status,
                 "wall_s": round(wall, 2), "sum_of_units_s": round(parts, 2),
                 "parallelism": round(parts / wall, 2) if wall > 0 and parts else None,
                 "trials": sum(u.get("trials") or 0 for u in done), "trial_budget": self.campaign.spec.trial_budget,
                 "units": list(self.units.values())}
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.dir / "state.json")
        return state

    def cancelled(self) -> bool:
        return (self.dir / "cancel").exists()

    # -- the run ----------------------------------------------------------------------------
    def run(self, poll_s: float = 0.5) -> dict:
        """Run every unit the ledger does not hold yet; the final state (also in state.json)."""
        import fcntl

        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "head.lock", "w") as lock:
            try:  # two heads of one campaign would run its sprints twice
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise ConfigError(f"campaign {self.campaign.id} is already running from this project "
                                  "(`luma campaign status` shows it; `luma campaign cancel` stops it)",
                                  source=self.campaign.source) from None
            return self._run(poll_s)

    def _run(self, poll_s: float) -> dict:
        import ray

        (self.dir / "cancel").unlink(missing_ok=True)  # running the file again is a decision to go on
        trusted = trusted_fingerprints(self.settings)
        for key in done_units(self.settings, self.campaign):
            self.units[key].update(status="done", note="recorded by an earlier run of this campaign")
        connect(self.address)
        task = ray.remote(run_unit)
        pending: dict = {}
        for unit in self.campaign.units:
            if self.units[unit.key]["status"] == "done":
                continue
            required = self.campaign.classes()[unit.machine_class].labels
            if not trusted:
                self.units[unit.key].update(status="unplaced", note="this project trusts no runner key")
                continue
            attempts.clear(self.campaign.id, unit.key)  # an earlier run's notes are not this run's attempts
            selector = {**required, node_labels.KEY_LABEL: f"in({','.join(sorted(trusted))})"}
            ref = task.options(label_selector=selector, resources={node_labels.SLOT: 1}, num_cpus=0,
                               max_retries=MAX_RETRIES, retry_exceptions=False,
                               name=f"luma-unit:{unit.key}").remote(unit.spec(self.campaign.id))
            pending[ref] = unit
            self.units[unit.key]["status"] = "submitted"  # to Ray: waiting for a runner, or running
        self.save("running")
        try:
            return self._wait(pending, trusted, poll_s)
        except (ConnectionError, OSError, ray.exceptions.RayError) as exc:  # the cluster went away under us
            self.save("interrupted")
            raise ConfigError(f"lost the Ray cluster at {self.address}: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''}; what is recorded stays, and "
                              "`luma campaign run` on the same file resumes", source=self.campaign.id) from None

    def _wait(self, pending: dict, trusted: set[str], poll_s: float) -> dict:
        import ray

        waiting_since: dict[str, float] = {}
        last_check = 0.0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=poll_s)
            for ref in ready:
                self._finish(pending.pop(ref), ref)
            now = time.monotonic()
            if self.cancelled():
                for ref, unit in pending.items():
                    ray.cancel(ref, force=True)
                    self.units[unit.key].update(status="cancelled")
                pending.clear()
                return self.save("cancelled")
            if now - last_check > 1.0:
                last_check = now
                self._watch(pending, waiting_since, trusted, now)
            self.save("running")
        status = "completed" if all(u["status"] == "done" for u in self.units.values()) else "incomplete"
        return self.save(status)

    def _watch(self, pending: dict, waiting_since: dict, trusted: set[str], now: float) -> None:
        """Give up the units no live trusted runner of their class has been able to take for
        the campaign's `runner_wait_s`."""
        import ray

        fleet = nodes(trusted)
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for ref, unit in list(pending.items()):
            self._attempts(unit, alive, running=True)
            required = self.campaign.classes()[unit.machine_class].labels
            if eligible(required, fleet):
                waiting_since.pop(unit.key, None)
                continue
            first = waiting_since.setdefault(unit.key, now)
            wait = self.campaign.spec.runner_wait_s
            if now - first > wait:
                ray.cancel(ref, force=True)
                del pending[ref]
                self.units[unit.key].update(status="lost", note=f"no live trusted runner of class "
                                                                 f"{unit.machine_class} for {wait:g} s")
                self.note(f"{unit.key}: lost: {self.units[unit.key]['note']}")

    def _attempts(self, unit: Unit, alive: set[str], running: bool = False, listed: list | None = None) -> None:
        """Note in the unit's entry how many attempts Ray made of it, and why the earlier ones
        ended; while it runs, on which node it is. With `listed` (`ray.nodes()`, as a unit ends:
        its last word) an earlier attempt's node that Ray still lists alive is asked whether it is."""
        seen = attempts.read(self.campaign.id, unit.key)
        if listed is not None and len(seen) > 1:
            alive = attempts.answering(listed, alive, {a["node"] for a in seen[:-1]})
        entry = self.units[unit.key]
        described = attempts.describe(seen, alive)
        entry.update(described)
        if running and seen:
            entry.update(status="running", node=seen[-1]["node"][:12], host=seen[-1].get("host"))
        if attempts.note_text(described):
            entry["note"] = attempts.note_text(described)

    def _finish(self, unit: Unit, ref) -> None:
        import ray

        entry = self.units[unit.key]
        try:
            listed = ray.nodes()
            self._attempts(unit, {n["NodeID"] for n in listed if n.get("Alive")}, listed=listed)
        except Exception:  # noqa: BLE001 - the attempts are a note: a cluster gone now loses only them
            pass
        try:
            out = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            entry.update(status="cancelled")
            return
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
            text = cause.one_line() if isinstance(cause, LumaError) else f"{type(cause).__name__}: {cause}"
            entry.update(status="failed", note=" ".join(text.split())[:300])
            self.note(f"{unit.key}: failed: {entry['note']}")
            return
        except ray.exceptions.RayError as exc:  # the node died more often than Ray retries it
            entry.update(status="lost", note=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            self.note(f"{unit.key}: lost: {entry['note']}")
            return
        t = time.monotonic()
        try:
            records = self._take_in(unit, out)
        except LumaError as exc:
            entry.update(status="refused", note=exc.one_line()[:300], node=out.get("node", "")[:12])
            self.note(f"{unit.key}: records refused: {entry['note']}")
            return
        s = out.get("summary") or {}
        frontier = s.get("frontier") or {}
        entry.update(status="done", node=out["node"][:12], host=out.get("host"), key=(out.get("key") or "")[:12],
                     wall_s=round(float(out["wall_s"]), 2), trials=s.get("physical_trials"),
                     min_pass=s.get("min_pass"), adjacent_fail=s.get("adjacent_fail"), binding=s.get("binding"),
                     recovered=s.get("recovered"),
                     frontier=f"{frontier['before']} -> {frontier['after']}" if frontier.get("before") else None,
                     records=records, ingest_s=round(time.monotonic() - t, 3),
                     chain="chain.json" in (out.get("files") or {}))
        problems = [str(x) for x in s.get("problems") or []]
        if problems:
            # A sprint can end without a chain (a host too contended to qualify, no boundary in the
            # levels given): "done" alone would read as a qualified unit.
            said = ("" if entry["chain"] else "no chain: ") + "; ".join(problems)
            entry["note"] = "; ".join(x for x in (entry.get("note"), said) if x)[:300]
        again = f" ({entry['note']})" if entry.get("retried_after") else ""
        self.note(f"{unit.key}: done on {entry['host']} ({entry['node']}) in {entry['wall_s']:.1f} s{again}")

    def _take_in(self, unit: Unit, out: dict) -> int:
        """Write the unit's record files under sprints/SPRINT_ID/ and ingest them in one batch;
        how many records."""
        files = out.get("files") or {}
        bad = [n for n in files if not _FILE.match(n)]
        if bad or not files:
            raise ConfigError(f"the runner returned unexpected files {bad or 'none'}", source=unit.key)
        target, incoming = sprint_folder(self.settings.home, unit.sprint_id(self.campaign.id))
        shutil.rmtree(incoming, ignore_errors=True)
        incoming.mkdir(parents=True)
        for name, text in files.items():
            (incoming / name).write_text(text)
        shutil.rmtree(target, ignore_errors=True)
        incoming.replace(target)
        records = sorted(p for p in target.glob("*.json") if p.name != "sprint.json")
        with KnowledgeBase.open(self.settings) as kb:
            kb.ingest(records, submitter=submitter(self.campaign.id))
        return len(records)
