"""The Design-In Report says how far its measured evidence reaches: built from the shipped evidence
set alone (one architecture today), it states that no hardware requirement can follow from it."""

from __future__ import annotations

from luma.experiments.evidence import manifest, shipped
from luma.kb.knowledge_base import KnowledgeBase
from luma.reports import design_in
from luma.reports.design_in_reach import limitation
from luma.rules.engine import Engine
from luma.settings import Settings


def test_the_report_from_the_shipped_set_alone_states_how_far_it_reaches(luma_home):
    s = Settings.from_env(home=luma_home)
    shipped.load(s)
    with KnowledgeBase.open(s) as kb:
        Engine(kb).run()
        rep = design_in.build(kb)
    machines = manifest.read(shipped.default_root())["machines"]
    section = next(sec for sec in rep.sections if sec.id == "measured-on")
    runners = {str(row[1]) for t in section.blocks for row in t.rows}
    assert runners <= {m["id"] for m in machines} and runners
    if len({m["cpu_model"] for m in machines}) == 1:
        assert "All measured, qualified boundaries come from 1 architecture" in rep.callout
        assert "cannot say which hardware to ask for elsewhere" in rep.callout
        assert any("cannot say which hardware" in p for p in section.paragraphs)


def test_the_limitation_is_said_below_the_threshold_only():
    one = [{"architecture": "https://w3id.org/luma/id/architecture/x", "label": "AMD EPYC"}]
    assert "1 architecture (AMD EPYC)" in limitation(one, 2)
    two = one + [{"architecture": "https://w3id.org/luma/id/architecture/y", "label": "Xeon"}]
    assert limitation(two, 2) is None
    assert "No measured, qualified boundary" in limitation([], 2)
