"""How far the Design-In Report's measured evidence reaches: the machines (architecture and runner
key) its qualified boundaries were measured on, the workloads on each, and -- when they all come
from one architecture -- what that means: rules turn recurrences across workloads *and*
architectures into hardware requirements, so one machine's evidence, however sound, cannot
state one (the shipped evidence set, `luma evidence load`, is such a case until another machine
type records it)."""

from __future__ import annotations

from luma.reports.design_in_data import QB, RUNNER_NAME, Reader
from luma.reports.fmt import local
from luma.reports.md_escape import fmt, record
from luma.reports.render import Section, Table
from luma.rules.derivations import derivation


def machines(r: Reader) -> list[dict]:
    """Per architecture and runner key: qualified boundaries, distinct workloads (and their names)."""
    return r.select(f"""SELECT ?architecture ?name (COUNT(DISTINCT ?q) AS ?boundaries) (COUNT(DISTINCT ?w) AS ?workloads)
        (GROUP_CONCAT(DISTINCT COALESCE(?wlabel, STR(?w)); separator="|") AS ?names) (SAMPLE(?alabel) AS ?label) WHERE {{
      GRAPH {QB} {{ ?q a luma:QualifiedBoundary ; luma:architecture ?architecture ; luma:workload ?w }}
      OPTIONAL {{ ?architecture rdfs:label ?alabel }} OPTIONAL {{ ?w rdfs:label ?wlabel }}
      OPTIONAL {{ GRAPH {QB} {{ ?q luma:attestedBy ?key }} {RUNNER_NAME} }} }}
    }} GROUP BY ?architecture ?name ORDER BY ?architecture ?name""")


def _arch(row: dict) -> str:
    return row.get("label") or local(row["architecture"])


def _min_architectures(r: Reader) -> int:
    run = derivation(r.kb.store, "recurring-binding")
    return int((run.parameters if run else {}).get("min_architectures", 2))


def limitation(rows: list[dict], need: int) -> str | None:
    """The sentence the report must carry when measured evidence spans fewer architectures than a
    recurrence needs, else None."""
    archs = sorted({_arch(x) for x in rows})
    if len(archs) >= need:
        return None
    if not archs:
        return "No measured, qualified boundary: no real machine's evidence in this KB."
    return fmt("All measured, qualified boundaries come from {} architecture ({}); a hardware requirement needs a "
               "binding that recurs on {} or more architectures, so this evidence qualifies boundaries on that "
               "machine but cannot say which hardware to ask for elsewhere: records from another machine type "
               "(`luma evidence record` there, then `luma evidence load`) are what would change that.",
               str(len(archs)), record(", ".join(archs)), str(need))


def section(r: Reader) -> tuple[Section, str | None]:
    """The "Measured on" section and its limitation sentence (None when the evidence spans enough
    architectures)."""
    rows = machines(r)
    note = limitation(rows, _min_architectures(r))
    table = [[record(_arch(x)), record(x.get("name") or "—"), x["boundaries"], x["workloads"],
              record(", ".join(sorted(x["names"].split("|"))))] for x in rows]
    paras = ["Where the measured, qualified boundaries were measured: per architecture and the runner key that "
             "signed them (a runner key stands for one machine)."]
    if note:
        paras.append(note)
    blocks = [Table("table-measured-on", ["architecture", "runner", "qualified boundaries", "workloads",
                                          "workload names"], table, "Machines behind the measured evidence")] if table else []
    return Section("measured-on", "Measured on", paras, blocks, empty="No measured, qualified boundary."), note
