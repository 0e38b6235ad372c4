"""Projection of a PEX chain's outcomes (issue 16): the diagnosis table, co-binding resources,
frontier shift, next binding and deployment decision, as facts on the chain node in its record
graph (names fixed by the issue's contract; kb/ingest/projection.py calls `project_outcomes`).

    ?c luma:coBinding true ; luma:coBindingResource ?dim .            (co_binding non-empty)
    ?c luma:restoration ?r . ?r a luma:Restoration ; luma:restoredDimension ?dim ;
       luma:restorationVerdict luma:Pass|Fail|Inconclusive|NotTested ; luma:reason "..." ;
       luma:restoredLevel ?level ; luma:trial ?t .                     (its trials, state "diagnosis")
    ?c luma:frontierShift ?f . ?f a luma:FrontierShift ; luma:shiftDimension ?dim ;
       luma:levelBefore/After ?x (canonical unit) | luma:categoryBefore/After "..." ;
       luma:shiftUnit ?unit ; luma:absoluteChange ?d ; luma:relativeChange ?r ; luma:belowRange ? ;
       luma:softwareConfig ?sc2 .                                      (the intervention's software)
    ?c luma:nextBindingResource ?dim | luma:nextBindingNone true ; luma:nextCoBindingResource ?dim ;
       luma:nextBindingNote "..." ; luma:nextRestoration ?r .
    ?c luma:deploymentDecision ?d . ?d a luma:DeploymentDecision ; luma:softwareConfig ?sc ;
       luma:minimumState ?state .
"""

from __future__ import annotations

from luma.kb.ingest import nquads as nq
from luma.kb.ingest import projection_nodes as nodes
from luma.kb.records import units
from luma.kb.vocab import LUMA

TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RESTORATION_VERDICTS = {"PASS": "Pass", "FAIL": "Fail", "INCONCLUSIVE": "Inconclusive", "not-tested": "NotTested"}


def project_outcomes(w: nq.QuadWriter, c: str, rec, dims) -> None:
    """The outcome facts of chain `rec` on its node `c` (nothing for a chain without them)."""
    L = LUMA
    if rec.co_binding:
        w.add(c, L + "coBinding", nq.boolean(True))
        for key in rec.co_binding:
            w.add(c, L + "coBindingResource", nq.iri(dims[key].iri))
    for i, r in enumerate(rec.diagnosis or []):
        _restoration(w, c, f"{c}/restoration/{i}", "restoration", r, dims)
    f = rec.frontier_shift
    if f is not None:
        node, dim = f"{c}/frontier-shift", dims[f.dimension]
        w.add(c, L + "frontierShift", nq.iri(node))
        w.add(node, TYPE, nq.iri(L + "FrontierShift"))
        w.add(node, L + "shiftDimension", nq.iri(dim.iri))
        for side, level in (("Before", f.before), ("After", f.after)):
            if dim.categorical:
                w.add(node, L + "category" + side, nq.string(str(level.value)))
            else:
                value, canonical = units.normalise(float(level.value), level.unit)
                w.add(node, L + "level" + side, nq.double(value))
                if side == "Before":
                    w.add(node, L + "shiftUnit", nq.iri(units.unit_iri(canonical)))
        for prop, value in (("absoluteChange", f.absolute_change), ("relativeChange", f.relative_change)):
            if value is not None:
                w.add(node, L + prop, nq.double(float(value)))
        w.add(node, L + "belowRange", nq.boolean(f.below_range))
        if rec.intervention.software is not None:
            w.add(node, L + "softwareConfig", nq.iri(nodes.software_config(w, rec.intervention.software)))
    n = rec.next_binding
    if n is not None:
        if n.resource is None:
            w.add(c, L + "nextBindingNone", nq.boolean(True))
        else:
            w.add(c, L + "nextBindingResource", nq.iri(dims[n.resource].iri))
        for key in n.co_binding:
            w.add(c, L + "nextCoBindingResource", nq.iri(dims[key].iri))
        if n.note:
            w.add(c, L + "nextBindingNote", nq.string(n.note))
        for i, r in enumerate(n.diagnosis):
            _restoration(w, c, f"{c}/next-restoration/{i}", "nextRestoration", r, dims)
    for i, d in enumerate(rec.decision or []):
        node = f"{c}/decision/{i}"
        w.add(c, L + "deploymentDecision", nq.iri(node))
        w.add(node, TYPE, nq.iri(L + "DeploymentDecision"))
        w.add(node, L + "softwareConfig", nq.iri(nodes.software_config(w, d.software)))
        w.add(node, L + "minimumState", nq.iri(nodes.state_node(w, d.state, dims)[0]))


def _restoration(w: nq.QuadWriter, c: str, node: str, link: str, r, dims) -> None:
    L = LUMA
    w.add(c, L + link, nq.iri(node))
    w.add(node, TYPE, nq.iri(L + "Restoration"))
    w.add(node, L + "restoredDimension", nq.iri(dims[r.dimension].iri))
    w.add(node, L + "restorationVerdict", nq.iri(L + RESTORATION_VERDICTS[r.verdict]))
    if r.reason:
        w.add(node, L + "reason", nq.string(r.reason))
    if r.restored_level is not None:
        w.add(node, L + "restoredLevel", nq.iri(nodes.level_node(w, dims[r.dimension], r.restored_level)))
    for j, trial in enumerate(r.trials):
        nodes.project_trial(w, node, f"{node}/trial/{j}", trial)
