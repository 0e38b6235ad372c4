"""The recurrence rules of issue 16 end to end: real, signed PEX-chain records through ingest,
projection and the whole shipped rule set.

(a) memory bandwidth binds before compute on 3 workloads x 2 architectures, and a single contrary
    chain (compute, then memory bandwidth) appears as counter-evidence;
(b) the KV cache limits concurrency under contracts held at 8 and 16 concurrent requests;
(c) a software remedy recovers HBM capacity in 5 of 6 chains and so removes the tier's
    requirement, and its one failed attempt is counted against it.
"""

from __future__ import annotations

import json
import random
import pytest

from luma.kb.operations import runner_keys
from luma.kb.trust import runners
from luma.kb.records import synthetic
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import LUMA
from luma.rules.engine import Engine
from luma.settings import Settings

DIM = "https://w3id.org/luma/dim/"
UNITS = {"memory_bandwidth": "GB/s", "compute": "core", "kv_cache": "block", "hbm_capacity": "GB"}


def chain(workload: int, arch: int, crossed: str, levels: dict[str, float], *, next_binding: str | None = None,
          intervention: str = "int8-weights", kind: str = "software", recovered: bool = True,
          concurrency: int | None = None) -> dict:
    """A measured chain: `crossed` halved from its level in `levels` between PASS and FAIL; with
    `next_binding`, the re-qualified boundary (the frontier at the FAIL level, a FAIL below it)
    and the resource that bound there."""
    pass_dims = {d: {"value": v, "unit": UNITS[d]} for d, v in levels.items()}
    fail_dims = {**pass_dims, crossed: {"value": levels[crossed] / 2, "unit": UNITS[crossed]}}
    contract = {"name": "chat-p99", "clauses": [{"metric": "p99_latency", "op": "<=", "value": 200, "unit": "ms"}]}
    if concurrency is not None:
        contract["concurrency"] = concurrency
    rec = {"record_type": "pex-chain", "evidence_class": "measured",
           "workload": {"name": f"chat-{workload}", "model": f"model-{workload}", "task": "chat"},
           "architecture": {"name": f"GPU {arch}", "kind": "gpu", "vendor": "ACME"},
           "contract": contract, "pass_state": {"dimensions": pass_dims}, "fail_state": {"dimensions": fail_dims},
           "crossed_dimension": crossed, "binding_resource": crossed,
           "intervention": {"name": intervention, "kind": kind}, "recovered": recovered, "repetitions": 3}
    if next_binding is not None:
        rec["frontier_shift"] = {"dimension": crossed, "before": pass_dims[crossed], "after": fail_dims[crossed],
                                 "trials": [{"state": "below", "repetition": 1, "verdict": "FAIL",
                                             "failure_cause": "timeout"}]}
        rec["next_binding"] = {"resource": next_binding}
    return rec


def derive(home, tmp_path, records: list[dict]):
    """Sign and ingest the records, run the rules; the open KB (read-only)."""
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        key = runner_keys.keygen(kb, "lab-one")
    signer = runners.signer(home, key.name)
    rnd = random.Random(5)
    lines = []
    for rec in records:
        rec["trials"] = synthetic.trials(rnd, rec["contract"], rec["repetitions"], rec["recovered"])
        lines.append(json.dumps(signer.sign(rec)) + "\n")
    path = tmp_path / "chains.jsonl"
    path.write_text("".join(lines))
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        kb.ingest([path], submitter="tester")
        Engine(kb).run()
    return KnowledgeBase.open(Settings.from_env(home=home), read_only=True)


def select(kb, sparql: str) -> list[dict[str, str]]:
    return kb.store.select(f"PREFIX luma: <{LUMA}>\nPREFIX prov: <http://www.w3.org/ns/prov#>\n{sparql}")


@pytest.mark.slow
def test_bandwidth_binds_before_compute_with_one_contrary_chain(luma_home, tmp_path):
    levels = {"memory_bandwidth": 400, "compute": 8}
    records = [chain(w, a, "memory_bandwidth", levels, next_binding="compute", intervention=f"fix-{w}")
               for w in range(3) for a in range(2)]
    # The contrary chain: compute binds first, memory bandwidth next (workload 0, architecture 0).
    records.append(chain(0, 0, "compute", levels, next_binding="memory_bandwidth", intervention="batching"))
    with derive(luma_home, tmp_path, records) as kb:
        rows = select(kb, "SELECT ?bb ?first ?next ?w ?a ?k ?n WHERE { ?bb a luma:BindsBefore ; "
                          "luma:firstResource ?first ; luma:nextResource ?next ; luma:supportWorkloads ?w ; "
                          "luma:supportArchitectures ?a ; luma:supportChains ?k ; luma:counterChains ?n }")
        assert [(r["first"], r["next"], int(r["w"]), int(r["a"]), int(r["k"]), int(r["n"])) for r in rows] == [
            (DIM + "memory_bandwidth", DIM + "compute", 3, 2, 6, 1)]
        # The counter-chain is the contrary chain's qualified boundary, and it is no support.
        counter = select(kb, "SELECT ?cq ?crossed WHERE { ?bb a luma:BindsBefore ; luma:counterChain ?cq . "
                             "?cq luma:crossedDimension ?crossed }")
        assert [r["crossed"] for r in counter] == [DIM + "compute"]
        support = select(kb, "SELECT ?q ?crossed WHERE { ?bb a luma:BindsBefore ; prov:wasDerivedFrom ?q . "
                             "?q luma:crossedDimension ?crossed }")
        assert len(support) == 6 and {r["crossed"] for r in support} == {DIM + "memory_bandwidth"}


@pytest.mark.slow
def test_kv_cache_limits_concurrency(luma_home, tmp_path):
    records = [chain(w, a, "kv_cache", {"kv_cache": 512 * (1 + a) * (w + 1), "compute": 8},
                     intervention="kv-cache-compression", kind="partner", concurrency=8 * (1 + a))
               for w in range(3) for a in range(2)]
    records.append(chain(0, 0, "compute", {"kv_cache": 4096, "compute": 8}, concurrency=8))  # compute bound
    records.append(chain(4, 1, "kv_cache", {"kv_cache": 512, "compute": 8}))  # no concurrency in the contract
    with derive(luma_home, tmp_path, records) as kb:
        rows = select(kb, "SELECT ?w ?a ?k ?min ?max ?n WHERE { ?kl a luma:KvConcurrencyLimit ; "
                          "luma:supportWorkloads ?w ; luma:supportArchitectures ?a ; luma:supportChains ?k ; "
                          "luma:concurrencyMin ?min ; luma:concurrencyMax ?max ; luma:counterChains ?n }")
        assert [tuple(int(r[k]) for k in ("w", "a", "k", "min", "max", "n")) for r in rows] == [(3, 2, 6, 8, 16, 1)]
        points = select(kb, "SELECT ?c ?min ?max WHERE { ?kl luma:concurrencyPoint ?p . ?p luma:atConcurrency ?c ; "
                            "luma:boundaryMin ?min ; luma:boundaryMax ?max } ORDER BY ?c")
        assert [(int(p["c"]), float(p["min"]), float(p["max"])) for p in points] == [(8, 512, 1536), (16, 1024, 3072)]


def test_a_software_remedy_removes_the_hbm_tier_requirement(luma_home, tmp_path):
    levels = {"hbm_capacity": 80, "compute": 8}
    records = [chain(w, a, "hbm_capacity", levels, intervention="int8-weights" if (w, a) != (2, 1) else "fix-x")
               for w in range(3) for a in range(2)]
    records.append(chain(3, 0, "hbm_capacity", levels, recovered=False))  # int8 tried and failed
    with derive(luma_home, tmp_path, records) as kb:
        rows = select(kb, "SELECT ?tier ?k ?bk ?n WHERE { ?tr a luma:TierRemedy ; luma:tier ?tier ; "
                          "luma:remediedChains ?k ; luma:bindingChains ?bk ; luma:counterChains ?n }")
        by_tier = {r["tier"]: (int(r["k"]), int(r["bk"]), int(r["n"])) for r in rows}
        assert by_tier == {DIM + "hbm_capacity": (5, 6, 1)}
        # ... and so the tier is no hardware requirement.
        assert select(kb, "SELECT ?hr WHERE { ?hr a luma:HardwareRequirement }") == []
