"""The closed loop in the rule set (issue 16 item 4): boundaries measured under software that newer
evidence replaced go stale, and stale boundaries never support a requirement; incremental runs
end where a full recomputation ends. Chains and optimize results are written as the projection
writes them (tests/rules/test_scenarios.py's Chain, with its software, contract and ingest time)."""

from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox
import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.named import get_named_query
from luma.kb.vocab import ENTITY_GRAPH, ID, record_graph
from luma.rules.engine import Engine
from luma.settings import Settings
from tests.rules.test_incremental import _derived
from tests.rules.test_scenarios import PREFIXES, RUNNER, Chain, bandwidth_chains, requirements

CONTRACT = f"{ID}contract/c1"
XSD = "http://www.w3.org/2001/XMLSchema#"


@dataclass
class SoftwareChain(Chain):
    software: str = "k1"
    at: str = "2026-01-01T00:00:00Z"

    def trig(self) -> str:
        g = record_graph(self.key)
        return super().trig() + f"""
<{g}> {{ <{g}> prov:generatedAtTime "{self.at}"^^<{XSD}dateTime> .
  <{self.iri}> luma:contract <{CONTRACT}> ; luma:softwareConfig <{ID}software/{self.software}> . }}
<{ENTITY_GRAPH}> {{ <{ID}software/{self.software}> a luma:SoftwareConfig . }}
"""


def optimum(key: str, workload: str, architecture: str, software: str, at: str) -> str:
    g, o = record_graph(key), f"{ID}optimum/{key}"
    return f"""
<{g}> {{
  <{g}> a luma:SourceRecord ; luma:recordKind "optimize-result" ; luma:evidenceClass luma:Measured ;
      luma:attestedBy <{RUNNER}> ; prov:generatedAtTime "{at}"^^<{XSD}dateTime> .
  <{o}> a luma:OptimizeResult ; luma:evidenceClass luma:Measured ; luma:workload <{ID}workload/{workload}> ;
      luma:architecture <{ID}architecture/{architecture}> ; luma:contract <{CONTRACT}> ;
      luma:machineState <{ID}state/s1> ; luma:softwareConfig <{ID}software/{software}> .
}}
<{ENTITY_GRAPH}> {{ <{ID}software/{software}> a luma:SoftwareConfig . }}
"""


def _load(kb, trig: str) -> None:
    data = (PREFIXES + trig).encode()
    kb.store.load_nquads(ox.serialize(ox.parse(data, format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))


def _stale(kb) -> list[dict]:
    return kb.store.select(get_named_query("stale-boundaries").sparql)


@pytest.mark.slow
def test_an_optimum_that_changes_the_software_makes_boundaries_stale_and_they_stop_supporting(luma_home):
    chains = [SoftwareChain(**{k: getattr(c, k) for k in ("key", "workload", "task", "architecture", "level",
                                                          "intervention")}) for c in bandwidth_chains()]
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        _load(kb, "".join(c.trig() for c in chains))
        Engine(kb).run()
        assert set(requirements(kb)) == {"memory_bandwidth"} and _stale(kb) == []

        # The optima of w0 and w2 on arch0 moved to k2 (their boundaries were measured under k1):
        # two stale boundaries leave 2 workloads on one architecture, no recurrence.
        _load(kb, optimum("opt0", "w0", "arch0", "k2", "2026-02-01T00:00:00Z")
              + optimum("opt2", "w2", "arch0", "k2", "2026-02-01T00:00:00Z"))
        inc = Engine(kb).run()
        modes = {r.rule: r.mode for r in inc.runs}
        assert modes["qualified-optimum"] == "delta" and modes["stale-boundary"] == "partition"
        rows = _stale(kb)
        assert sorted(r["boundary"].rsplit("/", 2)[-2] for r in rows) == ["bw0", "bw2"]
        assert {r["reason"] for r in rows} == {"optimum-changed"}
        assert requirements(kb) == {}
        after = _derived(kb)
        full = Engine(kb).run(full=True)
        assert (full.new, full.removed) == (0, 0) and _derived(kb) == after

        # Re-qualified (a newer chain crossing the same dimension of the same workload, architecture
        # and contract): they leave the list; the old measurements stay stale (and support
        # nothing), the new ones support the requirement again.
        _load(kb, "".join(SoftwareChain(f"re{n}", f"w{n}", "chat", "arch0", level=2e11, intervention=f"fix-{n}",
                                        at="2026-03-01T00:00:00Z").trig() for n in (0, 2)))
        Engine(kb).run()
        assert _stale(kb) == []
        assert set(requirements(kb)) == {"memory_bandwidth"}
        marks = kb.store.select("PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?q ?r WHERE "
                                "{ ?s luma:staleBoundary ?q ; luma:requalifiedBy ?r }")
        assert sorted(m["q"].rsplit("/", 2)[-2] for m in marks) == ["bw0", "bw2"]


@pytest.mark.slow
def test_a_newer_chain_under_other_software_makes_the_older_one_stale(luma_home):
    old = SoftwareChain("old", "w0", "chat", "arch0", software="k1", at="2026-01-01T00:00:00Z")
    other = SoftwareChain("new", "w0", "chat", "arch0", software="k2", at="2026-02-01T00:00:00Z",
                          binding="compute", unit="http://qudt.org/vocab/unit/FLOP-PER-SEC")
    with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
        _load(kb, old.trig() + other.trig())
        Engine(kb).run()
        rows = _stale(kb)
    assert [(r["boundary"], r["reason"], r["newer"]) for r in rows] == \
        [(old.qualified, "newer-chain-other-software", other.qualified)]
