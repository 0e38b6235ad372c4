"""A derivation tree from `luma.rules.explain` made compact enough to print in a report: each
derived node with its rule, version and parameters and how many supports it has, a few supports
followed down to the chains and their records, and the hashes of the first records behind it."""

from __future__ import annotations

import re

from luma.kb.vocab import LUMA
from luma.reports.fmt import local
from luma.reports.md_escape import fmt, own
from luma.rules.explain import explain, records

#: Supports followed per node (the rest are counted), and record hashes named at the root.
MAX_SUPPORTS = 2
MAX_HASHES = 5
_PREFERRED = ("HardwareRequirement", "RecurringBinding", "RecurringRemedy", "CounterEvidence", "BindingGroup",
              "QualifiedBoundary", "UnqualifiedChain", "BoundaryQualification", "SourceRecord")
_SOURCE = LUMA + "SourceRecord"


def _kind(types: list[str]) -> str:
    names = [local(t) for t in types]
    return next((p for p in _PREFERRED if p in names), names[0] if names else "node")


_HEX = re.compile(r"[0-9a-f]{32}")


def _short(iri: str) -> str:
    """`id:chain/5f46cbfefb…/qualified`: long hashes cut to 10 digits (the root keeps its full IRI)."""
    return _HEX.sub(lambda m: m.group(0)[:10] + "…", local(iri))


def _record_text(rec: dict) -> str:
    return fmt("record `{}…` ({}, {}, ingested {} by {})", (rec.get('content_hash') or '?')[:16],
               rec.get('record_kind', '?'), rec.get('evidence_class', '?'), rec.get('ingested_at', '?'),
               rec.get('submitter', '?'))


def _node(n: dict, depth: int = 0) -> dict:
    if n.get("see_above"):
        return {"text": f"`{_short(n['iri'])}` (shown above)", "children": []}
    kind = _kind(n.get("types", []))
    if kind == "SourceRecord" and n.get("record"):
        return {"text": _record_text(n["record"]), "children": []}
    text = f"{kind} `{local(n['iri']) if depth == 0 else _short(n['iri'])}`"
    if n.get("evidence_class"):
        text += f" ({n['evidence_class']})"
    run = n.get("derived_by")
    if run:
        # Parameters at the top two levels only: the nodes below repeat their rule's defaults.
        params = ", ".join(run.get("parameters") or []) if depth < 2 else ""
        text += f" — rule `{run.get('rule')}` v{run.get('version')}" + (f" ({params})" if params else "")
    supports = n.get("supports", [])
    chain = supports[0] if len(supports) == 1 else None
    if kind in ("QualifiedBoundary", "UnqualifiedChain") and chain and chain.get("record"):
        # Boundary, chain and record are one step of evidence: one line.
        return {"text": fmt("{} ← chain ({}) ← {}", own(text), chain.get('evidence_class', '?'),
                            _record_text(chain['record'])),
                "children": []}
    total = n.get("supports_total", 0)
    if total:
        text += f"; {total} support{'s' if total != 1 else ''}"
    children = [_node(c, depth + 1) for c in supports]
    shown = sum(1 for c in supports if c.get("types") != [_SOURCE])
    if n.get("record"):
        children.insert(0, {"text": _record_text(n["record"]), "children": []})
    if total > shown:
        children.append({"text": f"… and {total - shown} more", "children": []})
    return {"text": text, "children": children}


def compact(kb, iri: str, max_supports: int = MAX_SUPPORTS, max_hashes: int = MAX_HASHES) -> tuple[dict, dict]:
    """(tree for `render.Tree`, summary {rule, version, parameters, records, first_hashes})."""
    tree = explain(kb, iri, max_depth=8, max_supports=max_supports)
    hashes = records(tree)
    root = _node(tree)
    named = ", ".join(f"`{h[:12]}`" for h in hashes[:max_hashes])
    more = f" … ({len(hashes) - max_hashes} more)" if len(hashes) > max_hashes else ""
    root["children"].append({"text": f"{len(hashes)} supporting record(s): {named}{more}", "children": []})
    run = tree.get("derived_by") or {}
    return root, {"rule": run.get("rule"), "version": run.get("version"), "parameters": run.get("parameters") or [],
                  "records": len(hashes), "first_hashes": hashes[:max_hashes]}
