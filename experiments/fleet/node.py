"""One campaign unit on a runner node: the sprint runs here, under this machine's physical
limits, and its records are signed here with this node's runner key (its LUMA_HOME, set when
`luma runner join` started the node). Nothing is ingested on the node: the signed files go back
to the head, which verifies and ingests them all at once or not at all.
"""

from __future__ import annotations

import shutil
import socket
import time

from luma.privacy import private_umask


def run_unit(spec: dict) -> dict:
    """Run the unit `spec` (`campaign.Unit.spec`); its record files (name -> JSON text), the
    sprint's summary, and who ran it. Raises what the sprint raises (the head reports it)."""
    import ray

    from luma.experiments import contract as contracts, sprint, summary
    from luma.experiments.records import Recorder
    from luma.kb.operations.runner_keys import project_signer
    from luma.settings import Settings

    settings = Settings.from_env()
    private_umask()  # the sprint's folder and records on this node are private (luma/privacy.py)
    ctx = ray.get_runtime_context()
    node_id = ctx.get_node_id()
    labels = dict(next((n.get("Labels") or {} for n in ray.nodes() if n["NodeID"] == node_id), {}))
    labels = {k: v for k, v in labels.items() if not k.startswith("ray.io/")}
    signer = project_signer(settings, create=False)
    c = contracts.Contract.model_validate(spec["contract"])
    plan = sprint.plan(c, spec["dimension"], spec["levels"], spec["intervention"], spec["repetitions"])
    fleet = {"campaign": spec["campaign"], "machine_class": spec["machine_class"], "node": node_id, "labels": labels}
    recorder = Recorder(settings, plan, spec["sprint_id"], ingest=False, fleet=fleet)
    # A head that died (or a node that was killed) may have left an earlier attempt's files here.
    shutil.rmtree(recorder.folder, ignore_errors=True)
    started = time.monotonic()
    result = sprint.Sprint(plan, settings.home / "artifacts", recorder.trial, None, spec["sprint_id"]).run()
    out = summary.summarize(result)
    recorder.finish(result, out)
    files = {p.name: p.read_text() for p in sorted(recorder.folder.glob("*.json"))}
    return {"unit": spec["unit"], "files": files, "node": node_id, "host": socket.gethostname(),
            "key": signer.fingerprint if signer else None, "wall_s": time.monotonic() - started,
            "summary": {k: out.get(k) for k in ("min_pass", "adjacent_fail", "binding", "recovered",
                                                "requalified_min_pass", "frontier", "physical_trials", "problems")}}
