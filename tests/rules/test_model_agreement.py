"""The named query model-vs-pex over what the rule model-agreement derives from its golden input:
counts per contract and resource, a prediction recorded twice counted once, false PASS and false
FAIL apart."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import get_named_query
from luma.rules.engine import Engine
from luma.rules.loader import load_all
from luma.settings import Settings

GOLDEN = Path(__file__).parent / "golden" / "model-agreement" / "input.trig"
# What the golden input leaves out and the query reads: keys, classes, resources, the contract's
# name; and prediction 7, the same as prediction 1 recorded again (the same key).
EXTRA = """
@prefix luma: <https://w3id.org/luma/ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix g: <https://w3id.org/luma/id/graph/record/> .
@prefix x: <https://w3id.org/luma/id/> .
@prefix p: <https://w3id.org/luma/id/model-run/m/prediction/> .
g:m { p:1 luma:predictionKey "k1" . p:2 luma:predictionKey "k2" . p:5 luma:predictionKey "k5" .
      p:6 luma:predictionKey "k6" . p:3 luma:predictionKey "k3" . p:4 luma:predictionKey "k4" .
      p:7 a luma:ModelPrediction ; luma:contract x:k ; luma:predictedState x:s1 ; luma:predictedVerdict luma:Fail ;
          luma:atContractLoad true ; luma:predictsBaseline true ; luma:predictedVariant "fp32" ; luma:predictionKey "k1" .
      p:1 luma:predictedResource "host_memory" . p:2 luma:predictedResource "host_memory" .
      p:5 luma:predictedResource "host_memory" . p:6 luma:predictedResource "compute" . p:7 luma:predictedResource "host_memory" .
      p:1 luma:evidenceClass luma:Simulated . p:2 luma:evidenceClass luma:Simulated . p:5 luma:evidenceClass luma:Simulated .
      p:6 luma:evidenceClass luma:Simulated . p:7 luma:evidenceClass luma:Simulated . }
g:entities { x:k rdfs:label "matvec-memory" . }
"""


def test_model_vs_pex_counts_each_prediction_once(luma_home):
    rule = next(r for r in load_all() if r.id == "model-agreement")
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        for data in (GOLDEN.read_bytes(), EXTRA.encode()):
            kb.store.load_nquads(ox.serialize(ox.parse(data, format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))
        Engine(kb, [rule]).run()
        rows = kb.store.select(get_named_query("model-vs-pex").sparql)
    got = {(r["contract"], r["resource"], r["evidence"]): (int(r["measured"]), int(r["matched"]), float(r["agreement"]),
                                                           int(r["falsePass"]), int(r["falseFail"])) for r in rows}
    assert got == {
        # p1 (= p7, one key): FAIL/FAIL; p2: PASS predicted, FAIL measured; p5: PASS/PASS.
        ("matvec-memory", "host_memory", "Simulated"): (3, 2, 2 / 3, 1, 0),
        # p6: UNKNOWN predicted, PASS measured: no match, and neither a false PASS nor a false FAIL.
        ("matvec-memory", "compute", "Simulated"): (1, 0, 0.0, 0, 0),
    }
