"""Golden tests: for every rule, input facts -> exactly the expected derived facts (a missing fact
and an extra fact both fail). Each rule runs alone on its `golden/<rule id>/input.trig`; its
derived graph, with the derivation's IRI written as <urn:activity>, must equal `expected.nt`."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.rules.engine import Engine, activity_of, graph_of
from luma.rules.loader import load_all
from luma.settings import Settings

GOLDEN = Path(__file__).parent / "golden"
RULES = {r.id: r for r in load_all()}


def derive(rule_id: str, home: Path, overrides: dict | None = None) -> list[str]:
    """The rule's derived facts on its golden input, as sorted N-Triples lines."""
    rule = RULES[rule_id]
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        data = (GOLDEN / rule_id / "input.trig").read_bytes()
        kb.store.load_nquads(ox.serialize(ox.parse(data, format=ox.RdfFormat.TRIG), format=ox.RdfFormat.N_QUADS))
        Engine(kb, [rule]).run(overrides)
        values = {p.name: p.default for p in rule.params.values()}
        for key, value in (overrides or {}).items():
            values[key] = type(values[key])(value)
        act = activity_of(rule, values)
        out = kb.store.query(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph_of(rule_id)}> {{ ?s ?p ?o "
                             f"FILTER(?s != <{act}>) }} }}", union=False).body.decode()
    return sorted(line.replace(f"<{act}>", "<urn:activity>") for line in out.splitlines() if line.strip())


def test_every_rule_has_a_golden_test():
    assert sorted(RULES) == sorted(p.name for p in GOLDEN.iterdir() if (p / "input.trig").exists())


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_derives_exactly_the_expected_facts(rule_id, luma_home):
    expected = sorted(line for line in (GOLDEN / rule_id / "expected.nt").read_text().splitlines()
                      if line.strip() and not line.startswith("#"))
    got = derive(rule_id, luma_home)
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    assert (missing, extra) == ([], []), f"missing: {missing}\nextra: {extra}"
