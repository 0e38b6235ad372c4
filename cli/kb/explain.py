"""`luma kb explain`: the derivation tree of a node down to the ingested records, as a text tree."""

from __future__ import annotations

import json

import click

from luma.cli.kb.access import maybe_exploratory, open_for_reading
from luma.cli.output import format_option
from luma.cli.project import READ, project
from luma.cli.terms import compact, display
from luma.rules.explain import explain as explain_tree, records


@click.command()
@click.argument("iri")
@click.option("--depth", type=click.IntRange(min=0), default=20, show_default=True,
              help="Levels of prov:wasDerivedFrom to follow.")
@click.option("--max-supports", type=click.IntRange(min=1), default=50, show_default=True,
              help="Supports listed per node (all supporting records are still named).")
@click.option("--exploratory", is_flag=True,
              help="Explain from the last `luma rules run --exploratory` (its copy of the KB), not the KB.")
@format_option(choices=("table", "json"))
@project(READ)
def explain(iri: str, depth: int, max_supports: int, exploratory: bool, fmt: str) -> None:
    """The derivation tree of IRI (full or prefixed, e.g. id:chain/…) down to the ingested records.

    Derived nodes show the rule, version and parameters of the run that derived them; leaves show
    the record (content hash, kind, evidence class). Every supporting record is named at the end.
    """
    with open_for_reading() as base, maybe_exploratory(base, exploratory) as view:
        tree = explain_tree(view, iri, max_depth=depth, max_supports=max_supports)
    hashes = records(tree)
    if fmt == "json":
        click.echo(json.dumps({**tree, "records": hashes}, indent=2))
        return
    for line in _tree_lines(tree):
        click.echo(line)
    click.echo(f"{len(hashes)} supporting record(s): {', '.join(hashes) if hashes else '-'}")


def _node_text(node: dict) -> str:
    if node.get("see_above"):
        return f"{display(node['iri'])} (see above)"
    parts = [display(node["iri"])]
    if node.get("types"):
        parts.append("[" + ", ".join(compact(t) for t in node["types"]) + "]")
    if node.get("label"):
        parts.append(repr(node["label"]))
    run = node.get("derived_by")
    if run:
        params = f" ({', '.join(run['parameters'])})" if run["parameters"] else ""
        exploratory = " [EXPLORATORY: below the rules' floors]" if run.get("exploratory") else ""
        parts.append(f"<- rule {run['rule']} v{run['version']}{params}{exploratory}")
    elif node.get("evidence_class"):
        parts.append(f"evidence: {node['evidence_class']}")
    return " ".join(parts)


def _record_text(rec: dict) -> str:
    who = f", by {rec['submitter']}" if rec.get("submitter") else ""
    when = f", ingested {rec['ingested_at']}" if rec.get("ingested_at") else ""
    return f"record {rec['content_hash']} ({rec['record_kind']}, {rec['evidence_class']}{when}{who})"


def _tree_lines(node: dict, prefix: str = "", last: bool = True, root: bool = True) -> list[str]:
    """An indented text tree: one line per node, its record as a child line."""
    branch = "" if root else ("└── " if last else "├── ")
    lines = [prefix + branch + _node_text(node)]
    inner = prefix + ("" if root else ("    " if last else "│   "))
    children: list = []
    if node.get("record"):
        children.append(("record", node["record"]))
    children += [("node", s) for s in node.get("supports", [])]
    shown = sum(1 for s in node.get("supports", []) if (s.get("record") or {}).get("graph") != s["iri"])
    more = node.get("supports_total", 0) - shown
    if node.get("truncated"):
        children.append(("text", f"… {node['supports_total']} support(s) below --depth"))
    elif more > 0:
        children.append(("text", f"… {more} more support(s) not listed (--max-supports)"))
    for i, (kind, child) in enumerate(children):
        end = i == len(children) - 1
        if kind == "node":
            lines += _tree_lines(child, inner, end, root=False)
        else:
            lines.append(inner + ("└── " if end else "├── ") + (_record_text(child) if kind == "record" else child))
    return lines
