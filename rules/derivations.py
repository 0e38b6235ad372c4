"""What the rules derived, and with which parameters: for the named queries and reports that read
derived facts instead of repeating a rule's logic.

A rule run leaves, in each rule's derived graph, its derivation (`prov:Activity` with
`luma:rule`, `luma:ruleVersion` and one `luma:parameter "name=value"` per parameter; see
rules/engine.py), and in the store's bookkeeping graph a run token with the ledger watermark the
run saw (`luma:runThrough`, rules/state.py). From these a reader tells "the rules have not run"
from "the rules derived nothing", names the parameters its facts were derived with, and counts
the ledger records that came in after the run (their facts are not derived yet).
"""

from __future__ import annotations

from dataclasses import dataclass

from luma.errors import LumaError, RulesNotRun
from luma.kb.vocab import ID, LUMA, PROV
from luma.rules.state import DERIVED

_RULES = ID + "rules"
_KB = ID + "kb"


@dataclass(frozen=True)
class Derivation:
    """The run of one rule whose facts its derived graph holds."""

    rule: str
    version: int
    parameters: dict[str, str]  # name -> value, as the run recorded them
    activity: str
    exploratory: bool = False
    #: Ledger ids the KB holds that the last rules run did not see: (first, last), or None.
    unseen: tuple[int, int] | None = None

    def text(self) -> str:
        """`rule qualified-boundary v4 (min_repetitions=3)`, as `luma kb explain` names a run."""
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.parameters.items()))
        return f"rule {self.rule} v{self.version}" + (f" ({params})" if params else "")

    def parameter(self, name: str) -> str:
        """One parameter's value as recorded; LumaError when the run recorded none of that name."""
        try:
            return self.parameters[name]
        except KeyError:
            raise LumaError(f"the run of rule {self.rule} recorded no parameter {name!r}",
                            field="parameter") from None

    def stale_note(self) -> str | None:
        """A sentence for readers when records came in after the run, else None."""
        if self.unseen is None:
            return None
        first, last = self.unseen
        ids = f"#{first}" if first == last else f"#{first}–#{last}"
        return (f"ledger record(s) {ids} came in after the last `luma rules run`: what they would derive is "
                "not here yet (run `luma rules run`)")


def derivation(store, rule_id: str) -> Derivation | None:
    """The run of `rule_id` that made its derived graph, or None when the rules have not run it;
    RulesNotRun when the last run did not finish. `store`: the KB's quad store (or an
    exploratory copy)."""
    graph = DERIVED + rule_id
    rows = store.select(
        f"SELECT ?a ?v ?p ?x WHERE {{ GRAPH <{graph}> {{ ?a a <{PROV}Activity> ; <{LUMA}rule> ?r ; "
        f"<{LUMA}ruleVersion> ?v OPTIONAL {{ ?a <{LUMA}parameter> ?p }} "
        f"OPTIONAL {{ ?a <{LUMA}exploratory> ?x }} }} }}", union=False)
    if not rows:
        return None
    if not store.select(f"SELECT ?t WHERE {{ <{_RULES}> <{LUMA}runToken> ?t }}", union=False):
        # A run clears its token first and writes it last: derived graphs without one may be
        # half-written (and hold two derivations).
        raise RulesNotRun(f"the last `luma rules run` did not finish, so what rule {rule_id} derived may be "
                          "incomplete: run `luma rules run` again")
    # One run per derived graph (a run replaces the graph); the smallest IRI if a crash left two.
    act = min(r["a"] for r in rows)
    mine = [r for r in rows if r["a"] == act]
    params = dict(p.split("=", 1) for p in sorted({r["p"] for r in mine if "p" in r}) if "=" in p)
    return Derivation(rule_id, int(mine[0]["v"]), params, act, any(r.get("x") == "true" for r in mine),
                      unseen(store))


def unseen(store) -> tuple[int, int] | None:
    """The ledger ids (first, last) the KB holds and the last rules run did not see; None when it
    saw them all or no run recorded what it saw."""
    rows = store.select(f"SELECT ?seen ?now WHERE {{ OPTIONAL {{ <{_RULES}> <{LUMA}runThrough> ?seen }} "
                        f"OPTIONAL {{ <{_KB}> <{LUMA}projectedThrough> ?now }} }}", union=False)
    if not rows or "seen" not in rows[0] or "now" not in rows[0]:
        return None
    seen, now = int(rows[0]["seen"]), int(rows[0]["now"])
    return (seen + 1, now) if now > seen else None


def require(store, rule_id: str, reader: str, rules: list | None = None) -> Derivation:
    """The run of `rule_id`; RulesNotRun naming `reader` (what wanted its facts) when there is
    none, or when `rules` (the rule set in use, rules/loader.py) has another version of the rule
    than the one that derived the facts (an upgrade changed what they mean)."""
    found = derivation(store, rule_id)
    if found is None:
        raise RulesNotRun(f"{reader} reads what rule {rule_id} derives, and the rules have not run on this "
                          "knowledge base: run `luma rules run` first")
    current = next((r for r in rules or () if r.id == rule_id), None)
    if current is not None and current.version != found.version:
        raise RulesNotRun(f"{reader} reads what rule {rule_id} derives, and its facts here were derived by v"
                          f"{found.version} of the rule, not v{current.version}: run `luma rules run` first")
    return found
