"""One campaign unit on a runner node: the sprint runs here, under this machine's physical
limits, and its records are signed here with this node's runner key (its LUMA_HOME, set when
`luma runner join` started the node). Nothing is ingested on the node: the signed files go back
to the head, which verifies and ingests them all at once or not at all.
"""

from __future__ import annotations

import socket
import time

from luma.experiments.fleet import attempts
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint import pex as sprint
from luma.experiments.sprint.run import run_sprint
from luma.kb.operations.runner_keys import project_signer
from luma.privacy import private_umask
from luma.settings import Settings


def run_unit(spec: dict) -> dict:
    """Run the unit `spec` (`campaign.Unit.spec`); its record files (name -> JSON text), the
    sprint's summary, and who ran it. Raises what the sprint raises (the head reports it)."""
    import ray  # the fleet extra: loaded on the node only

    settings = Settings.from_env()
    private_umask()  # the sprint's folder and records on this node are private (luma/privacy.py)
    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    labels = dict(next((n.get("Labels") or {} for n in ray.nodes() if n["NodeID"] == node_id), {}))
    labels = {k: v for k, v in labels.items() if not k.startswith("ray.io/")}
    attempts.note(spec["campaign"], spec["unit"], node_id, socket.gethostname())
    signer = project_signer(settings, create=False)
    c = contracts.Contract.model_validate(spec["contract"])
    plan = sprint.plan(c, spec["dimension"], spec["levels"], spec["intervention"], spec["repetitions"])
    fleet = {"campaign": spec["campaign"], "machine_class": spec["machine_class"], "node": node_id, "labels": labels}
    started = time.monotonic()
    # Nothing is ingested here (record=False); `fresh`: a head that died (or a node that was
    # killed) may have left an earlier attempt's files in the sprint's folder.
    run = run_sprint(plan, settings, record=False, sprint_id=spec["sprint_id"], fleet=fleet, fresh=True)
    out = run.summary
    files = {p.name: p.read_text() for p in sorted(run.folder.glob("*.json"))}
    return {"unit": spec["unit"], "files": files, "node": node_id, "host": socket.gethostname(),
            "key": signer.fingerprint if signer else None, "wall_s": time.monotonic() - started,
            "summary": {k: out.get(k) for k in ("min_pass", "adjacent_fail", "binding", "recovered",
                                                "requalified_min_pass", "frontier", "physical_trials", "problems")}}
